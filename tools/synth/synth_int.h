/* Internals shared by the synthesizer's source files. */
#ifndef HTR_SYNTH_INT_H
#define HTR_SYNTH_INT_H

#include "prog.h"
#include "ptw.h"

#include <intel-pt.h>
#include <stdio.h>

/* Text starts one page into the image; see elf.c. */
#define SYNTH_TEXT_OFF 0x1000u

int synth_write_elf(FILE *fp, const struct prog *p, uint64_t link);

#endif

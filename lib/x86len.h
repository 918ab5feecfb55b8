/*
 * Just enough x86 decoding for the builder: which instructions enter or
 * leave a frame, and how long calls are (a call's return address).  libipt
 * 2.0.5's block decoder does not always give the class (indirect jumps and
 * far transfers from its block cache) and never the call's length.
 */
#ifndef HTR_LIB_X86LEN_H
#define HTR_LIB_X86LEN_H

#include "icls.h"

#include <stddef.h>
#include <stdint.h>

/*
 * Class of the instruction at @p (@n bytes readable; @is64: 64-bit mode,
 * where 0x40-0x4f are REX prefixes) and, for calls, software interrupts
 * and syscalls, its length in *@len (0 if unknown or not one of those).
 * Only what changes frames matters (an indirect near jump may: it is
 * HTR_IC_JUMP); everything else is HTR_IC_OTHER.
 */
enum htr_icls htr_x86__classify(const uint8_t *p, size_t n, int is64,
				 int *len);

/* Whether the instruction at @p is a jump that needs a TIP to go on: an
 * indirect near or far jump (FF /4, FF /5) or a direct far one (EA). */
int htr_x86__jump_reads_trace(const uint8_t *p, size_t n, int is64);

#endif

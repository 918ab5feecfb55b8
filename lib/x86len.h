/* Length of x86-64 call instructions, so the builder knows a call's return
 * address (libipt's block decoder reports only where the call is). */
#ifndef HTR_LIB_X86LEN_H
#define HTR_LIB_X86LEN_H

#include <stddef.h>
#include <stdint.h>

/* Length in bytes of the near call (E8, or FF /2) or far call (FF /3) at
 * @p, read from at most @n bytes; -1 if it is not one of those. */
int htr_x86__call_len(const uint8_t *p, size_t n);

#endif

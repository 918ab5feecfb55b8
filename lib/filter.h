/* The IP filters of a trace (IA32_RTIT_ADDRn), as the decoders ask
 * them. */
#ifndef HTR_FILTER_H
#define HTR_FILTER_H

#include <stdint.h>

struct pt_conf_addr_filter;

/* Whether code at @ip is traced under the IP filters @f, as libipt's
 * pt_filter_addr_check() has it (ranges inclusive): not in a TraceStop
 * region, and in a FilterEn region if there is one. */
int htr_filter__passes(const struct pt_conf_addr_filter *f, uint64_t ip);

#endif

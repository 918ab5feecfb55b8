/* IP filters. */
#include "filter.h"

#include <intel-pt.h>

int htr_filter__passes(const struct pt_conf_addr_filter *f, uint64_t ip)
{
	const uint64_t r[8] = { f->addr0_a, f->addr0_b, f->addr1_a,
				f->addr1_b, f->addr2_a, f->addr2_b,
				f->addr3_a, f->addr3_b };
	int filters = 0, in = 0;
	unsigned n;

	for (n = 0; n < 4; n++) {
		unsigned cfg = (unsigned) (f->config.addr_cfg >> (4 * n)) & 15;
		int hit = r[2 * n] <= ip && ip <= r[2 * n + 1];

		if (cfg == 2 && hit)            /* TraceStop */
			return 0;
		if (cfg == 1) {                 /* FilterEn */
			filters = 1;
			in |= hit;
		}
	}
	return !filters || in;
}

#include "same_htr.h"
#include "slurp.h"

#include "format.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int htr_files_same(const char *a, const char *b)
{
	size_t na = 0, nb = 0, t = offsetof(struct htr_disk_header, build_time),
	       h = offsetof(struct htr_disk_header, header_hash);
	uint8_t *pa = htr_test_slurp(a, &na), *pb = htr_test_slurp(b, &nb);
	int same = pa && pb && na == nb && na >= sizeof(struct htr_disk_header);

	if (same) {
		/* The build time, and the header hash that covers it. */
		memset(pa + t, 0, 8);
		memset(pb + t, 0, 8);
		memset(pa + h, 0, 8);
		memset(pb + h, 0, 8);
		same = memcmp(pa, pb, na) == 0;
	}
	free(pa);
	free(pb);
	return same;
}

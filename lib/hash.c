#include "format.h"

#include <string.h>

/* Word-at-a-time multiply-xorshift; ~8 bytes per multiply. */
uint64_t htr_hash__bytes(uint64_t h, const void *p, uint64_t n)
{
	const unsigned char *s = p;
	uint64_t w;

	while (n >= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
		s += 8;
		n -= 8;
	}
	if (n) {
		w = 0;
		memcpy(&w, s, n);
		h = (h ^ w ^ (n << 56)) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	return h;
}

/*
 * Byte helpers shared by the .htr format and the analyzers' codecs:
 * little-endian integers at any alignment and the project's 64-bit hash.
 * Kept apart from format.h so code that encodes its own values (lib/
 * analyze_*.c) needs nothing of the .htr layout.
 */
#ifndef HTR_LIB_LE_H
#define HTR_LIB_LE_H

#include <stdint.h>

/* Little-endian integers of @w bytes (1..8) at any alignment. */
static inline uint64_t htr_disk__get_le(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < w; i++)
		v |= (uint64_t) p[i] << (8 * i);
	return v;
}

static inline void htr_disk__put_le(uint8_t *p, uint64_t v, unsigned w)
{
	unsigned i;

	for (i = 0; i < w; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

/* A fast 64-bit hash for identities and checksums (not cryptographic).
 * Streaming: h = htr_hash__bytes(h, p, n) over consecutive pieces gives the
 * same result as one call only if every piece but the last has a length
 * that is a multiple of 8. Start with HTR_HASH_SEED. */
#define HTR_HASH_SEED 0x6a09e667f3bcc909ull
uint64_t htr_hash__bytes(uint64_t h, const void *p, uint64_t n);

#endif

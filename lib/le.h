/*
 * Byte helpers shared by the .htr format and the analyzers' codecs:
 * little-endian integers at any alignment and the project's 64-bit hash.
 * Kept apart from format.h so code that encodes its own values (lib/
 * analyze_*.c) needs nothing of the .htr layout.
 */
#ifndef HTR_LIB_LE_H
#define HTR_LIB_LE_H

#include <stdint.h>
#include <string.h>

/* Little-endian integers of @w bytes (1..8) at any alignment.  On a
 * little-endian host a copy, which a constant @w makes a load or a store:
 * byte by byte they were a fifth of the work of writing and linking a
 * call-dense tree. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline uint64_t htr_disk__get_le(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;

	memcpy(&v, p, w);
	return v;
}

static inline void htr_disk__put_le(uint8_t *p, uint64_t v, unsigned w)
{
	memcpy(p, &v, w);
}
#else
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
#endif

/* A fast 64-bit hash for identities and checksums (not cryptographic).
 * Streaming: h = htr_hash__bytes(h, p, n) over consecutive pieces gives the
 * same result as one call only if every piece but the last has a length
 * that is a multiple of 8. Start with HTR_HASH_SEED. */
#define HTR_HASH_SEED 0x6a09e667f3bcc909ull
uint64_t htr_hash__bytes(uint64_t h, const void *p, uint64_t n);

/* The body hash of format version 3 (FORMAT.md, "Hashes"): the bytes
 * [@start, @end) cut at file offsets that are multiples of
 * HTR_BODY_PIECE, each piece hashed from the seed, then the pieces' hashes
 * as little-endian words.  Versions 1 and 2: one hash of all the bytes.
 * @map is the whole file.  @done (may be NULL) is told of each piece
 * once it is hashed, so that a reader can let its pages go. */
#define HTR_BODY_PIECE (1u << 20)
uint64_t htr_hash__body(const uint8_t *map, uint64_t start, uint64_t end,
			uint32_t version,
			void (*done)(void *ctx, const uint8_t *p, uint64_t n),
			void *ctx);

/* The same hash, fed piece by piece while a file is written: each piece's
 * bytes in order, pieces in any order. */
struct htr_body_hash {
	uint64_t start, end;
	uint64_t first;            /* index of the first piece */
	struct htr_body_piece {
		uint64_t h, carry;
		uint64_t fed;      /* bytes so far */
	} *piece;
	uint64_t npieces;
};

/* Returns 0 or HTR_ERR_NOMEM. */
int htr_body_hash__init(struct htr_body_hash *b, uint64_t start,
			uint64_t end);
/* @n bytes at file offset @off, within [start, end). */
void htr_body_hash__feed(struct htr_body_hash *b, uint64_t off,
			 const void *p, uint64_t n);
/* The hash into *@out; returns 0, or -1 if some byte was not fed or was
 * fed out of order. */
int htr_body_hash__final(const struct htr_body_hash *b, uint64_t *out);
void htr_body_hash__free(struct htr_body_hash *b);

#endif

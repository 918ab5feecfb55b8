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
 * little-endian host copies of 8, 4, 2 and 1 bytes, which a constant @w
 * makes one to three loads or stores: byte by byte they were a fifth of
 * the work of writing and linking a call-dense tree.  Not one copy of @w
 * bytes into a zeroed word: that goes through memory, and the word's load
 * waits for the narrower stores before it (a store-forwarding stall). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline uint64_t htr_disk__get_le(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;
	uint32_t x32;
	uint16_t x16;
	unsigned at = 0;

	if (w == 8) {
		memcpy(&v, p, 8);
		return v;
	}
	if (w & 4) {
		memcpy(&x32, p, 4);
		v = x32;
		at = 4;
	}
	if (w & 2) {
		memcpy(&x16, p + at, 2);
		v |= (uint64_t) x16 << (8 * at);
		at += 2;
	}
	if (w & 1)
		v |= (uint64_t) p[at] << (8 * at);
	return v;
}

static inline void htr_disk__put_le(uint8_t *p, uint64_t v, unsigned w)
{
	uint32_t x32;
	uint16_t x16;
	unsigned at = 0;

	if (w == 8) {
		memcpy(p, &v, 8);
		return;
	}
	if (w & 4) {
		x32 = (uint32_t) v;
		memcpy(p, &x32, 4);
		at = 4;
	}
	if (w & 2) {
		x16 = (uint16_t) (v >> (8 * at));
		memcpy(p + at, &x16, 2);
		at += 2;
	}
	if (w & 1)
		p[at] = (uint8_t) (v >> (8 * at));
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

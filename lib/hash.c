#include "format.h"

#include "err.h"
#include "le.h"

#include <stdlib.h>
#include <string.h>

static inline uint64_t mix(uint64_t h, uint64_t w)
{
	h = (h ^ w) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* Word-at-a-time multiply-xorshift; ~8 bytes per multiply. */
uint64_t htr_hash__bytes(uint64_t h, const void *p, uint64_t n)
{
	const unsigned char *s = p;
	uint64_t w;

	while (n >= 8) {
		memcpy(&w, s, 8);
		h = mix(h, w);
		s += 8;
		n -= 8;
	}
	if (n)
		h = mix(h, htr_disk__get_le(s, (unsigned) n) ^ (n << 56));
	return h;
}

static uint64_t add_piece(uint64_t acc, uint64_t h)
{
	uint8_t le[8];

	htr_disk__put_le(le, h, 8);
	return htr_hash__bytes(acc, le, 8);
}

uint64_t htr_hash__body(const uint8_t *map, uint64_t start, uint64_t end,
			uint32_t version,
			void (*done)(void *ctx, const uint8_t *p, uint64_t n),
			void *ctx)
{
	uint64_t acc = HTR_HASH_SEED, flat = HTR_HASH_SEED, a, b;

	for (a = start; a < end; a = b) {
		b = (a / HTR_BODY_PIECE + 1) * HTR_BODY_PIECE;
		if (b > end)
			b = end;
		/* Versions 1 and 2 stream: every piece but the last has a
		 * length that is a multiple of 8 (body_start is). */
		if (version < 3)
			flat = htr_hash__bytes(flat, map + a, b - a);
		else
			acc = add_piece(acc, htr_hash__bytes(HTR_HASH_SEED,
							     map + a, b - a));
		if (done)
			done(ctx, map + a, b - a);
	}
	return version < 3 ? flat : acc;
}

int htr_body_hash__init(struct htr_body_hash *b, uint64_t start, uint64_t end)
{
	uint64_t i;

	memset(b, 0, sizeof(*b));
	b->start = start;
	b->end = end;
	if (end <= start)
		return 0;
	b->first = start / HTR_BODY_PIECE;
	b->npieces = (end - 1) / HTR_BODY_PIECE + 1 - b->first;
	b->piece = malloc(b->npieces * sizeof(*b->piece));
	if (!b->piece)
		return HTR_ERR_NOMEM;
	for (i = 0; i < b->npieces; i++) {
		b->piece[i].h = HTR_HASH_SEED;
		b->piece[i].carry = 0;
		b->piece[i].fed = 0;
	}
	return 0;
}

/* The first byte of piece @i. */
static uint64_t piece_start(const struct htr_body_hash *b, uint64_t i)
{
	uint64_t a = (b->first + i) * HTR_BODY_PIECE;

	return a < b->start ? b->start : a;
}

/*
 * Whole pieces several at once: each piece's hash is one chain of
 * multiplies that waits on itself (about six cycles a word); four chains
 * share the wait and run at close to the multiplier's rate, two at half
 * that.  Pieces @i to @i + @k - 1 (k <= 4), none fed yet, from @s on.
 */
static void feed_whole(struct htr_body_hash *b, uint64_t i, unsigned k,
		       const unsigned char *s)
{
	const unsigned char *s1 = s + HTR_BODY_PIECE, *s2 = s1 + HTR_BODY_PIECE,
			    *s3 = s2 + HTR_BODY_PIECE;
	struct htr_body_piece *q = &b->piece[i];
	uint64_t h0 = q[0].h, h1 = k > 1 ? q[1].h : 0, h2, h3;
	uint64_t w0, w1, w2, w3, j;

	if (k == 4) {
		h2 = q[2].h;
		h3 = q[3].h;
		for (j = 0; j < HTR_BODY_PIECE; j += 8) {
			memcpy(&w0, s + j, 8);
			memcpy(&w1, s1 + j, 8);
			memcpy(&w2, s2 + j, 8);
			memcpy(&w3, s3 + j, 8);
			h0 = mix(h0, w0);
			h1 = mix(h1, w1);
			h2 = mix(h2, w2);
			h3 = mix(h3, w3);
		}
		q[2].h = h2;
		q[3].h = h3;
	} else if (k >= 2) {
		for (j = 0; j < HTR_BODY_PIECE; j += 8) {
			memcpy(&w0, s + j, 8);
			memcpy(&w1, s1 + j, 8);
			h0 = mix(h0, w0);
			h1 = mix(h1, w1);
		}
		if (k == 3)
			q[2].h = htr_hash__bytes(q[2].h, s2, HTR_BODY_PIECE);
	} else {
		h0 = htr_hash__bytes(h0, s, HTR_BODY_PIECE);
	}
	q[0].h = h0;
	if (k > 1)
		q[1].h = h1;
	for (j = 0; j < k; j++)
		q[j].fed = HTR_BODY_PIECE;
}

/* How many whole pieces, up to four, from @off on (a piece boundary) are
 * in the @n bytes and not begun yet. */
static unsigned whole_pieces(const struct htr_body_hash *b, uint64_t off,
			     uint64_t n)
{
	uint64_t i = off / HTR_BODY_PIECE - b->first;
	unsigned k = 0;

	if (off % HTR_BODY_PIECE || off < b->start)
		return 0;
	while (k < 4 && (k + 1) * (uint64_t) HTR_BODY_PIECE <= n &&
	       off + (k + 1) * (uint64_t) HTR_BODY_PIECE <= b->end &&
	       b->piece[i + k].fed == 0)
		k++;
	return k;
}

/* Feed the part of @n bytes at @off that lies in its piece; returns its
 * length, or 0 when the bytes cannot be taken (final() then fails). */
static uint64_t feed_part(struct htr_body_hash *b, uint64_t off,
			  const unsigned char *s, uint64_t n)
{
	uint64_t i = off / HTR_BODY_PIECE - b->first;
	uint64_t room = HTR_BODY_PIECE - off % HTR_BODY_PIECE;
	uint64_t k = n < room ? n : room, len = k;
	struct htr_body_piece *q;

	if (off < b->start || off + k > b->end)
		return 0;       /* out of range: final() says so */
	q = &b->piece[i];
	if (off != piece_start(b, i) + q->fed) {
		q->fed = UINT64_MAX;    /* out of order */
		return 0;
	}
	q->fed += k;
	/* Bytes of a word begun earlier wait in carry (low bytes first);
	 * fed - k bytes came before this part. */
	while (k) {
		unsigned have = (unsigned) ((q->fed - k) & 7);

		if (have || k < 8) {
			q->carry |= (uint64_t) *s++ << (8 * have);
			k--;
			if (have == 7) {
				q->h = mix(q->h, q->carry);
				q->carry = 0;
			}
		} else {
			/* Word-aligned in the piece: whole words at once, as
			 * htr_hash__bytes. */
			uint64_t words = k & ~(uint64_t) 7;

			q->h = htr_hash__bytes(q->h, s, words);
			s += words;
			k -= words;
		}
	}
	return len;
}

void htr_body_hash__feed(struct htr_body_hash *b, uint64_t off, const void *p,
			 uint64_t n)
{
	const unsigned char *s = p;

	while (n) {
		unsigned w = whole_pieces(b, off, n);
		uint64_t k;

		if (w >= 2) {
			feed_whole(b, off / HTR_BODY_PIECE - b->first, w, s);
			k = w * (uint64_t) HTR_BODY_PIECE;
		} else if (!(k = feed_part(b, off, s, n))) {
			return;
		}
		off += k;
		s += k;
		n -= k;
	}
}

int htr_body_hash__final(const struct htr_body_hash *b, uint64_t *out)
{
	uint64_t acc = HTR_HASH_SEED, i;

	for (i = 0; i < b->npieces; i++) {
		const struct htr_body_piece *q = &b->piece[i];
		uint64_t a = piece_start(b, i), e = (b->first + i + 1) *
						    HTR_BODY_PIECE;
		uint64_t h = q->h, tail = q->fed & 7;

		if (e > b->end)
			e = b->end;
		if (q->fed != e - a)
			return -1;
		if (tail)
			h = mix(h, q->carry ^ (tail << 56));
		acc = add_piece(acc, h);
	}
	*out = acc;
	return 0;
}

void htr_body_hash__free(struct htr_body_hash *b)
{
	free(b->piece);
	b->piece = NULL;
}

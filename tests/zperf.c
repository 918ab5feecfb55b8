/*
 * zperf: rewrite a perf.data (file format) as perf record -z lays it out,
 * for tests of the compressed reader.  The kernel's records (types below
 * 64: MMAP, COMM, AUX, SWITCH, ...) go into PERF_RECORD_COMPRESSED
 * records, one zstd frame each of at most PIECE bytes, cut anywhere (so
 * records straddle them, as perf's do); perf's own records (AUXTRACE and
 * its trace, AUXTRACE_INFO, ...) stay plain and in place, as perf record
 * writes them; the HEADER_COMPRESSED feature is added.  `perf script` on
 * the result must print what it prints on the input: that checks the
 * layout with perf's own reader.
 *
 * usage: zperf IN OUT [PIECE]   (PIECE default 4096, at most 32768)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define FEAT_COMPRESSED 27
#define REC_COMPRESSED 81
#define USER_TYPE_START 64
#define REC_AUXTRACE 71

static uint64_t get(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;

	while (w--)
		v = v << 8 | p[w];
	return v;
}

static void put(uint8_t *p, uint64_t v, unsigned w)
{
	while (w--) {
		*p++ = (uint8_t) v;
		v >>= 8;
	}
}

struct out {
	uint8_t *p;
	size_t n, cap;
};

static void emit(struct out *o, const void *p, size_t n)
{
	if (o->n + n > o->cap) {
		o->cap = (o->n + n) * 2;
		o->p = realloc(o->p, o->cap);
		if (!o->p) {
			fputs("zperf: out of memory\n", stderr);
			exit(1);
		}
	}
	memcpy(o->p + o->n, p, n);
	o->n += n;
}

/* The kernel records gathered so far, as COMPRESSED records of at most
 * @piece input bytes each. */
static void flush(struct out *o, struct out *pend, size_t piece,
		  ZSTD_CCtx *z, size_t *max_piece)
{
	static uint8_t buf[65536];
	size_t at, n, c;

	for (at = 0; at < pend->n; at += n) {
		n = pend->n - at < piece ? pend->n - at : piece;
		c = ZSTD_compressCCtx(z, buf + 8, sizeof(buf) - 8,
				      pend->p + at, n, 1);
		if (ZSTD_isError(c) || c + 8 > 65535) {
			fprintf(stderr, "zperf: compress: %s\n",
				ZSTD_isError(c) ? ZSTD_getErrorName(c) :
				"a piece too big");
			exit(1);
		}
		put(buf, REC_COMPRESSED, 4);
		put(buf + 4, 0, 2);
		put(buf + 6, c + 8, 2);
		emit(o, buf, c + 8);
		if (n > *max_piece)
			*max_piece = n;
	}
	pend->n = 0;
}

int main(int argc, char **argv)
{
	struct out o = { 0 }, pend = { 0 };
	size_t piece = argc > 3 ? strtoul(argv[3], NULL, 0) : 4096;
	size_t max_piece = 0;
	uint64_t doff, dlen, off, nfeat = 0, k, at, hdr;
	uint8_t *d, bits[32], comp[20], ent[16];
	ZSTD_CCtx *z = ZSTD_createCCtx();
	FILE *f;
	long sz;
	int b;

	if (argc < 3 || !piece || piece > 32768 || !z) {
		fputs("usage: zperf IN OUT [PIECE]\n", stderr);
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (sz = ftell(f)) < 104 ||
	    fseek(f, 0, SEEK_SET) || !(d = malloc((size_t) sz)) ||
	    fread(d, 1, (size_t) sz, f) != (size_t) sz ||
	    memcmp(d, "PERFILE2", 8) || get(d + 8, 8) != 104) {
		fprintf(stderr, "zperf: %s: not a perf.data (file format)\n",
			argv[1]);
		return 1;
	}
	fclose(f);
	doff = get(d + 40, 8);
	dlen = get(d + 48, 8);
	memcpy(bits, d + 72, 32);
	for (b = 0; b < 256; b++)
		nfeat += bits[b / 8] >> (b % 8) & 1;
	if (doff + dlen + nfeat * 16 > (uint64_t) sz ||
	    bits[FEAT_COMPRESSED / 8] & 1u << (FEAT_COMPRESSED % 8)) {
		fprintf(stderr, "zperf: %s: bad or already compressed\n",
			argv[1]);
		return 1;
	}
	/* Header, attrs and ids as they are: all before the data. */
	emit(&o, d, doff);
	for (off = doff; off < doff + dlen; ) {
		unsigned type = (unsigned) get(d + off, 4);
		uint64_t size = get(d + off + 6, 2);

		if (size < 8 || off + size > doff + dlen) {
			fprintf(stderr, "zperf: %s: bad record at %llu\n",
				argv[1], (unsigned long long) off);
			return 1;
		}
		if (type == REC_AUXTRACE)
			size += get(d + off + 8, 8);
		if (type < USER_TYPE_START) {
			emit(&pend, d + off, size);
		} else {
			flush(&o, &pend, piece, z, &max_piece);
			emit(&o, d + off, size);
		}
		off += size;
	}
	flush(&o, &pend, piece, z, &max_piece);
	put(o.p + 48, o.n - doff, 8);
	/* The feature sections again, with HEADER_COMPRESSED among them:
	 * version 0, zstd, level 1, ratio 1, and perf's decompression buffer
	 * (mmap_len) as big as the biggest piece. */
	bits[FEAT_COMPRESSED / 8] |= 1u << (FEAT_COMPRESSED % 8);
	memcpy(o.p + 72, bits, 32);
	put(comp, 0, 4);
	put(comp + 4, 1, 4);
	put(comp + 8, 1, 4);
	put(comp + 12, 1, 4);
	put(comp + 16, max_piece, 4);
	hdr = o.n;
	at = hdr + (nfeat + 1) * 16;
	for (b = 0, k = 0; b < 256; b++) {
		uint64_t len;

		if (!(bits[b / 8] >> (b % 8) & 1))
			continue;
		len = b == FEAT_COMPRESSED ? sizeof(comp) :
		      get(d + doff + dlen + 16 * k + 8, 8);
		put(ent, at, 8);
		put(ent + 8, len, 8);
		emit(&o, ent, 16);
		at += len;
		k += b != FEAT_COMPRESSED;
	}
	for (b = 0, k = 0; b < 256; b++) {
		if (!(bits[b / 8] >> (b % 8) & 1))
			continue;
		if (b == FEAT_COMPRESSED) {
			emit(&o, comp, sizeof(comp));
			continue;
		}
		emit(&o, d + get(d + doff + dlen + 16 * k, 8),
		     get(d + doff + dlen + 16 * k + 8, 8));
		k++;
	}
	f = fopen(argv[2], "wb");
	if (!f || fwrite(o.p, 1, o.n, f) != o.n || fclose(f)) {
		fprintf(stderr, "zperf: %s: cannot write\n", argv[2]);
		return 1;
	}
	ZSTD_freeCCtx(z);
	free(o.p);
	free(pend.p);
	free(d);
	return 0;
}

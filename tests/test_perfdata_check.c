/*
 * The perf.data reader (lib/perfdata.c) against damaged copies of a real
 * recording, in process (fast enough for every truncation point).
 *
 *   test_perfdata_check FILE             the file reads; every truncation
 *                                        and 20000 random byte flips read
 *                                        or fail with one line naming it
 *   test_perfdata_check --bad-auxtrace FILE OUT DELTA
 *                                        write FILE with the first
 *                                        AUXTRACE record's size + DELTA
 *   test_perfdata_check --split FILE OUT
 *                                        write FILE with the first
 *                                        AUXTRACE buffer split in two
 *                                        records (a thread's trace in
 *                                        several buffers, as perf writes
 *                                        long recordings)
 *   test_perfdata_check --no-switches FILE OUT
 *                                        write FILE with its context-
 *                                        switch records made a type no
 *                                        reader knows (as if recorded
 *                                        without switch events)
 *   test_perfdata_check --rename FILE OUT FROM TO
 *                                        write FILE with every NUL-
 *                                        terminated FROM (a module's path
 *                                        in MMAP2 records and the build-
 *                                        id table) made TO, no longer,
 *                                        NUL-padded: records keep their
 *                                        sizes
 *
 *   test_perfdata_check --filters FILE STRING
 *                                        print the IP filter ranges
 *                                        STRING, as the recording's filter
 *                                        string, gives its first thread:
 *                                        "KIND START END" a line (KIND 1
 *                                        filter, 2 TraceStop; END
 *                                        excluded), then "unplaced N"; or
 *                                        the error
 *
 *   test_perfdata_check --user-only FILE
 *                                        FILE traced user and kernel
 *                                        code: each thread's or CPU's
 *                                        trace made user-only
 *                                        (htr_perfdata__user_only) must
 *                                        come out once more as it is
 *                                        (it is then user-only), with as
 *                                        many kernel stretches as FILE's
 *                                        TIPs from user into kernel code
 *                                        say; every truncation of it and
 *                                        2000 copies with random byte
 *                                        flips each a bounded trace
 *
 * Each read is also checked: every thread's trace chunk lies in the file.
 * exit: 0 ok, 1 a failure
 */
#include "perfdata.h"
#include "slurp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One read of @size bytes at @p: 1 if it went wrong (crash aside). */
static int check(const uint8_t *p, size_t size, int must_read,
		 const char *what)
{
	struct htr_perfdata *pd = NULL;
	struct htr_err err;
	size_t i, j;
	int rc;

	memset(&err, 0, sizeof(err));
	rc = htr_perfdata__parse(&pd, p, size, "t.data", &err);
	if (rc < 0) {
		if (must_read || strncmp(err.msg, "t.data: ", 8) ||
		    strchr(err.msg, '\n') || pd ||
		    (rc != HTR_ERR_CORRUPT && rc != HTR_ERR_FORMAT)) {
			printf("FAIL: %s: rc %d, '%s'\n", what, rc, err.msg);
			return 1;
		}
		return 0;
	}
	for (i = 0; i < pd->nthreads; i++)
		for (j = 0; j < pd->threads[i].nchunks; j++) {
			const struct htr_perf_chunk *c =
				&pd->threads[i].chunks[j];

			if (c->offset > size || c->size > size - c->offset) {
				printf("FAIL: %s: chunk past the end\n", what);
				htr_perfdata__close(pd);
				return 1;
			}
		}
	for (i = 0; i < pd->nthreads; i++)
		for (j = 0; j < pd->nmodules; j++)
			(void) htr_perfdata__thread_has(pd, &pd->threads[i],
							&pd->modules[j]);
	htr_perfdata__close(pd);
	return 0;
}

/* The offset of the first AUXTRACE record (71) in a file-format
 * perf.data, by walking the data section; 0 if none. */
static size_t first_auxtrace(const uint8_t *p, size_t size)
{
	uint64_t off, end, sz;

	if (size < 104)
		return 0;
	memcpy(&off, p + 40, 8);
	memcpy(&end, p + 48, 8);
	end += off;
	while (off + 8 <= end && end <= size) {
		uint32_t type;
		uint16_t rsz;

		memcpy(&type, p + off, 4);
		memcpy(&rsz, p + off + 6, 2);
		if (type == 71)
			return (size_t) off;
		if (rsz < 8)
			return 0;
		sz = rsz;
		off += sz;
	}
	return 0;
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* File format only: every section offset past the insertion point moves
 * by the 48 bytes of the new AUXTRACE header. */
static int split(const char *in, const char *out)
{
	uint8_t *p, *q;
	size_t size, at, cut, k, nfeat = 0;
	uint64_t psize, aoff, alen, asz, doff, dlen, i, toff;
	FILE *f;

	p = htr_test_slurp(in, &size);
	if (!p || !(at = first_auxtrace(p, size)) || get64(p + 8) != 104) {
		printf("FAIL: %s: no AUXTRACE record in a file-format perf.data\n",
		       in);
		return 1;
	}
	psize = get64(p + at + 8);
	if (psize < 16) {
		printf("FAIL: %s: AUXTRACE buffer too small to split\n", in);
		return 1;
	}
	cut = at + 48 + (size_t) (psize / 3);       /* any byte will do */
	q = malloc(size + 48);
	if (!q)
		return 1;
	memcpy(q, p, cut);
	memcpy(q + cut, p + at, 48);                /* the second header */
	memcpy(q + cut + 48, p + cut, size - cut);
	put64(q + at + 8, psize / 3);
	put64(q + cut + 8, psize - psize / 3);
	put64(q + cut + 16, get64(p + at + 16) + psize / 3);   /* offset */
	/* header: data grows; attrs' ids and the features move if after */
	asz = get64(p + 16);
	aoff = get64(p + 24);
	alen = get64(p + 32);
	doff = get64(p + 40);
	dlen = get64(p + 48);
	put64(q + 48, dlen + 48);
	if (aoff > cut)
		put64(q + 24, aoff + 48);
	for (i = 0; asz >= 16 && i < alen / asz; i++) {
		size_t e = (size_t) (aoff + i * asz + asz - 16);
		size_t e2 = e > cut ? e + 48 : e;

		if (get64(p + e) > cut)
			put64(q + e2, get64(p + e) + 48);
	}
	for (k = 0; k < 256; k++)
		nfeat += (get64(p + 72 + (k / 64) * 8) >> (k % 64)) & 1;
	toff = doff + dlen + 48;                    /* in q */
	for (k = 0; k < nfeat; k++)
		put64(q + toff + 16 * k, get64(q + toff + 16 * k) + 48);
	f = fopen(out, "wb");
	if (!f || fwrite(q, 1, size + 48, f) != size + 48 || fclose(f)) {
		printf("FAIL: cannot write %s\n", out);
		return 1;
	}
	free(q);
	free(p);
	return 0;
}

/* File format: walk the data section (AUXTRACE payloads included). */
static int no_switches(const char *in, const char *out)
{
	size_t size, n = 0;
	uint8_t *p = htr_test_slurp(in, &size);
	uint64_t off, end;
	FILE *f;

	if (!p || size < 104) {
		printf("FAIL: %s: not a file-format perf.data\n", in);
		return 1;
	}
	off = get64(p + 40);
	end = off + get64(p + 48);
	while (off + 8 <= end && end <= size) {
		uint32_t type;
		uint16_t rsz;

		memcpy(&type, p + off, 4);
		memcpy(&rsz, p + off + 6, 2);
		if (rsz < 8)
			break;
		if (type == 14 || type == 15) {
			type = 0x7fff;
			memcpy(p + off, &type, 4);
			n++;
		}
		off += rsz + (type == 71 && rsz >= 16 ? get64(p + off + 8) : 0);
	}
	f = fopen(out, "wb");
	if (!n || !f || fwrite(p, 1, size, f) != size || fclose(f)) {
		printf("FAIL: %s: no switch record, or cannot write %s\n", in,
		       out);
		return 1;
	}
	free(p);
	return 0;
}

static int rename_module(const char *in, const char *out, const char *from,
			 const char *to)
{
	size_t size, lf = strlen(from) + 1, lt = strlen(to), n = 0, i;
	uint8_t *p = htr_test_slurp(in, &size);
	FILE *f;

	if (!p || lt >= lf) {
		printf("FAIL: %s unreadable, or '%s' longer than '%s'\n", in, to,
		       from);
		return 1;
	}
	for (i = 0; i + lf <= size; i++)
		if (!memcmp(p + i, from, lf)) {
			memset(p + i, 0, lf);
			memcpy(p + i, to, lt);
			n++;
		}
	f = fopen(out, "wb");
	if (!n || !f || fwrite(p, 1, size, f) != size || fclose(f)) {
		printf("FAIL: %s: no '%s', or cannot write %s\n", in, from, out);
		return 1;
	}
	free(p);
	return 0;
}

static int filters(const char *path, const char *str)
{
	struct htr_perfdata *pd;
	struct htr_addr_filter r[HTR_ADDR_FILTERS_MAX];
	struct htr_err err;
	unsigned unplaced = 0;
	int n, i;

	if (htr_perfdata__open(&pd, path, &err) < 0 || !pd->nthreads) {
		printf("FAIL: %s: %s\n", path, err.msg);
		return 1;
	}
	free(pd->pt.filter);
	pd->pt.filter = strdup(str);
	n = htr_perfdata__filters(pd, &pd->threads[0], r, &unplaced, &err);
	if (n < 0)
		printf("error %s\n", err.msg);
	for (i = 0; i < n; i++)
		printf("%d %#llx %#llx\n", r[i].kind,
		       (unsigned long long) r[i].start,
		       (unsigned long long) r[i].end);
	if (n >= 0)
		printf("unplaced %u\n", unplaced);
	htr_perfdata__close(pd);
	return 0;
}

/* One user_only() of @n bytes at @p (its own buffer): its output into
 * *@out (malloc'ed, *@on bytes) if @out; 1 if it went wrong. */
static int user_only(const uint8_t *p, size_t n, uint8_t **out, size_t *on,
		     uint64_t *stretches, const char *what)
{
	struct htr_perf_joined j;
	struct htr_perf_kstats ks;
	struct htr_err err;

	memset(&j, 0, sizeof(j));
	memset(&err, 0, sizeof(err));
	j.data = p;
	j.size = n;
	if (htr_perfdata__user_only(&j, &ks, &err) != 0) {
		printf("FAIL: %s: %s\n", what, err.msg);
		return 1;
	}
	/* Each packet grows by at most 7 bytes (a 2-byte TIP written as a
	 * 9-byte one, a TIP.PGE's MODE.Exec): at most 4.5 times. */
	if (j.size > n / 2 * 9 + 16) {
		printf("FAIL: %s: %zu bytes from %zu\n", what,
		       (size_t) j.size, n);
		htr_perfdata__unjoin(&j);
		return 1;
	}
	if (stretches)
		*stretches = ks.stretches;
	if (out) {
		*out = malloc(j.size ? j.size : 1);
		if (*out)
			memcpy(*out, j.data, j.size);
		*on = (size_t) j.size;
	}
	if (j.map)
		htr_perfdata__unjoin(&j);
	return out && !*out;
}

static int user_only_check(const char *path)
{
	struct htr_perfdata *pd = NULL;
	struct htr_err err;
	uint8_t *p, *a = NULL, *b = NULL, *q;
	size_t size, an = 0, bn = 0, i, k, n, traces = 0;
	uint64_t st = 0, st2 = 0, seed = 0x2545f4914f6cdd1dull;
	int fails = 0;

	p = htr_test_slurp(path, &size);
	memset(&err, 0, sizeof(err));
	if (!p || htr_perfdata__parse(&pd, p, size, path, &err) < 0 ||
	    !pd->pt.kernel) {
		printf("FAIL: %s: %s\n", path, p ? (err.msg[0] ? err.msg :
		       "not a trace of user and kernel code") : "unreadable");
		return 1;
	}
	for (i = 0; i < pd->nthreads + pd->ncpus; i++) {
		const struct htr_perf_chunk *c = i < pd->nthreads ?
			pd->threads[i].chunks : pd->cpus[i - pd->nthreads].chunks;
		size_t nc = i < pd->nthreads ? pd->threads[i].nchunks :
			    pd->cpus[i - pd->nthreads].nchunks;
		struct htr_perf_joined j;

		if (!nc)
			continue;
		if (htr_perfdata__join(pd->data, c, nc, &j, &err) != 0) {
			printf("FAIL: join: %s\n", err.msg);
			return 1;
		}
		traces++;
		/* Copies of their own size: ASan sees a read past them. */
		q = malloc(j.size);
		memcpy(q, j.data, j.size);
		fails += user_only(q, j.size, &a, &an, &st, "the trace");
		fails += user_only(a, an, &b, &bn, &st2, "its user-only trace");
		if (!fails && (an != bn || memcmp(a, b, an) || st2 || !st)) {
			printf("FAIL: trace %zu: %llu stretches; user-only "
			       "again: %zu bytes of %zu (%s), %llu stretches\n",
			       i, (unsigned long long) st, bn, an,
			       an == bn && !memcmp(a, b, an) ? "the same" :
			       "others", (unsigned long long) st2);
			fails++;
		}
		printf("trace %zu: %zu bytes, %llu kernel stretches, %zu "
		       "user-only\n", i, (size_t) j.size,
		       (unsigned long long) st, an);
		free(a);
		free(b);
		a = b = NULL;
		for (n = 0; n < j.size && fails <= 10; n++) {
			uint8_t *t = malloc(n ? n : 1);

			memcpy(t, j.data, n);
			fails += user_only(t, n, NULL, NULL, NULL, "a cut");
			free(t);
		}
		for (k = 0; k < 2000 && fails <= 10; k++) {
			memcpy(q, j.data, j.size);
			for (n = 0; n < 4; n++) {
				seed = seed * 6364136223846793005ull +
				       1442695040888963407ull;
				q[(seed >> 16) % j.size] ^=
					(uint8_t) (1 + (seed >> 8) % 255);
			}
			fails += user_only(q, j.size, NULL, NULL, NULL,
					   "flips");
		}
		free(q);
		htr_perfdata__unjoin(&j);
	}
	htr_perfdata__close(pd);
	free(p);
	if (!traces) {
		printf("FAIL: %s: no trace\n", path);
		fails++;
	}
	printf("user-only: %zu traces, %d failures\n", traces, fails);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	uint8_t *p, *q;
	size_t size, n, i, at;
	unsigned long long seed = 0x9e3779b97f4a7c15ull;
	int fails = 0;
	char what[64];

	if (argc == 5 && !strcmp(argv[1], "--bad-auxtrace")) {
		FILE *f;
		uint64_t v;

		p = htr_test_slurp(argv[2], &size);
		if (!p || !(at = first_auxtrace(p, size))) {
			printf("FAIL: %s: no AUXTRACE record\n", argv[2]);
			return 1;
		}
		memcpy(&v, p + at + 8, 8);
		v += (uint64_t) strtoll(argv[4], NULL, 0);
		memcpy(p + at + 8, &v, 8);
		f = fopen(argv[3], "wb");
		if (!f || fwrite(p, 1, size, f) != size || fclose(f)) {
			printf("FAIL: cannot write %s\n", argv[3]);
			return 1;
		}
		free(p);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "--filters"))
		return filters(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "--split"))
		return split(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "--user-only"))
		return user_only_check(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "--no-switches"))
		return no_switches(argv[2], argv[3]);
	if (argc == 6 && !strcmp(argv[1], "--rename"))
		return rename_module(argv[2], argv[3], argv[4], argv[5]);
	if (argc != 2) {
		fprintf(stderr, "usage: test_perfdata_check FILE\n");
		return 2;
	}
	p = htr_test_slurp(argv[1], &size);
	if (!p) {
		printf("FAIL: cannot read %s\n", argv[1]);
		return 1;
	}
	fails += check(p, size, 1, "whole file");
	/* Every truncation point, each copy in a buffer of its own size (so
	 * ASan sees any read past it). */
	for (n = 0; n < size; n++) {
		q = malloc(n ? n : 1);
		if (!q)
			return 1;
		memcpy(q, p, n);
		snprintf(what, sizeof(what), "cut at %zu", n);
		fails += check(q, n, 0, what);
		free(q);
		if (fails > 10)
			break;
	}
	printf("truncations: %zu, %d failures\n", size, fails);
	/* Random flips: 1 to 4 bytes each. */
	q = malloc(size);
	if (!q)
		return 1;
	for (i = 0; i < 20000 && fails <= 10; i++) {
		unsigned k, nflip;

		memcpy(q, p, size);
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		nflip = 1 + (unsigned) (seed >> 60) % 4;
		for (k = 0; k < nflip; k++) {
			seed = seed * 6364136223846793005ull +
			       1442695040888963407ull;
			q[(seed >> 16) % size] ^= (uint8_t) (1 + (seed >> 8) %
							      255);
		}
		snprintf(what, sizeof(what), "flips #%zu", i);
		fails += check(q, size, 0, what);
	}
	printf("flips: %zu, %d failures in all\n", i, fails);
	free(q);
	free(p);
	return fails ? 1 : 0;
}

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
 *
 * Each read is also checked: every thread's trace chunk lies in the file.
 * exit: 0 ok, 1 a failure
 */
#include "perfdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t) n)) &&
	    fread(p, 1, (size_t) n, f) != (size_t) n) {
		free(p);
		p = NULL;
	}
	if (p)
		*size = (size_t) n;
	fclose(f);
	return p;
}

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

		p = slurp(argv[2], &size);
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
	if (argc != 2) {
		fprintf(stderr, "usage: test_perfdata_check FILE\n");
		return 2;
	}
	p = slurp(argv[1], &size);
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

/*
 * libFuzzer target: the analyzers' LMDB sidecar.  The shipped sample's
 * .htr with any bytes as its FILE.htr.lmdb/data.mdb: opening the analyses
 * reloads, recomputes or refuses with an error, and every figure, name
 * and index lookup then works - never a crash, hang or leak.
 */
#include "fuzz.h"

#include "htr/htr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int count_fn(const struct htr_func_stats *st, void *payload)
{
	*(uint64_t *) payload += st->calls;
	return 0;
}

static int sym_fn(const char *name, uint32_t block, void *payload)
{
	*(uint64_t *) payload += block + (uint8_t) name[0];
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char htr[HTR_FUZZ_PATH], side[HTR_FUZZ_PATH], mdb[HTR_FUZZ_PATH + 16];
	struct htr_file *f = NULL;
	struct htr_analysis *a = NULL;
	uint8_t *copy;
	size_t n;
	uint64_t sum = 0;
	uint32_t i, nb;
	FILE *fp;

	if (htr_fuzz_path("s.htr", htr) < 0 ||
	    htr_fuzz_path("s.htr.lmdb", side) < 0)
		return 0;
	/* The .htr once; the sidecar's data file every time. */
	fp = fopen(htr, "rb");
	if (fp) {
		fclose(fp);
	} else {
		fp = fopen(HTR_FUZZ_SAMPLE_HTR, "rb");
		if (!fp)
			return 0;
		copy = malloc(1 << 20);
		n = copy ? fread(copy, 1, 1 << 20, fp) : 0;
		fclose(fp);
		if (!n || htr_fuzz_write("s.htr", copy, n, htr) < 0) {
			free(copy);
			return 0;
		}
		free(copy);
	}
	mkdir(side, 0700);
	snprintf(mdb, sizeof(mdb), "%s/data.mdb", side);
	fp = fopen(mdb, "wb");
	if (!fp)
		return 0;
	if (fwrite(data, 1, size, fp) != size) {
		fclose(fp);
		return 0;
	}
	fclose(fp);
	if (htr_file_open(&f, htr, NULL) == 0 &&
	    htr_analysis_open(&a, f, NULL) == 0) {
		nb = htr_block_count(f);
		for (i = 0; i < nb; i++) {
			uint64_t total;
			const char *name;

			if (htr_tsc_get(a, i, &total, NULL, NULL) == 0)
				sum += total;
			if (htr_block_name(a, i, &name) == 0)
				sum += (uint8_t) name[0];
		}
		(void) htr_func_visit(a, NULL, HTR_MATCH_GLOB, count_fn, &sum);
		(void) htr_symidx_find(a, "*", HTR_MATCH_GLOB, sym_fn, &sum);
	}
	htr_analysis_close(a);
	htr_file_close(f);
	return sum == 1 ? 1 : 0;
}

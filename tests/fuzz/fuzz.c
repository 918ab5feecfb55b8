#include "fuzz.h"
#include "../same_htr.h"

#include "htr/htr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One scratch directory per fuzzing process, made on first use; libFuzzer
 * runs inputs one at a time, so this is the target's only state. */
static char scratch[64];

static void cleanup(void)
{
	char cmd[96];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", scratch);
}

int htr_fuzz_path(const char *name, char *path)
{
	if (!scratch[0]) {
		/* Memory-backed when there is one: builds write files. */
		snprintf(scratch, sizeof(scratch), "%s/htr-fuzz-XXXXXX",
			 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		if (!mkdtemp(scratch)) {
			scratch[0] = 0;
			return -1;
		}
		atexit(cleanup);
	}
	return snprintf(path, HTR_FUZZ_PATH, "%s/%s", scratch, name) <
	       HTR_FUZZ_PATH ? 0 : -1;
}

int htr_fuzz_write(const char *name, const uint8_t *data, size_t size,
		   char *path)
{
	FILE *fp;
	int ok;

	if (htr_fuzz_path(name, path) < 0)
		return -1;
	fp = fopen(path, "wb");
	if (!fp)
		return -1;
	ok = fwrite(data, 1, size, fp) == size;
	return fclose(fp) == 0 && ok ? 0 : -1;
}

void htr_fuzz_sample_opts(struct htr_build_opts *opts)
{
	htr_build_opts_init(opts);
	opts->cpuid_0x15_eax = 1;
	opts->cpuid_0x15_ebx = 2;
	opts->mtc_freq = 6;
	opts->nom_freq = 16;
	opts->no_fsync = 1;
	opts->no_sweep = 1;
}

/* Build @data into @out.  Returns the build's result, or 1 if no
 * builder. */
static int build(const uint8_t *data, size_t size, const char *out,
		 unsigned threads, int decoder, int skl014)
{
	struct htr_build_opts opts;
	struct htr_builder *b = NULL;
	int rc;

	htr_fuzz_sample_opts(&opts);
	if (skl014) {
		/* A Skylake, tracing the sample's first 1 KiB of code. */
		opts.cpu_family = 6;
		opts.cpu_model = 78;
		opts.nfilters = 1;
		opts.filters[0].start = 0x401000;
		opts.filters[0].end = 0x401400;
		opts.filters[0].kind = HTR_FILTER_TRACE;
	}
	opts.threads = threads;
	opts.chunk_size = threads > 1 ? 1 : 0;
	opts.decoder = decoder;
	if (htr_builder_alloc(&b, &opts) < 0)
		return 1;
	rc = htr_builder_add_elf(b, HTR_FUZZ_SAMPLE_ELF);
	if (rc == 0)
		rc = htr_builder_run_buffer(b, data, size, out, NULL, 0);
	htr_builder_free(b);
	return rc;
}

void htr_fuzz_same_builds(const uint8_t *data, size_t size, int skl014,
			  unsigned threads_a, int decoder_a,
			  unsigned threads_b, int decoder_b)
{
	char a[HTR_FUZZ_PATH], b[HTR_FUZZ_PATH];
	int rc;

	if (htr_fuzz_path("a.htr", a) < 0 || htr_fuzz_path("b.htr", b) < 0)
		return;
	rc = build(data, size, a, threads_a, decoder_a, skl014);
	if (rc == 1)
		return;
	if (build(data, size, b, threads_b, decoder_b, skl014) != rc ||
	    (rc == 0 && !htr_files_same(a, b)))
		__builtin_trap();   /* the two builds differ */
}

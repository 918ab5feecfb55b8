/*
 * libFuzzer target: the parallel decoder against the one-thread decoder.
 * Any bytes as a trace of the shipped sample program, built on three
 * threads with a chunk boundary at every PSB, must make the same .htr as
 * the one-thread build (but for the build time) or fail the same way.
 * (fuzz_trace.c walks what the one-thread build makes.)
 */
#include "fuzz.h"
#include "../same_htr.h"

#include "htr/htr.h"

/* Build @data into @out with @threads decoding threads (chunk boundaries
 * at every PSB).  Returns the build's result, or 1 if no builder. */
static int build(const uint8_t *data, size_t size, const char *out,
		 unsigned threads)
{
	struct htr_build_opts opts;
	struct htr_builder *b = NULL;
	int rc;

	htr_fuzz_sample_opts(&opts);
	opts.threads = threads;
	opts.chunk_size = 1;
	if (htr_builder_alloc(&b, &opts) < 0)
		return 1;
	rc = htr_builder_add_elf(b, HTR_FUZZ_SAMPLE_ELF);
	if (rc == 0)
		rc = htr_builder_run_buffer(b, data, size, out, NULL, 0);
	htr_builder_free(b);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[HTR_FUZZ_PATH], out3[HTR_FUZZ_PATH];
	int rc;

	if (htr_fuzz_path("out.htr", out) < 0 ||
	    htr_fuzz_path("out3.htr", out3) < 0)
		return 0;
	rc = build(data, size, out, 1);
	if (rc == 1)
		return 0;
	if (build(data, size, out3, 3) != rc ||
	    (rc == 0 && !htr_files_same(out, out3)))
		__builtin_trap();   /* threads changed the result */
	return 0;
}

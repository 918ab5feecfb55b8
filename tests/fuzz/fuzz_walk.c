/*
 * libFuzzer target: the walk against libipt's block decoder.  Any bytes as
 * a trace of the shipped sample program, built with the walk, must make
 * the same .htr as with the block decoder (but for the build time) or
 * fail the same way.  Where the walk gives up the build falls back to the
 * block decoder: that is also the same file, and says nothing of the
 * walk; the mutator still explores what it keeps.
 */
#include "fuzz.h"
#include "../same_htr.h"

#include "htr/htr.h"

/* Build @data into @out with @decoder on one thread.  Returns the build's
 * result, or 1 if no builder. */
static int build(const uint8_t *data, size_t size, const char *out,
		 int decoder)
{
	struct htr_build_opts opts;
	struct htr_builder *b = NULL;
	int rc;

	htr_fuzz_sample_opts(&opts);
	opts.decoder = decoder;
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
	char out[HTR_FUZZ_PATH], outw[HTR_FUZZ_PATH];
	int rc;

	if (htr_fuzz_path("block.htr", out) < 0 ||
	    htr_fuzz_path("walk.htr", outw) < 0)
		return 0;
	rc = build(data, size, out, HTR_DECODER_BLOCK);
	if (rc == 1)
		return 0;
	if (build(data, size, outw, HTR_DECODER_WALK) != rc ||
	    (rc == 0 && !htr_files_same(out, outw)))
		__builtin_trap();   /* the walk decoded otherwise */
	return 0;
}

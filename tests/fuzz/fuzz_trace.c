/*
 * libFuzzer target: the trace front end (decoder, tree builder, writer).
 * Any bytes as a trace of the shipped sample program must build into an
 * .htr that opens and walks, or fail with an error: never crash, hang or
 * leak.
 */
#include "fuzz.h"

#include "htr/htr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[HTR_FUZZ_PATH];
	struct htr_build_opts opts;
	struct htr_builder *b = NULL;
	struct htr_file *f = NULL;
	uint32_t i, n;

	if (htr_fuzz_path("out.htr", out) < 0)
		return 0;
	htr_fuzz_sample_opts(&opts);
	if (htr_builder_alloc(&b, &opts) < 0)
		return 0;
	if (htr_builder_add_elf(b, HTR_FUZZ_SAMPLE_ELF) == 0 &&
	    htr_builder_run_buffer(b, data, size, out, NULL, 0) == 0 &&
	    htr_file_open(&f, out, NULL) == 0) {
		n = htr_block_count(f);
		for (i = 0; i < n; i++) {
			struct htr_block_info bi;

			bi.size = sizeof(bi);
			if (htr_block_get(f, i, &bi, sizeof(bi)) < 0)
				__builtin_trap();   /* a build wrote a bad file */
		}
	}
	htr_file_close(f);
	htr_builder_free(b);
	return 0;
}

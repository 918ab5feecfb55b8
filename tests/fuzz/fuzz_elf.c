/*
 * libFuzzer target: ELF images and their symbols.  Any bytes as the
 * image of a build are loaded or rejected with a message; when they load,
 * the build runs over the head of the shipped sample trace (a few thousand
 * instructions: the ELF is what is fuzzed, not the trace) and the symbol
 * analyzer names every block from them.  Inputs of odd size decode with
 * libipt's block decoder, the others with the walk: both follow code that
 * is not what was recorded.
 */
#include "fuzz.h"

#include "htr/htr.h"

#include <stdio.h>

#define TRACE_HEAD 8192

/* The first TRACE_HEAD bytes of the sample trace, read once. */
static size_t trace_head(const uint8_t **out)
{
	static uint8_t head[TRACE_HEAD];
	static size_t n;
	FILE *fp;

	if (!n && (fp = fopen(HTR_FUZZ_SAMPLE_PT, "rb"))) {
		n = fread(head, 1, sizeof(head), fp);
		fclose(fp);
	}
	*out = head;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char elf[HTR_FUZZ_PATH], out[HTR_FUZZ_PATH];
	struct htr_builder *b = NULL;
	struct htr_file *f = NULL;
	struct htr_analysis *a = NULL;
	struct htr_analysis_opts ao;
	struct htr_build_opts bo;
	const uint8_t *pt;
	size_t ptn = trace_head(&pt);
	uint32_t i, n;

	if (htr_fuzz_write("in.elf", data, size, elf) < 0 ||
	    htr_fuzz_path("out.htr", out) < 0)
		return 0;
	htr_build_opts_init(&bo);
	bo.decoder = size % 2 ? HTR_DECODER_BLOCK : HTR_DECODER_WALK;
	if (htr_builder_alloc(&b, &bo) < 0)
		return 0;
	if (!ptn || htr_builder_add_elf(b, elf) < 0 ||
	    htr_builder_run_buffer(b, pt, ptn, out, NULL, 0) < 0)
		goto out;
	if (htr_file_open(&f, out, NULL) < 0)
		goto out;
	htr_analysis_opts_init(&ao);
	ao.no_sidecar = 1;
	if (htr_analysis_open(&a, f, &ao) == 0) {
		n = htr_block_count(f);
		for (i = 0; i < n; i++) {
			const char *name;

			(void) htr_block_name(a, i, &name);
		}
	}
out:
	htr_analysis_close(a);
	htr_file_close(f);
	htr_builder_free(b);
	return 0;
}

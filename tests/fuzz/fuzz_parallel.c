/*
 * libFuzzer target: the parallel decoder against the one-thread decoder.
 * Any bytes as a trace of the shipped sample program, built on three
 * threads with a chunk boundary at every PSB, must make the same .htr as
 * the one-thread build (but for the build time) or fail the same way;
 * also as recorded on a CPU with erratum SKL014, filtered to part of the
 * code.  (fuzz_trace.c walks what the one-thread build makes.)
 */
#include "fuzz.h"

#include "htr/htr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	htr_fuzz_same_builds(data, size, 0, 1, HTR_DECODER_WALK,
			     3, HTR_DECODER_WALK);
	htr_fuzz_same_builds(data, size, 1, 1, HTR_DECODER_WALK,
			     3, HTR_DECODER_WALK);
	return 0;
}

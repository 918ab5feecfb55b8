/*
 * libFuzzer target: the walk against libipt's block decoder.  Any bytes as
 * a trace of the shipped sample program, built with the walk, must make
 * the same .htr as with the block decoder (but for the build time) or
 * fail the same way.  Where the walk gives up the build falls back to the
 * block decoder: that is also the same file, and says nothing of the
 * walk; the mutator still explores what it keeps.  Twice: as recorded on
 * any CPU, and on one with erratum SKL014, filtered to part of the code
 * (a direct branch out of it may disable tracing without an IP).
 */
#include "fuzz.h"

#include "htr/htr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	htr_fuzz_same_builds(data, size, 0, 1, HTR_DECODER_BLOCK,
			     1, HTR_DECODER_WALK);
	htr_fuzz_same_builds(data, size, 1, 1, HTR_DECODER_BLOCK,
			     1, HTR_DECODER_WALK);
	return 0;
}

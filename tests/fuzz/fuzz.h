/* What the fuzz targets share: the library reads files, so each input is
 * written to a per-process scratch directory first. */
#ifndef HTR_FUZZ_H
#define HTR_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#define HTR_FUZZ_PATH 256

/* The scratch path of @name into @path.  Returns 0 or -1. */
int htr_fuzz_path(const char *name, char *path);
/* Write @data to the scratch file @name; its path into @path. 0 or -1. */
int htr_fuzz_write(const char *name, const uint8_t *data, size_t size,
		   char *path);

struct htr_build_opts;
/* Build options for a trace of the shipped sample: its timing
 * parameters (so CYC/MTC paths run too), no fsync and no sweep of other
 * temporaries (nothing is kept). */
void htr_fuzz_sample_opts(struct htr_build_opts *opts);

/* Build @data as a trace of the shipped sample twice: on @threads_a
 * decoding threads with @decoder_a, then with @threads_b and @decoder_b
 * (more than one thread: a chunk boundary at every PSB); @skl014: as
 * recorded on a CPU with that erratum, filtered to part of the code.
 * Traps unless both fail alike or write the same .htr (but for the build
 * time). */
void htr_fuzz_same_builds(const uint8_t *data, size_t size, int skl014,
			  unsigned threads_a, int decoder_a,
			  unsigned threads_b, int decoder_b);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif

/* Comparing two builds of one trace. */
#ifndef HTR_TEST_SAME_HTR_H
#define HTR_TEST_SAME_HTR_H

/* Whether the .htr files @a and @b are the same but for the time they
 * were built (0: no, or unreadable). */
int htr_files_same(const char *a, const char *b);

struct htr_build_opts;

/* Build @trace again on three threads with a chunk boundary at every PSB,
 * over the ELF @elf or else the raw @raw, with @bo's other
 * options (NULL: the defaults);
 * assert that the file is the same as @htr, the one-thread build. */
void htr_check_parallel(const struct htr_build_opts *bo, const char *elf,
			const char *raw, const char *trace, const char *htr);

#endif

/* Comparing two builds of one trace. */
#ifndef HTR_TEST_SAME_HTR_H
#define HTR_TEST_SAME_HTR_H

#include <stddef.h>
#include <stdint.h>

/* Whether the .htr files @a and @b are the same but for the time they
 * were built (0: no, or unreadable). */
int htr_files_same(const char *a, const char *b);

struct htr_build_opts;
struct htr_build_stats;

/* Build @trace again with each decoder (block, walk), on one thread and
 * on three with a chunk boundary at every PSB, over the ELF @elf or else
 * the raw @raw, with @bo's other options (NULL: the defaults); assert
 * that each file is the same as @htr, the one-thread build with the
 * default decoder. */
void htr_check_parallel(const struct htr_build_opts *bo, const char *elf,
			const char *raw, const char *trace, const char *htr);

/* Whether a build that asked for the walk gave up on it: its file was
 * made by libipt's block decoder. */
int htr_walk_fell_back(const struct htr_build_stats *st);

/* Assert that the walk build of @trace into @out (stats @st) fell back
 * only where @out has a decode error. */
void htr_check_walk_kept(const struct htr_build_stats *st, const char *trace,
			 const char *out);

#endif

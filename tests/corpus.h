/* Reading ../shared/corpus/libipt-ptt (see its README) for tests. */
#ifndef HTR_TEST_CORPUS_H
#define HTR_TEST_CORPUS_H

#include <stddef.h>

/* One manifest.tsv row split at tabs (in place). */
struct mrow { char *f[32]; int n; };

int split_tabs(char *line, struct mrow *m);

/* The manifest columns the suites read; both -1 before its header row. */
struct mcols { int v205, files; };
/* Splits the manifest line @line into @m.  Returns 0 for the header row,
 * whose columns it records in @c (still -1 when one is missing), else 1. */
int manifest_row(char *line, struct mrow *m, struct mcols *c);
/* Whether the case in row @m is among libipt 2.0.5's own tests. */
int in_v205(const struct mrow *m, const struct mcols *c);

/* Count instructions and decode errors in a -ptxed.exp file.  0 or -1. */
int read_exp(const char *path, long *insns, long *errors);

/* The corpus directory (from $HTR_SOURCE_ROOT/../shared), or NULL if absent. */
const char *corpus_dir(char *buf, size_t len);

/* Skipped cases, tallied by reason: the reason is @why up to its first
 * '(' or ':', so "needs address filtering (...)" counts as one. */
struct skips {
	struct { char why[64]; int n; } r[16];
	int nr, total;
};
void skips_add(struct skips *s, const char *why);
/* One line on stderr, "TAG: skipped N cases: n1 reason1; n2 reason2"
 * (tools/ci/test.sh shows these lines after the suite). */
void skips_print(const struct skips *s, const char *tag);

/* Whether libipt knows any erratum for cpu "F/M". */
int has_errata(const char *cpu);

struct htr_addr_filter;
/* ptxed's --filter:addrN_cfg, _a or _b option @opt with value @arg
 * (IA32_RTIT_CTL.ADDRn_CFG, IA32_RTIT_ADDRn_A/B, B inclusive) into
 * @f[n], *@nf past it.  1 if @opt is one, else 0. */
int ptxed_filter(const char *opt, const char *arg, struct htr_addr_filter *f,
		 unsigned *nf);

#endif

/*
 * Tree builder: turns the decoder's runs, gaps and resumes into blocks, one
 * per function invocation, written in completion order through the writer.
 * It keeps only the open call stack: O(max depth) memory, plus one entry per
 * distinct call target for the function table.  It knows nothing about
 * libipt or the file layout beyond the block record.
 *
 * The rules are docs/tree-rules.md (docs/design.md, invariants 2 and 3);
 * each is implemented where its comment names it.  A return is held
 * until the builder learns where it landed (the next run, an interrupt,
 * or a gap, which leaves it unknown), because an abandoned frame shows
 * only there.
 */
#ifndef HTR_LIB_TREEBUILD_H
#define HTR_LIB_TREEBUILD_H

#include "decode.h"
#include "writer.h"

struct htr_tb;

/* The call stack holds at most this many frames; calls beyond it are
 * folded into the deepest frame (counted by htr_tb__folded()). */
#define HTR_TB_MAX_DEPTH (1u << 18)

/* Functions from the image's symbols, for the rules that need them
 * (README, "Tree rules" 3, 3a, 4): returns 1 with *@entry the entry of
 * the sized symbol holding @addr (its start; for FUNC.cold, only jumped
 * to, FUNC's) and *@func the function it is part of (the same for FUNC
 * and FUNC.cold), or 0 when no symbol with a size covers @addr.  Called
 * on the builder's thread; must return. */
typedef int (*htr_tb_extent_fn)(void *ctx, uint64_t addr, uint64_t *entry,
				uint64_t *func);

int htr_tb__alloc(struct htr_tb **out, struct htr_writer *w);
/* Optional; before the first event. */
void htr_tb__set_extents(struct htr_tb *t, htr_tb_extent_fn fn, void *ctx);
void htr_tb__free(struct htr_tb *t);

/* The decoder's events (decode.h says what each means). */
int htr_tb__run(struct htr_tb *t, uint64_t ip, uint32_t ninsn,
		enum htr_icls cls, uint64_t ret_ip);
int htr_tb__resume(struct htr_tb *t, uint64_t ip);
int htr_tb__gap(struct htr_tb *t, const struct htr_decode_gap *g);
int htr_tb__time(struct htr_tb *t, uint64_t tsc);
/* A thread that stopped between a call and its callee's first
 * instruction runs again at @tsc: the callee starts then (the time off
 * the CPU is the caller's).  Does nothing elsewhere: a block's last
 * instruction keeps its own time. */
int htr_tb__time_entry(struct htr_tb *t, uint64_t tsc);
int htr_tb__sync(struct htr_tb *t, uint64_t offset);
/* Close whatever is open.  Call once, after the last event. */
int htr_tb__finish(struct htr_tb *t);

uint64_t htr_tb__insns(const struct htr_tb *t);
uint64_t htr_tb__gaps(const struct htr_tb *t);
/* The error gaps (HTR_GAP_ERROR) so far, those of the runaway guard, and
 * the first one (NULL: none; valid until @t is freed). */
uint64_t htr_tb__errors(const struct htr_tb *t, uint64_t *runaways,
			const struct htr_decode_gap **first);
uint64_t htr_tb__funcs(const struct htr_tb *t);
/* Calls folded into their caller at the depth limit. */
uint64_t htr_tb__folded(const struct htr_tb *t);

#endif

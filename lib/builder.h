/*
 * Tree builder: turns the decoder's runs, gaps and resumes into blocks, one
 * per function invocation, written in completion order through the writer.
 * It keeps only the open call stack: O(max depth) memory, plus one entry per
 * distinct call target for the function table.  It knows nothing about
 * libipt or the file layout beyond the block record.
 *
 * Rules (../shared/DESIGN.md, invariant 3):
 *  - a call (near or far) opens a block at the next instruction; a return
 *    closes the innermost one at the return;
 *  - a return with no open call means the trace began deeper: the frame
 *    that has been running at the top level becomes a block (flag LATE)
 *    that adopts every top-level block so far;
 *  - after a gap, resuming at the return address of an open frame closes
 *    that frame and every frame above it (flag IMPLICIT, last = the last
 *    instruction before the gap); resuming anywhere else continues the
 *    current frame;
 *  - at the end, open blocks close at the last instruction (TRUNCATED);
 *    the top-level frame becomes one too if it ran instructions itself.
 */
#ifndef HTR_LIB_BUILDER_H
#define HTR_LIB_BUILDER_H

#include "decode.h"
#include "writer.h"

struct htr_tb;

int htr_tb__alloc(struct htr_tb **out, struct htr_writer *w);
void htr_tb__free(struct htr_tb *t);

/* @ret_ip: for a call, the address of the instruction after it (0 if the
 * decoder could not tell). */
int htr_tb__run(struct htr_tb *t, uint64_t ip, uint32_t ninsn,
		enum htr_icls cls, uint64_t ret_ip);
int htr_tb__resume(struct htr_tb *t, uint64_t ip);
int htr_tb__gap(struct htr_tb *t, int kind, uint64_t offset, int code);
int htr_tb__time(struct htr_tb *t, uint64_t tsc);
int htr_tb__sync(struct htr_tb *t, uint64_t offset);
/* Close whatever is open.  Call once, after the last event. */
int htr_tb__finish(struct htr_tb *t);

uint64_t htr_tb__insns(const struct htr_tb *t);
uint64_t htr_tb__gaps(const struct htr_tb *t);
uint64_t htr_tb__funcs(const struct htr_tb *t);

#endif

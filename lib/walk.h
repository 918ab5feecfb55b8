/*
 * The walk: libipt's query decoder reads the packets and libhtr follows
 * the code over a cache of its branches, instead of libipt's block decoder
 * following every instruction.  An htr_walk stands in for a
 * pt_block_decoder in decode.c: the same blocks as far as decode.c can
 * tell (the instructions, the class of the last one, the time after it;
 * blocks that end in an ordinary instruction joined) and the same events,
 * in the same order.  What it does not follow itself it refuses with
 * HTR_WALK_UNSURE before anything of it is reported (walk.c says what);
 * decode.c then gives up (HTR_DECODE_GAVE_UP).
 *
 * One walk belongs to one thread.  Statuses are libipt's (pts_* flags, or
 * -pte_* errors), with HTR_WALK_UNSURE besides.
 */
#ifndef HTR_LIB_WALK_H
#define HTR_LIB_WALK_H

#include "icls.h"

#include <stdint.h>

struct htr_image;   /* lib/image.h */
struct htr_walk;
struct pt_config;
struct pt_event;

#define HTR_WALK_UNSURE (-1000)

struct htr_walk_block {
	uint64_t ip;               /* the first instruction */
	uint32_t n;                /* instructions */
	enum htr_icls cls;         /* of the last one */
	uint64_t ret;              /* calls: the return address, 0 unknown;
				    * HTR_IC_JUMP: the jump's own address */
	int branch;                /* the last one is a conditional or
				    * indirect jump: it read trace */
};

/* A walk over @c's trace and the code of @img (mapped by the walk; @img
 * may be freed after).  Returns 0, HTR_ERR_NOMEM, HTR_ERR_IO (a piece
 * cannot be mapped) or HTR_ERR_DECODE (bad configuration). */
int htr_walk__alloc(struct htr_walk **w, const struct pt_config *c,
		    const struct htr_image *img);
/* Start @w over on a new query decoder for @c, as a new walk would: the
 * code stays mapped and the cache of branches stays filled (it holds what
 * the code is, not what the trace did, so nothing before changes what
 * comes after).  Returns 0 or HTR_ERR_DECODE; on error @w only frees. */
int htr_walk__restart(struct htr_walk *w, const struct pt_config *c);
void htr_walk__free(struct htr_walk *w);

/* As pt_blk_sync_set, pt_blk_next, pt_blk_event, pt_blk_time,
 * pt_blk_get_offset (0 if unknown) and pt_blk_get_sync_offset.  A block
 * cut short by the end of the trace leaves out the branch whose trace is
 * missing (decode.c does so with the block decoder's). */
int htr_walk__sync_set(struct htr_walk *w, uint64_t offset);
int htr_walk__next(struct htr_walk *w, struct htr_walk_block *b);
int htr_walk__event(struct htr_walk *w, struct pt_event *ev);
int htr_walk__time(struct htr_walk *w, uint64_t *tsc);
uint64_t htr_walk__offset(const struct htr_walk *w);
int htr_walk__sync_offset(const struct htr_walk *w, uint64_t *offset);

#endif

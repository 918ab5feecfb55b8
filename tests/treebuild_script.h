/*
 * Event scripts for the tree builder (lib/treebuild.c): a few words per
 * decoder event, fed to the builder directly (or packed and replayed
 * through lib/ev.c), the blocks committed by the real writer and printed
 * back as an indented tree, so a test compares two short strings.
 *
 * A script is statements separated by ';' or newlines.  Instruction k of
 * a run at IP is taken to sit at IP + k (one byte each), so a run's last
 * instruction is at IP + N - 1 and a call's return address is IP + N
 * unless given.
 *
 *   run IP N            N instructions, the last of class HTR_IC_OTHER
 *   call IP N [RET]     ... the last a near call (return address RET)
 *   fcall IP N [RET]    ... the last a far call / syscall
 *   ret IP N            ... the last a near return
 *   fret IP N           ... the last a far return (iret, sysret)
 *   jmp IP N [SRC]      ... the last an indirect jump (at SRC)
 *   irq IP              an interrupt no run carries: an empty
 *                       HTR_IC_FAR_CALL run with ip = ret_ip = IP
 *   gap KIND [async] [IP]
 *                       KIND disabled, overflow or error (runaway: an
 *                       error gap of the runaway guard); IP: where a
 *                       disable stopped (async) or went (TIP.PGD)
 *   resume IP           decoding (re)starts at IP
 *   time TSC            the time after the last run
 *   entrytime TSC       htr_tb__time_entry()
 *   sync OFFSET         a PSB
 *   fn START SIZE       a sized symbol: a function, entered at START
 *   cold START SIZE F   FUNC.cold of the function at F (entry F)
 *   part START SIZE F   FUNC.part.N of the function at F (entry START)
 *   deep N              N calls in a row (call 0x100000 1, each)
 *
 * htr_tb__finish() runs after the last statement.  "# ..." to the end of
 * a line is a comment.
 *
 * The tree is printed in pre-order, two spaces of indent a level, one
 * block a line: "FIRST-LAST @ENTRY FLAGS", ENTRY "?" when unknown, the
 * flags (late truncated gap implicit unwound) as words.  With
 * TBS_ANCHOR a late block also shows "~ANCHOR", the address it is named
 * after.
 */
#ifndef HTR_TESTS_TREEBUILD_SCRIPT_H
#define HTR_TESTS_TREEBUILD_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

#define TBS_VIA_EV  0x1u        /* pack the events, replay with htr_ev__apply_n */
#define TBS_ANCHOR  0x2u        /* print late blocks' anchors */
#define TBS_QUIET   0x4u        /* no tree string (deep trees) */

struct tbs_result {
	char tree[16384];
	uint64_t ninsns, gaps, errors, runaways, folded, funcs;
	uint32_t nblocks, max_depth;
	/* The first block at the greatest depth (a root: 0), in pre-order. */
	uint32_t deepest_level, deepest_flags;
	uint64_t deepest_first, deepest_last;
	uint32_t nvisited;
	uint64_t ntsc;
	uint64_t tsc_id[16], tsc_val[16];      /* the first few TSC points */
	char err[256];                         /* why tbs_run() failed */
};

/* Run @script into a file at @path and read it back into @r.  Returns 0,
 * or -1 with the reason in r->err (a bad script, a builder or writer
 * error, a file that does not open). */
int tbs_run(const char *script, const char *path, unsigned flags,
	    struct tbs_result *r);

#endif

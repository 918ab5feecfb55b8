/*
 * The stream htr record's QEMU plugin (plugin.c beside this file) writes
 * to the recorder (tcg.c), and the reply the recorder sends back.  Both
 * ends run on one machine: words are host-endian.
 *
 * The stream is a sequence of chunks, each a header and whole records:
 * one vCPU's records in the order it made them (tid = the guest thread
 * that ran them), or with tid 0 the translations (shared by all threads,
 * written before any chunk that may run them).
 *
 * A record is 32-bit words; the first says what it is (low 2 bits):
 *   TS_EXEC   tb << 2: translation block tb ran all its instructions;
 *   TS_PART   tb << 2 | 1, count: tb ran its first count (a fault or a
 *             signal stopped it, or the thread was killed);
 *   TS_TRANS  tb << 2 | 2, n, pc (2 words, low first), n instruction sizes
 *             (bytes, padded to a word): a new translation block;
 *   TS_EVENT  kind << 2 | nwords << 10 | 3, then nwords words:
 *     TE_SYSCALL  num, a1..a6 (2 words each, low first): a syscall starts
 *     TE_SYSRET   num, ret (2 words each)
 *     TE_SIGACT   sig, handler (2 words each): rt_sigaction installs a
 *                 handler (not SIG_DFL, SIG_IGN)
 *     TE_SYNC     pc (2 words): code at pc whose module the plugin does
 *                 not know was translated; qemu waits for the reply, 16
 *                 bytes: the module's executable range [lo, hi) the
 *                 recorder found in /proc/PID/maps (while the mapping is
 *                 surely there), so the plugin asks once per module.
 *     TE_END      (none): the last record, when qemu exits; a stream
 *                 without it was cut short.
 *     TE_EXEC     (none): after an execve's TE_SYSCALL: if it succeeds,
 *                 the program replaced itself (qemu-user runs the new
 *                 one natively) and the stream ends here, no TE_END.
 */
#ifndef HTR_TCG_STREAM_H
#define HTR_TCG_STREAM_H

#include <stdint.h>

#define TS_EXEC 0u
#define TS_PART 1u
#define TS_TRANS 2u
#define TS_EVENT 3u

#define TE_SYSCALL 1u
#define TE_SYSRET 2u
#define TE_SIGACT 3u
#define TE_SYNC 4u
#define TE_END 5u
#define TE_EXEC 6u

/* Translation block ids fit the 30 bits a word leaves them. */
#define TS_MAX_TB ((1u << 30) - 1)

struct ts_chunk {
	uint32_t magic;         /* TS_MAGIC */
	uint32_t words;         /* record words after this header */
	int32_t pid;            /* the process (a forked child has its own) */
	int32_t tid;            /* the guest thread, 0: translations */
};

#define TS_MAGIC 0x48545243u  /* "CRTH" */

#endif

/*
 * Parallel decoding: the trace is cut at PSBs into chunks of about a given
 * size, decoded on several threads at once, and their events are handed to
 * the caller in trace order: the same events, in the same order, as one
 * htr_decode__run() over the whole trace gives its sink.
 *
 * How a chunk's events come out exact: the chunk [B_k, B_k+1) is decoded
 * by a decoder that starts at the PSB before B_k (W_k) and stays silent
 * until it reports the PSB at B_k (the decoder's sync event), then reports
 * everything up to, not including, the PSB at B_k+1.  A PSB resets what
 * the trace depends on (the processor's return-compression stack, the IP,
 * the time), and the decoding from W_k to B_k brings what a fresh decoder
 * lacks (enabled or not, the run before the PSB) to where a decoder that
 * ran from the start would be.  Then:
 *  - each decoder goes on one PSB interval past its chunk and hashes the
 *    events there; the next chunk's decoder hashes its first interval: the
 *    chunks join only if the two agree;
 *  - every decoder runs on sections of its own and starts afresh after a
 *    decode error (decode.c), so what libipt keeps (its block cache, its
 *    state at the next PSB) cannot make two of them differ;
 *  - a decode error in a chunk whose decoder did not start at the trace's
 *    first PSB, unless it is for want of code at the IP, means the chunks
 *    cannot be trusted (a damaged trace can return to a call made before a
 *    PSB, which only a decoder that ran from the start knows).
 * Any of these failing, the caller decodes again on one thread.  The
 * suites check every build against a one-thread decode.
 */
#ifndef HTR_LIB_PDECODE_H
#define HTR_LIB_PDECODE_H

#include "decode.h"
#include "ev.h"

#include <pthread.h>

/* The chunks did not join up: a decoder that started at a chunk's PSB
 * saw the interval after it otherwise than the decoder that came from
 * before (a decode error before the PSB sent one of them elsewhere).  The
 * events given so far are not the one-thread decoder's: decode again on
 * one thread. */
#define HTR_PDECODE_DIVERGED 1

/* Decode @cfg's trace over @img on @threads threads, in chunks of about
 * @chunk bytes (0: 64 to 256 KiB, shrinking towards the end: see
 * CHUNK_MAX in pdecode.c):
 * @threads - 1 helpers and the calling thread, which decodes a chunk
 * whenever no events are ready (@threads 0 or 1: it decodes the whole
 * trace, no chunks).  The events go to @apply(@ctx, events, how many) on
 * the calling thread, in trace order, a batch at a time; every 32768
 * events or so @progress(@ctx, trace offset) runs there too.
 * A non-zero value from either stops everything and is returned (progress:
 * HTR_ERR_CANCELED).  @spare(@ctx), if not NULL, runs at most once, on a
 * helper that finds every chunk handed out, while the calling thread
 * takes the last events: work the caller would otherwise do after,
 * serially; it must not touch what @apply and @progress use, and records
 * itself whether it ran (a cancel, an error or no helper: it does not).
 * Memory: a bounded number of chunks in flight, each holding at most a
 * fixed number of events.  Returns what htr_decode__run() would or
 * HTR_PDECODE_DIVERGED; message in @err.
 * All threads are joined before it returns. */
int htr_pdecode__run(const struct htr_decode_cfg *cfg, struct htr_image *img,
		     unsigned threads, uint64_t chunk,
		     int (*apply)(void *ctx, const struct htr_ev *ev, size_t n),
		     int (*progress)(void *ctx, uint64_t offset),
		     void (*spare)(void *ctx), void *ctx, struct htr_err *err);

/* pthread_create(@t, NULL, @fn, @arg), but the thread starts on the
 * @nth processor after the caller's (of those the process may use; 0:
 * wherever the system puts it) and then may move to any.  Left to itself,
 * Linux may queue a new thread behind its creator, on the creator's
 * processor, until it next balances the load: on a 2-processor VM
 * (6.18), 4 ms every time, with the other processor idle; a two-thread
 * build of 10^7 instructions takes ~55 ms. */
int htr_pdecode__spawn(pthread_t *t, void *(*fn)(void *), void *arg,
		       unsigned nth);

#endif

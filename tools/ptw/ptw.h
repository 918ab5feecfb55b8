/*
 * Packet writer shared by htr-synth and htr record: libipt's encoder over
 * a buffer flushed to a file, TNT bits gathered into TNT packets, IP
 * packets compressed against the last IP as a decoder tracks it.
 *
 * Not thread-safe: one writer per trace, used by one thread. Errors are
 * sticky: every call after a failed write or encode is still safe, and
 * ptw_finish() reports the failure.
 */
#ifndef HTR_TOOLS_PTW_H
#define HTR_TOOLS_PTW_H

#include <intel-pt.h>
#include <stdint.h>
#include <stdio.h>

struct ptw {
	FILE *fp;
	struct pt_encoder *enc;
	uint8_t *buf;
	size_t bufsize;
	uint64_t flushed;       /* bytes already written to @fp */
	uint64_t last_ip;
	int have_ip;
	uint64_t tnt;           /* pending bits, first branch most significant */
	unsigned tnt_n, tnt_max;
	int err;
};

/* Returns 0, or -1 when out of memory. @fp stays the caller's. */
int ptw_init(struct ptw *w, FILE *fp);
void ptw_fini(struct ptw *w);
/* The offset in the trace of the next packet. */
uint64_t ptw_offset(const struct ptw *w);
/* One packet as it is; pending TNT bits are not flushed first. */
void ptw_put(struct ptw *w, struct pt_packet *pkt);
/* Append one TNT bit; the packet holds at most @max (6 or 47) bits. */
void ptw_tnt(struct ptw *w, int taken, unsigned max);
/* Returns 1 when the next TNT bit starts a new packet. */
int ptw_tnt_starts(const struct ptw *w);
void ptw_tnt_flush(struct ptw *w);
/* An IP packet (TIP, TIP.PGE, TIP.PGD, FUP) with the best compression. */
void ptw_ip(struct ptw *w, enum pt_packet_type type, uint64_t ip);
void ptw_ip_suppressed(struct ptw *w, enum pt_packet_type type);
/* A packet without payload (PSB, PSBEND, OVF, ...) after the pending TNT
 * bits; the decoder forgets its last IP at every PSB. */
void ptw_simple(struct ptw *w, enum pt_packet_type type);
/* A TSC packet, between TNT bits if some are pending (as hardware may). */
void ptw_tsc(struct ptw *w, uint64_t tsc);
/* MODE.Exec for 64-bit code. */
void ptw_mode_exec(struct ptw *w);
/* Writes what is pending. Returns 0, or -1 when any write failed. */
int ptw_finish(struct ptw *w);
/* Writes the packets encoded so far to the file and flushes it; pending
 * TNT bits stay pending (they are no packet yet), so the file ends at a
 * packet boundary.  Returns 0, or -1 when any write failed. */
int ptw_flush(struct ptw *w);
/* The packets encoded so far go to the current file, the next ones to
 * @fp (a ring of files cut at PSBs).  Pending TNT bits stay pending. */
void ptw_set_file(struct ptw *w, FILE *fp);

#endif

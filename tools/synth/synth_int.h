/* Internals shared by the synthesizer's source files. */
#ifndef HTR_SYNTH_INT_H
#define HTR_SYNTH_INT_H

#include "prog.h"

#include <intel-pt.h>
#include <stdio.h>

/* Text starts one page into the image; see elf.c. */
#define SYNTH_TEXT_OFF 0x1000u

int synth_write_elf(FILE *fp, const struct prog *p, uint64_t link);

/* Packet writer: libipt's encoder over a buffer that is flushed to a file,
 * plus TNT accumulation and last-IP compression as a decoder tracks it. */
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

int ptw_init(struct ptw *w, FILE *fp);
void ptw_fini(struct ptw *w);
uint64_t ptw_offset(const struct ptw *w);
void ptw_put(struct ptw *w, struct pt_packet *pkt);
/* Append one TNT bit; the packet holds at most @max (6 or 47) bits. */
void ptw_tnt(struct ptw *w, int taken, unsigned max);
void ptw_tnt_flush(struct ptw *w);
/* An IP packet (TIP, TIP.PGE, TIP.PGD, FUP) with the best compression. */
void ptw_ip(struct ptw *w, enum pt_packet_type type, uint64_t ip);
void ptw_ip_suppressed(struct ptw *w, enum pt_packet_type type);
/* The decoder forgets its last IP at every PSB. */
void ptw_psb(struct ptw *w);
int ptw_finish(struct ptw *w);

#endif

/*
 * Packet writer: libipt's encoder over a buffer flushed to a file, with
 * TNT bits gathered into short TNT packets and IP packets compressed
 * against the last IP as a decoder tracks it.
 */
#include "rec_int.h"

#include <stdlib.h>
#include <string.h>

#define PW_BUF (1u << 18)

int rec_pw_init(struct rec_pw *w, FILE *fp)
{
	struct pt_config cfg;

	memset(w, 0, sizeof(*w));
	w->fp = fp;
	w->cap = PW_BUF;
	w->buf = malloc(w->cap);
	if (!w->buf)
		return -1;
	pt_config_init(&cfg);
	cfg.begin = w->buf;
	cfg.end = w->buf + w->cap;
	w->enc = pt_alloc_encoder(&cfg);
	if (!w->enc) {
		free(w->buf);
		w->buf = NULL;
		return -1;
	}
	return 0;
}

void rec_pw_fini(struct rec_pw *w)
{
	pt_free_encoder(w->enc);
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

static uint64_t pending(const struct rec_pw *w)
{
	uint64_t off = 0;

	pt_enc_get_offset(w->enc, &off);
	return off;
}

uint64_t rec_pw_offset(const struct rec_pw *w)
{
	return w->flushed + pending(w);
}

static void flush(struct rec_pw *w)
{
	uint64_t n = pending(w);

	if (n && fwrite(w->buf, 1, n, w->fp) != n)
		w->err = 1;
	w->flushed += n;
	pt_enc_sync_set(w->enc, 0);
}

void rec_pw_put(struct rec_pw *w, struct pt_packet *p)
{
	/* No packet is longer than 16 bytes. */
	if (w->cap - pending(w) < 32)
		flush(w);
	if (pt_enc_next(w->enc, p) < 0)
		w->err = 1;
}

int rec_pw_tnt_starts(const struct rec_pw *w)
{
	return w->tnt_n == 0;
}

void rec_pw_tnt_flush(struct rec_pw *w)
{
	struct pt_packet p;

	if (!w->tnt_n)
		return;
	memset(&p, 0, sizeof(p));
	p.type = ppt_tnt_8;
	p.payload.tnt.bit_size = w->tnt_n;
	p.payload.tnt.payload = w->tnt;
	w->tnt = 0;
	w->tnt_n = 0;
	rec_pw_put(w, &p);
}

void rec_pw_tnt(struct rec_pw *w, int taken)
{
	/* The first branch is the most significant bit. */
	w->tnt = (uint8_t) ((w->tnt << 1) | (taken ? 1 : 0));
	if (++w->tnt_n == 6)
		rec_pw_tnt_flush(w);
}

void rec_pw_ip(struct rec_pw *w, enum pt_packet_type type, uint64_t ip)
{
	struct pt_packet p;

	rec_pw_tnt_flush(w);
	memset(&p, 0, sizeof(p));
	p.type = type;
	if (w->have_ip && (ip >> 16) == (w->last_ip >> 16)) {
		p.payload.ip.ipc = pt_ipc_update_16;
		p.payload.ip.ip = ip & 0xffffu;
	} else if (w->have_ip && (ip >> 32) == (w->last_ip >> 32)) {
		p.payload.ip.ipc = pt_ipc_update_32;
		p.payload.ip.ip = ip & 0xffffffffu;
	} else {
		p.payload.ip.ipc = pt_ipc_sext_48;
		p.payload.ip.ip = ip & 0xffffffffffffull;
	}
	w->last_ip = ip;
	w->have_ip = 1;
	rec_pw_put(w, &p);
}

void rec_pw_ip_none(struct rec_pw *w, enum pt_packet_type type)
{
	struct pt_packet p;

	rec_pw_tnt_flush(w);
	memset(&p, 0, sizeof(p));
	p.type = type;
	p.payload.ip.ipc = pt_ipc_suppressed;
	rec_pw_put(w, &p);
}

void rec_pw_simple(struct rec_pw *w, enum pt_packet_type type)
{
	struct pt_packet p;

	rec_pw_tnt_flush(w);
	memset(&p, 0, sizeof(p));
	p.type = type;
	rec_pw_put(w, &p);
	/* A decoder forgets the last IP at every PSB. */
	if (type == ppt_psb)
		w->have_ip = 0;
}

void rec_pw_tsc(struct rec_pw *w, uint64_t tsc)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = ppt_tsc;
	p.payload.tsc.tsc = tsc;
	rec_pw_put(w, &p);
}

void rec_pw_mode_exec(struct rec_pw *w)
{
	struct pt_packet p;

	rec_pw_tnt_flush(w);
	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	rec_pw_put(w, &p);
}

int rec_pw_finish(struct rec_pw *w)
{
	rec_pw_tnt_flush(w);
	flush(w);
	if (fflush(w->fp) != 0)
		w->err = 1;
	return w->err ? -1 : 0;
}

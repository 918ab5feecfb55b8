#include "ptw.h"

#include <stdlib.h>
#include <string.h>

/* Small enough for one writer per recorded thread. */
#define PTW_BUF (1u << 18)

int ptw_init(struct ptw *w, FILE *fp)
{
	struct pt_config cfg;

	memset(w, 0, sizeof(*w));
	w->fp = fp;
	w->bufsize = PTW_BUF;
	w->buf = malloc(w->bufsize);
	if (!w->buf)
		return -1;
	pt_config_init(&cfg);
	cfg.begin = w->buf;
	cfg.end = w->buf + w->bufsize;
	w->enc = pt_alloc_encoder(&cfg);
	if (!w->enc) {
		free(w->buf);
		w->buf = NULL;
		return -1;
	}
	return 0;
}

void ptw_fini(struct ptw *w)
{
	pt_free_encoder(w->enc);
	free(w->buf);
	w->enc = NULL;
	w->buf = NULL;
}

static uint64_t pending(const struct ptw *w)
{
	uint64_t off = 0;

	pt_enc_get_offset(w->enc, &off);
	return off;
}

uint64_t ptw_offset(const struct ptw *w)
{
	return w->flushed + pending(w);
}

static void flush(struct ptw *w)
{
	uint64_t n = pending(w);

	if (n && fwrite(w->buf, 1, n, w->fp) != n)
		w->err = 1;
	w->flushed += n;
	pt_enc_sync_set(w->enc, 0);
}

void ptw_put(struct ptw *w, struct pt_packet *pkt)
{
	/* The largest packet is 16 bytes (PSB); keep room for any. */
	if (w->bufsize - pending(w) < 64)
		flush(w);
	if (pt_enc_next(w->enc, pkt) < 0)
		w->err = 1;
}

int ptw_tnt_starts(const struct ptw *w)
{
	return w->tnt_n == 0;
}

void ptw_tnt_flush(struct ptw *w)
{
	struct pt_packet p;

	if (!w->tnt_n)
		return;
	memset(&p, 0, sizeof(p));
	p.type = w->tnt_max > 6 ? ppt_tnt_64 : ppt_tnt_8;
	p.payload.tnt.bit_size = (uint8_t) w->tnt_n;
	p.payload.tnt.payload = w->tnt;
	w->tnt = 0;
	w->tnt_n = 0;
	ptw_put(w, &p);
}

void ptw_tnt(struct ptw *w, int taken, unsigned max)
{
	if (!w->tnt_n)
		w->tnt_max = max;
	w->tnt = (w->tnt << 1) | (taken ? 1u : 0u);
	if (++w->tnt_n == w->tnt_max)
		ptw_tnt_flush(w);
}

void ptw_ip(struct ptw *w, enum pt_packet_type type, uint64_t ip)
{
	struct pt_packet p;

	ptw_tnt_flush(w);
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
	ptw_put(w, &p);
}

void ptw_ip_suppressed(struct ptw *w, enum pt_packet_type type)
{
	struct pt_packet p;

	ptw_tnt_flush(w);
	memset(&p, 0, sizeof(p));
	p.type = type;
	p.payload.ip.ipc = pt_ipc_suppressed;
	ptw_put(w, &p);
}

void ptw_simple(struct ptw *w, enum pt_packet_type type)
{
	struct pt_packet p;

	ptw_tnt_flush(w);
	memset(&p, 0, sizeof(p));
	p.type = type;
	ptw_put(w, &p);
	if (type == ppt_psb) {
		w->have_ip = 0;
		w->last_ip = 0;
	}
}

void ptw_tsc(struct ptw *w, uint64_t tsc)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = ppt_tsc;
	p.payload.tsc.tsc = tsc;
	ptw_put(w, &p);
}

void ptw_mode_exec(struct ptw *w)
{
	struct pt_packet p;

	ptw_tnt_flush(w);
	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	ptw_put(w, &p);
}

int ptw_finish(struct ptw *w)
{
	ptw_tnt_flush(w);
	flush(w);
	if (fflush(w->fp) != 0)
		w->err = 1;
	return w->err ? -1 : 0;
}

int ptw_flush(struct ptw *w)
{
	flush(w);
	if (fflush(w->fp) != 0)
		w->err = 1;
	return w->err ? -1 : 0;
}

void ptw_set_file(struct ptw *w, FILE *fp)
{
	flush(w);
	w->fp = fp;
}

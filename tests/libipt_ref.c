#include "libipt_ref.h"

#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PUSH(arr, n, val) do {                                          \
		if (((n) & ((n) - 1)) == 0) {                           \
			void *p_ = realloc((arr), ((n) ? (n) * 2 : 16) * \
					   sizeof(*(arr)));             \
			if (!p_) abort();                               \
			(arr) = p_;                                     \
		}                                                       \
		(arr)[(n)++] = (val);                                   \
	} while (0)

static uint8_t *slurp(const char *path, size_t *size)
{
	FILE *fp = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;

	if (!fp)
		return NULL;
	if (fstat(fileno(fp), &st) < 0 || !(buf = malloc((size_t) st.st_size + 1))) {
		fclose(fp);
		return NULL;
	}
	*size = fread(buf, 1, (size_t) st.st_size, fp);
	fclose(fp);
	return buf;
}

static void config(struct pt_config *c, const struct ref_cfg *cfg,
		   uint8_t *buf, size_t size)
{
	pt_config_init(c);
	c->begin = buf;
	c->end = buf + size;
	c->cpuid_0x15_eax = cfg->cpuid_eax;
	c->cpuid_0x15_ebx = cfg->cpuid_ebx;
	c->mtc_freq = (uint8_t) cfg->mtc_freq;
	c->nom_freq = (uint8_t) cfg->nom_freq;
}

static int add_elf(struct pt_image *img, const struct ref_cfg *cfg)
{
	struct stat st;

	/* The synthesizer's single PT_LOAD starts at file offset 0. */
	if (stat(cfg->elf, &st) < 0)
		return -1;
	return pt_image_add_file(img, cfg->elf, 0, (uint64_t) st.st_size,
				 NULL, cfg->base);
}

int ref_decode_insn(const struct ref_cfg *cfg, struct ref *out)
{
	struct pt_insn_decoder *d;
	struct pt_config c;
	size_t size;
	uint8_t *buf = slurp(cfg->trace, &size);
	int status, off = 0, async_off = 0, call_pending = 0;
	uint64_t call_id = 0;

	if (!buf)
		return -1;
	config(&c, cfg, buf, size);
	d = pt_insn_alloc_decoder(&c);
	if (!d || add_elf(pt_insn_get_image(d), cfg) < 0) {
		free(buf);
		return -1;
	}
	for (;;) {
		status = pt_insn_sync_forward(d);
		if (status < 0)
			break;
		for (;;) {
			struct pt_insn insn;

			while (status & pts_event_pending) {
				struct pt_event ev;

				status = pt_insn_event(d, &ev, sizeof(ev));
				if (status < 0)
					break;
				if (ev.type == ptev_disabled ||
				    ev.type == ptev_async_disabled) {
					off = 1;
					async_off = ev.type == ptev_async_disabled;
				} else if (ev.type == ptev_enabled && off) {
					struct ref_gap g = { out->insns, 0 };

					if (!ev.variant.enabled.resumed)
						PUSH(out->gaps, out->ngaps, g);
					off = 0;
				} else if (ev.type == ptev_overflow) {
					struct ref_gap g = { out->insns, 1 };

					PUSH(out->gaps, out->ngaps, g);
				}
			}
			if (status < 0)
				break;
			status = pt_insn_next(d, &insn, sizeof(insn));
			if (status < 0)
				break;
			if (call_pending) {
				struct ref_call cl = { call_id, insn.ip };

				PUSH(out->calls, out->ncalls, cl);
				call_pending = 0;
			}
			if (insn.iclass == ptic_call) {
				call_pending = 1;
				call_id = out->insns;
			} else if (insn.iclass == ptic_return) {
				PUSH(out->rets, out->nrets, out->insns);
			}
			out->insns++;
		}
		if (status == -pte_eos)
			break;
		out->errors++;
	}
	if (off && async_off) {
		struct ref_gap g = { out->insns, 0 };

		PUSH(out->gaps, out->ngaps, g);
	}
	pt_insn_free_decoder(d);
	free(buf);
	return 0;
}

int ref_decode_time(const struct ref_cfg *cfg, struct ref *out)
{
	struct pt_block_decoder *d;
	struct pt_config c;
	size_t size;
	uint8_t *buf = slurp(cfg->trace, &size);
	int status;
	uint64_t id = 0;

	if (!buf)
		return -1;
	config(&c, cfg, buf, size);
	c.flags.variant.block.end_on_call = 1;
	d = pt_blk_alloc_decoder(&c);
	if (!d || add_elf(pt_blk_get_image(d), cfg) < 0) {
		free(buf);
		return -1;
	}
	for (;;) {
		status = pt_blk_sync_forward(d);
		if (status < 0)
			break;
		for (;;) {
			struct pt_block b;

			while (status & pts_event_pending) {
				struct pt_event ev;

				status = pt_blk_event(d, &ev, sizeof(ev));
				if (status < 0)
					break;
			}
			if (status < 0)
				break;
			status = pt_blk_next(d, &b, sizeof(b));
			id += b.ninsn;
			if (b.ninsn && (b.iclass == ptic_call ||
					b.iclass == ptic_return)) {
				struct ref_time t;

				t.id = b.iclass == ptic_call ? id : id - 1;
				pt_blk_time(d, &t.tsc, NULL, NULL);
				PUSH(out->times, out->ntimes, t);
			}
			if (status < 0)
				break;
		}
		if (status == -pte_eos)
			break;
	}
	pt_blk_free_decoder(d);
	free(buf);
	return 0;
}

void ref_free(struct ref *r)
{
	free(r->calls);
	free(r->rets);
	free(r->gaps);
	free(r->times);
	memset(r, 0, sizeof(*r));
}

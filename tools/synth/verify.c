#include "verify.h"
#include "truth.h"

#include <elf.h>
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

/* The synthesizer's single PT_LOAD, at @base: only the code it holds is
 * mapped (the errors scenario's libraries are not). */
static int add_elf(struct pt_image *img, const struct ref_cfg *cfg)
{
	FILE *fp = fopen(cfg->elf, "rb");
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int ok;

	if (!fp)
		return -1;
	ok = fread(&eh, sizeof(eh), 1, fp) == 1 && eh.e_phnum == 1 &&
	     fseek(fp, (long) eh.e_phoff, SEEK_SET) == 0 &&
	     fread(&ph, sizeof(ph), 1, fp) == 1 && ph.p_type == PT_LOAD;
	fclose(fp);
	if (!ok)
		return -1;
	return pt_image_add_file(img, cfg->elf, ph.p_offset, ph.p_filesz,
				 NULL, cfg->base);
}

int ref_decode_insn(const struct ref_cfg *cfg, struct ref *out)
{
	struct pt_insn_decoder *d;
	struct pt_config c;
	size_t size;
	uint8_t *buf = slurp(cfg->trace, &size);
	int status, off = 0, async_off = 0, call_pending = 0;
	uint64_t call_id = 0, call_ret = 0, off_at = 0;
	uint64_t pgd_ip = 0, irq_from = 0;   /* since the pending call */
	uint64_t err_ip = 0;

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
				switch (ev.type) {
				case ptev_disabled:
					off = 1;
					async_off = 0;
					if (!ev.ip_suppressed)
						pgd_ip = ev.variant.disabled.ip;
					break;
				case ptev_async_disabled:
					off = 1;
					async_off = 1;
					off_at = ev.variant.async_disabled.at;
					break;
				case ptev_enabled:
					/* Only an asynchronous disable that
					 * resumes at the very IP where it
					 * stopped loses nothing (libipt also
					 * says "resumed" after a call or a
					 * syscall into untraced code). */
					if (off && !(async_off &&
						     ev.variant.enabled.ip == off_at)) {
						struct ref_gap g = { out->insns, 0, 0 };

						PUSH(out->gaps, out->ngaps, g);
					}
					/* Into untraced code and straight
					 * back: the callee ran nothing
					 * traced, it is no block. */
					if (call_pending && pgd_ip &&
					    ev.variant.enabled.ip == call_ret)
						call_pending = 0;
					off = 0;
					break;
				case ptev_overflow: {
					struct ref_gap g = { out->insns, 1, 0 };

					PUSH(out->gaps, out->ngaps, g);
					break;
				}
				case ptev_async_branch:
					irq_from = ev.variant.async_branch.from;
					break;
				default:
					break;
				}
			}
			if (status < 0)
				break;
			insn.ip = 0;
			status = pt_insn_next(d, &insn, sizeof(insn));
			if (status < 0) {
				err_ip = insn.ip;
				break;
			}
			if (call_pending) {
				struct ref_call cl = { call_id, insn.ip, 0 };

				if (pgd_ip)
					cl.target = pgd_ip;
				else if (irq_from)
					cl.target = irq_from;
				PUSH(out->calls, out->ncalls, cl);
				call_pending = 0;
			}
			if (insn.iclass == ptic_call) {
				call_pending = 1;
				call_id = out->insns;
				call_ret = insn.ip + insn.size;
				pgd_ip = irq_from = 0;
			} else if (insn.iclass == ptic_return ||
				   insn.iclass == ptic_far_return) {
				PUSH(out->rets, out->nrets, out->insns);
			} else if (insn.iclass == ptic_jump &&
				   insn.raw[0] == 0xff) {
				PUSH(out->ijmps, out->nijmps, out->insns);
			}
			out->insns++;
		}
		if (status == -pte_eos)
			break;
		{
			/* Decoding goes on at the next PSB: an error gap.
			 * A call right before it entered the code that is
			 * not there: its callee is a block only if decoding
			 * resumes inside a callback of it. */
			struct ref_gap g = { out->insns, 0, 1 };

			PUSH(out->gaps, out->ngaps, g);
			if (call_pending) {
				struct ref_call cl = { call_id, err_ip, 1 };

				PUSH(out->calls, out->ncalls, cl);
				call_pending = 0;
			}
		}
		out->errors++;
	}
	if (off && async_off) {
		struct ref_gap g = { out->insns, 0, 0 };

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
		if (id) {
			/* After a decode error the next block starts at the
			 * PSB's time, not where the last one ended. */
			struct ref_time t = { id, 0 };

			if (out->ntimes && out->times[out->ntimes - 1].id == id)
				out->ntimes--;
			pt_blk_time(d, &t.tsc, NULL, NULL);
			PUSH(out->times, out->ntimes, t);
		}
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
			if (b.ninsn) {
				struct ref_time t;

				pt_blk_time(d, &t.tsc, NULL, NULL);
				t.id = id;
				PUSH(out->times, out->ntimes, t);
				t.id = id - 1;
				PUSH(out->times_last, out->ntimes_last, t);
			}
			if (status < 0)
				break;
		}
		if (status == -pte_eos)
			break;
	}
	out->blk_insns = id;
	pt_blk_free_decoder(d);
	free(buf);
	return 0;
}

void ref_free(struct ref *r)
{
	free(r->calls);
	free(r->rets);
	free(r->ijmps);
	free(r->gaps);
	free(r->times);
	free(r->times_last);
	memset(r, 0, sizeof(*r));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

static int cmp_call(const void *a, const void *b)
{
	return cmp_u64(&((const struct ref_call *) a)->id,
		       &((const struct ref_call *) b)->id);
}

static int cmp_time(const void *a, const void *b)
{
	return cmp_u64(&((const struct ref_time *) a)->id,
		       &((const struct ref_time *) b)->id);
}

/* The decoder's time at the block boundary before @id (@last 0) or after
 * @id (@last 1). */
static int time_at(const struct ref *r, uint64_t id, int last, uint64_t *tsc)
{
	struct ref_time key = { id, 0 };
	const struct ref_time *t = bsearch(&key, last ? r->times_last :
					   r->times, last ? r->ntimes_last :
					   r->ntimes, sizeof(key), cmp_time);

	if (t)
		*tsc = t->tsc;
	return t ? 0 : -1;
}

#define MISMATCH(...) do { snprintf(err, errlen, __VA_ARGS__); goto out; } while (0)

static int compare(const struct truth *t, struct ref *r,
		   struct synth_verify *res, char *err, size_t errlen)
{
	struct ref_call *calls = calloc(t->nblocks + 1, sizeof(*calls));
	uint64_t *rets = calloc(t->nblocks + 1, sizeof(*rets));
	size_t nc = 0, nr = 0, i, j, nerr = 0;
	int rc = -1;

	if (!calls || !rets)
		MISMATCH("out of memory");
	for (i = 0; i < t->ngaps; i++)
		nerr += t->gaps[i].error != 0;
	if (r->errors != nerr)
		MISMATCH("libipt hit %llu decode errors, truth has %zu",
			 (unsigned long long) r->errors, nerr);
	if (r->insns != t->insns)
		MISMATCH("libipt decodes %llu instructions, truth says %llu",
			 (unsigned long long) r->insns,
			 (unsigned long long) t->insns);
	/* Where the trace stops abruptly, the block decoder also delivers
	 * the instructions up to the next one that needs trace. */
	if (r->blk_insns < r->insns)
		MISMATCH("libipt's block decoder delivers %llu instructions, "
			 "its instruction decoder %llu",
			 (unsigned long long) r->blk_insns,
			 (unsigned long long) r->insns);
	/* An invocation entered by a traced call is a call at first-1 to its
	 * function's entry (late ones opened where decoding resumed have no
	 * call); one that did not end otherwise ends in a return at last
	 * (unwound ones share the return that showed it, or end at the jump
	 * that did). */
	for (i = 0; i < t->nblocks; i++) {
		const struct truth_block *b = &t->blocks[i];

		if (b->func >= t->nfuncs && b->func != TRUTH_FUNC_NONE)
			MISMATCH("block %lld: bad function", (long long) b->pre);
		if (!(b->flags & (TRUTH_LATE | TRUTH_CALLBACK | TRUTH_IRQ))) {
			/* FUNC -1: a call into code the image lacks, right
			 * before a decode error (target 0: not compared) */
			calls[nc].id = b->first - 1;
			calls[nc++].target = b->func == TRUTH_FUNC_NONE ? 0 :
					     t->funcs[b->func].entry;
		}
		if ((b->flags & TRUTH_UNWOUND) && r->nijmps &&
		    bsearch(&b->last, r->ijmps, r->nijmps, sizeof(uint64_t),
			    cmp_u64))
			continue;
		if (!(b->flags & (TRUTH_TRUNC | TRUTH_RETGAP)))
			rets[nr++] = b->last;
	}
	qsort(calls, nc, sizeof(*calls), cmp_call);
	qsort(rets, nr, sizeof(*rets), cmp_u64);
	for (i = 0, j = 0; i < nr; i++)
		if (!j || rets[j - 1] != rets[i])
			rets[j++] = rets[i];
	nr = j;
	qsort(r->times, r->ntimes, sizeof(*r->times), cmp_time);
	qsort(r->times_last, r->ntimes_last, sizeof(*r->times_last),
	      cmp_time);
	/* A call right before a decode error is in the truth only where its
	 * callee became a block; every other call is in both. */
	for (i = 0, j = 0; i < nc || j < r->ncalls; j++) {
		if (j == r->ncalls)
			MISMATCH("truth has call #%zu at %llu, libipt not", i,
				 (unsigned long long) calls[i].id);
		if (i < nc && r->calls[j].id == calls[i].id &&
		    (r->calls[j].target == calls[i].target ||
		     (!calls[i].target && r->calls[j].err))) {
			i++;
			continue;
		}
		if (r->calls[j].err && (i == nc ||
					r->calls[j].id != calls[i].id))
			continue;
		if (i == nc)
			MISMATCH("libipt decodes call #%zu at %llu to 0x%llx, "
				 "truth has no more", j,
				 (unsigned long long) r->calls[j].id,
				 (unsigned long long) r->calls[j].target);
		MISMATCH("call #%zu: libipt at %llu to 0x%llx, truth at "
			 "%llu to 0x%llx", j,
			 (unsigned long long) r->calls[j].id,
			 (unsigned long long) r->calls[j].target,
			 (unsigned long long) calls[i].id,
			 (unsigned long long) calls[i].target);
	}
	for (i = 0; i < nr && i < r->nrets; i++)
		if (r->rets[i] != rets[i])
			MISMATCH("return #%zu: libipt at %llu, truth at %llu", i,
				 (unsigned long long) r->rets[i],
				 (unsigned long long) rets[i]);
	if (r->nrets != nr)
		MISMATCH("libipt decodes %zu returns, truth has %zu", r->nrets, nr);
	if (r->ngaps != t->ngaps)
		MISMATCH("libipt sees %zu gaps, truth has %zu", r->ngaps, t->ngaps);
	for (i = 0; i < t->ngaps; i++)
		if (r->gaps[i].id != t->gaps[i].id ||
		    r->gaps[i].overflow != t->gaps[i].overflow ||
		    r->gaps[i].error != t->gaps[i].error)
			MISMATCH("gap #%zu: libipt at %llu, truth at %llu", i,
				 (unsigned long long) r->gaps[i].id,
				 (unsigned long long) t->gaps[i].id);
	for (i = 0; i < t->nblocks; i++) {
		const struct truth_block *b = &t->blocks[i];
		uint64_t tsc = 0;

		if (!(b->flags & TRUTH_LATE) || b->first) {
			if (time_at(r, b->first, 0, &tsc) < 0 ||
			    tsc != b->tsc_first)
				MISMATCH("block %lld: tsc at its first instruction "
					 "%llu: libipt %llu, truth %llu",
					 (long long) b->pre,
					 (unsigned long long) b->first,
					 (unsigned long long) tsc,
					 (unsigned long long) b->tsc_first);
			res->times++;
		}
		if (!(b->flags & (TRUTH_TRUNC | TRUTH_RETGAP))) {
			if (time_at(r, b->last, 1, &tsc) < 0 ||
			    tsc != b->tsc_last)
				MISMATCH("block %lld: tsc at its return %llu: "
					 "libipt %llu, truth %llu",
					 (long long) b->pre,
					 (unsigned long long) b->last,
					 (unsigned long long) tsc,
					 (unsigned long long) b->tsc_last);
			res->times++;
		}
	}
	res->insns = r->insns;
	res->calls = nc;
	res->rets = nr;
	res->gaps = t->ngaps;
	rc = 0;
out:
	free(calls);
	free(rets);
	return rc;
}

int synth_verify(const char *prefix, struct synth_verify *res, char *err,
		 size_t errlen)
{
	size_t n = strlen(prefix) + 16;
	char *truth_path = malloc(n), *trace = malloc(n), *elf = malloc(n);
	struct truth t;
	struct ref r;
	struct ref_cfg cfg;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	memset(&r, 0, sizeof(r));
	if (!truth_path || !trace || !elf) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	snprintf(truth_path, n, "%s.truth", prefix);
	snprintf(trace, n, "%s.pt", prefix);
	snprintf(elf, n, "%s.elf", prefix);
	if (truth_load(&t, truth_path, err, errlen) < 0)
		goto out;
	memset(&cfg, 0, sizeof(cfg));
	cfg.trace = trace;
	cfg.elf = elf;
	cfg.base = t.base;
	cfg.cpuid_eax = t.cpuid_eax;
	cfg.cpuid_ebx = t.cpuid_ebx;
	cfg.mtc_freq = t.mtc_freq;
	cfg.nom_freq = t.nom_freq;
	if (ref_decode_insn(&cfg, &r) < 0 || ref_decode_time(&cfg, &r) < 0)
		snprintf(err, errlen, "%s: cannot decode with %s", trace, elf);
	else
		rc = compare(&t, &r, res, err, errlen);
	truth_free(&t);
out:
	ref_free(&r);
	free(truth_path);
	free(trace);
	free(elf);
	return rc;
}

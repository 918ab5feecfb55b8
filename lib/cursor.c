/*
 * The instruction cursor (htr/cursor.h): libipt's instruction-flow decoder
 * restarted at the sync point before the wanted ID.
 *
 * IDs stay aligned with the tree because the build recorded, for every
 * PSB it passed, the ID of the first instruction after it: a cursor that
 * syncs there starts counting at that ID, and after a decode error it
 * resumes at the next sync point with that point's ID, as the build did.
 * Times come from the file's time points, so they are the build's.
 */
#include "htr/cursor.h"

#include "abi.h"
#include "decode.h"
#include "err.h"
#include "le.h"
#include "perfdata.h"

#include <intel-pt.h>
#include <Zydis/Zydis.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct htr_cursor {
	struct htr_err err;
	const struct htr_file *file;
	struct htr_cursor_opts opts;
	uint8_t *trace;            /* mapped, or in @joined */
	uint64_t trace_size;
	/* A perf.data: the reader, and the thread's trace as the build
	 * joined it. */
	struct htr_perfdata *pd;
	struct htr_perf_joined joined;
	struct pt_image_section_cache *isc;
	struct pt_image *image;
	struct pt_block_decoder *dec;
	ZydisDecoder z64, z32, z16;
	uint64_t ninsns, nsync, ngaps;
	/* Position: the next instruction gets ID @id; @sync is the index of
	 * the last sync point decoding started from or passed; @status is
	 * libipt's. */
	uint64_t id, sync;
	int status, synced;
	/* The block being split into instructions. */
	struct pt_block blk;
	uint16_t left;
	uint64_t next_ip;
	/* A PSB was passed: the next block starts at this ID (the build's).
	 * Each PSB once: several events of one PSB+ say so. */
	int realign;
	uint64_t realign_id;
	uint64_t psb;              /* offset of the last PSB used */
	uint64_t gap_next;         /* index of the next gap not passed */
	uint64_t tsc_hint;
	int off_seen;              /* since the last block: tracing stopped
				    * or (re)started, or a sync */
};

static int fail(struct htr_cursor *c, int code, const char *fmt,
		const char *what)
{
	return htr_err__set(&c->err, code, fmt, what);
}

/* Add a piece of the recorded image from @path. */
static int add_piece(struct htr_cursor *c, const char *path,
		     const struct htr_image_info *im)
{
	int isid = pt_iscache_add_file(c->isc, path, im->offset, im->bytes,
				       im->vaddr);

	return isid < 0 ? isid : pt_image_add_cached(c->image, c->isc, isid,
						      NULL);
}

/* Load the image the file records: every piece from its file at its
 * address (an image that moved is looked for next to the .htr).  Through
 * a section cache, so block.isid says where each block's bytes are. */
static int load_image(struct htr_cursor *c)
{
	struct htr_image_info im;
	const char *hp = htr_file_path(c->file), *slash;
	uint64_t i;
	char *path = NULL;
	int rc;

	c->isc = pt_iscache_alloc(NULL);
	c->image = pt_image_alloc(NULL);
	if (!c->isc || !c->image)
		return htr_err__set(&c->err, HTR_ERR_NOMEM, "out of memory");
	for (i = 0; ; i++) {
		size_t n;

		im.size = sizeof(im);
		rc = htr_image_get(c->file, i, &im, sizeof(im));
		if (rc == HTR_ERR_RANGE)
			break;
		if (rc < 0)
			return htr_err__set(&c->err, rc, "image %llu: %s",
					    (unsigned long long) i,
					    htr_errstr(rc));
		n = im.path_len;
		free(path);
		path = malloc(n + 1);
		if (!path)
			return htr_err__set(&c->err, HTR_ERR_NOMEM,
					    "out of memory");
		memcpy(path, im.path, n);
		path[n] = 0;
		rc = add_piece(c, path, &im);
		if (rc < 0 && hp && (slash = strrchr(path, '/'))) {
			const char *hs = strrchr(hp, '/');
			size_t dl = hs ? (size_t) (hs - hp + 1) : 0;
			char *alt = malloc(dl + strlen(slash + 1) + 1);

			if (!alt) {
				free(path);
				return htr_err__set(&c->err, HTR_ERR_NOMEM,
						    "out of memory");
			}
			memcpy(alt, hp, dl);
			strcpy(alt + dl, slash + 1);
			rc = add_piece(c, alt, &im);
			free(alt);
		}
		if (rc < 0) {
			htr_err__set(&c->err, HTR_ERR_DECODE, "%s: cannot load "
				     "the image: %s", path,
				     pt_errstr(pt_errcode(rc)));
			free(path);
			return HTR_ERR_DECODE;
		}
	}
	free(path);
	return 0;
}

/* The trace of the file's thread in the perf.data at opts.trace: its
 * chunks joined as the build joined them.  The CPU the file declares is
 * the one the build gave libipt, unless the caller named one. */
static int perf_trace(struct htr_cursor *c)
{
	const struct htr_perf_thread *t = NULL;
	struct htr_thread_info ti;
	size_t i;
	int rc;

	ti.size = sizeof(ti);
	if (htr_file_thread(c->file, &ti, sizeof(ti)) < 0)
		return fail(c, HTR_ERR_FORMAT, "%s: a perf.data, but the file "
			    "was not built from one", c->opts.trace);
	rc = htr_perfdata__open(&c->pd, c->opts.trace, &c->err);
	if (rc < 0)
		return rc;
	/* Per-CPU buffers interleave threads: a thread's file has no sync
	 * points into one stream of its own. */
	if (c->pd->ncpus)
		return fail(c, HTR_ERR_FORMAT, "%s: a CPU-wide perf.data "
			    "(per-CPU buffers): its threads cannot be "
			    "re-decoded", c->opts.trace);
	for (i = 0; i < c->pd->nthreads; i++)
		if (c->pd->threads[i].tid == ti.tid &&
		    c->pd->threads[i].pid == ti.pid &&
		    c->pd->threads[i].pt_bytes)
			t = &c->pd->threads[i];
	if (!t)
		return htr_err__set(&c->err, HTR_ERR_FORMAT, "%s: no trace of "
				    "thread %u (pid %u)", c->opts.trace,
				    ti.tid, ti.pid);
	rc = htr_perfdata__join(c->pd->data, t->chunks, t->nchunks,
				&c->joined, &c->err);
	/* User and kernel traced: as htr build decoded it (without
	 * --kcore/--vmlinux; a build with them fails the size check). */
	if (rc == 0 && c->pd->pt.kernel)
		rc = htr_perfdata__user_only(&c->joined, NULL, &c->err);
	if (rc < 0)
		return rc;
	c->trace = (uint8_t *) c->joined.data;
	c->trace_size = c->joined.size;
	if (!c->opts.cpu_family) {
		c->opts.cpu_family = c->pd->cpu_family;
		c->opts.cpu_model = c->pd->cpu_model;
		c->opts.cpu_stepping = c->pd->cpu_stepping;
	}
	return 0;
}

static int map_trace(struct htr_cursor *c)
{
	struct htr_file_info fi;
	struct stat st;
	void *p;
	int fd, rc;

	fi.size = sizeof(fi);
	if (htr_file_info(c->file, &fi, sizeof(fi)) < 0)
		return fail(c, HTR_ERR_INVALID, "%s: bad file", "cursor");
	c->ninsns = fi.ninsns;
	c->nsync = fi.nsync;
	c->ngaps = fi.ngaps;
	fd = open(c->opts.trace, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return htr_err__sys(&c->err, "%s", c->opts.trace);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !st.st_size) {
		close(fd);
		return fail(c, HTR_ERR_IO, "%s: not a trace file",
			    c->opts.trace);
	}
	p = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return htr_err__sys(&c->err, "%s: mmap", c->opts.trace);
	if (st.st_size >= 8 && !memcmp(p, "PERFILE2", 8)) {
		munmap(p, (size_t) st.st_size);
		if ((rc = perf_trace(c)) < 0)
			return rc;
	} else {
		c->trace = p;
		c->trace_size = (uint64_t) st.st_size;
	}
	if (fi.trace_size != c->trace_size ||
	    fi.trace_hash != htr_hash__bytes(HTR_HASH_SEED, c->trace,
					     c->trace_size))
		return fail(c, HTR_ERR_FORMAT, "%s: not the trace the file "
			    "was built from (size or hash differ)",
			    c->opts.trace);
	return 0;
}

void htr_cursor_opts_init_size(struct htr_cursor_opts *opts, size_t size)
{
	htr_abi__init(opts, size);
}

int htr_cursor_alloc(struct htr_cursor **out, const struct htr_file *file,
		     const struct htr_cursor_opts *opts)
{
	struct htr_cursor *c;
	struct pt_config cfg;
	int rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = c = calloc(1, sizeof(*c));
	if (!c)
		return HTR_ERR_NOMEM;
	if (!file)
		return fail(c, HTR_ERR_INVALID, "%s: no file", "cursor");
	c->file = file;
	if (htr_abi__in(&c->opts, sizeof(c->opts), opts,
			htr_abi__size_of(opts),
			HTR_ABI_SIZE0(struct htr_cursor_opts, cpu_stepping)) < 0)
		return fail(c, HTR_ERR_INVALID, "%s: bad options size",
			    "cursor");
	if (!c->opts.trace)
		return fail(c, HTR_ERR_INVALID, "%s: no trace given "
			    "(htr_cursor_opts.trace)", "cursor");
	if ((rc = map_trace(c)) < 0 || (rc = load_image(c)) < 0)
		return rc;
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&c->z64, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64)) ||
	    !ZYAN_SUCCESS(ZydisDecoderInit(&c->z32,
					   ZYDIS_MACHINE_MODE_LONG_COMPAT_32,
					   ZYDIS_STACK_WIDTH_32)) ||
	    !ZYAN_SUCCESS(ZydisDecoderInit(&c->z16,
					   ZYDIS_MACHINE_MODE_LONG_COMPAT_16,
					   ZYDIS_STACK_WIDTH_16)))
		return fail(c, HTR_ERR_DECODE, "%s: cannot set up Zydis",
			    "cursor");
	/* As the build decoded: libipt's block decoder, blocks ending at
	 * calls and direct jumps (decode.c says why).  The same decoder reads
	 * ahead the same way, so it passes each PSB at the same block
	 * boundary the build recorded. */
	pt_config_init(&cfg);
	cfg.begin = c->trace;
	cfg.end = c->trace + c->trace_size;
	cfg.flags.variant.block.end_on_call = 1;
	cfg.flags.variant.block.end_on_jump = 1;
	if (c->opts.cpu_family) {
		cfg.cpu.vendor = pcv_intel;
		cfg.cpu.family = (uint16_t) c->opts.cpu_family;
		cfg.cpu.model = (uint8_t) c->opts.cpu_model;
		cfg.cpu.stepping = (uint8_t) c->opts.cpu_stepping;
		(void) pt_cpu_errata(&cfg.errata, &cfg.cpu);
	}
	c->dec = pt_blk_alloc_decoder(&cfg);
	if (!c->dec || pt_blk_set_image(c->dec, c->image) < 0)
		return fail(c, HTR_ERR_DECODE, "%s: cannot set up the decoder",
			    c->opts.trace);
	/* Before instruction 0. */
	return c->ninsns ? htr_cursor_seek(c, 0) : 0;
}

void htr_cursor_free(struct htr_cursor *c)
{
	if (!c)
		return;
	pt_blk_free_decoder(c->dec);
	/* The image references the cache's sections: free it first. */
	pt_image_free(c->image);
	pt_iscache_free(c->isc);
	if (c->pd) {
		htr_perfdata__unjoin(&c->joined);
		htr_perfdata__close(c->pd);
	} else if (c->trace) {
		munmap(c->trace, c->trace_size);
	}
	free(c);
}

const char *htr_cursor_last_error(const struct htr_cursor *c)
{
	return c ? c->err.msg : "";
}

static struct htr_sync_info sync_point(const struct htr_cursor *c, uint64_t k)
{
	struct htr_sync_info s;

	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	if (htr_sync_get(c->file, k, &s, sizeof(s)) < 0)
		s.offset = UINT64_MAX;
	return s;
}

/* Start decoding at sync point @k, with its ID. */
static void sync_at(struct htr_cursor *c, uint64_t k)
{
	struct htr_sync_info s = sync_point(c, k);

	c->sync = k;
	c->id = s.id;
	c->left = 0;
	c->realign = 0;
	c->psb = s.offset;
	c->off_seen = 1;
	c->status = pt_blk_sync_set(c->dec, s.offset);
	c->synced = c->status >= 0;
}

/* Where the build went on after an error, a runaway or a segment that
 * ended: the first sync point at or past where the decoder stopped.
 * Returns 0, or -1 when there is none. */
static int resync(struct htr_cursor *c)
{
	uint64_t k, pos = 0;

	(void) pt_blk_get_offset(c->dec, &pos);
	for (k = c->sync + 1; k < c->nsync; k++)
		if (sync_point(c, k).offset >= pos) {
			sync_at(c, k);
			return 0;
		}
	c->synced = 0;
	return -1;
}

/* The gap right before instruction @id, 0 if none. */
static int gap_before(struct htr_cursor *c, uint64_t id, int *runaway)
{
	struct htr_gap_info g;
	int kind = 0;

	*runaway = 0;
	while (c->gap_next < c->ngaps) {
		g.size = sizeof(g);
		if (htr_gap_get(c->file, c->gap_next, &g, sizeof(g)) < 0 ||
		    g.id > id)
			break;
		if (g.id == id) {
			kind = g.kind;
			*runaway |= g.kind == HTR_GAP_ERROR &&
				    g.code == HTR_GAP_CODE_RUNAWAY;
		}
		c->gap_next++;
	}
	return kind;
}

/* The ID of the first runaway gap in [c->id, @end), else @end: the build
 * stopped decoding there and went on at the next sync point.  Passes the
 * gaps before c->id. */
static uint64_t runaway_before(struct htr_cursor *c, uint64_t end)
{
	struct htr_gap_info g;
	uint64_t k;

	for (k = c->gap_next; k < c->ngaps; k++) {
		g.size = sizeof(g);
		if (htr_gap_get(c->file, k, &g, sizeof(g)) < 0 || g.id >= end)
			break;
		if (g.id < c->id)
			c->gap_next = k + 1;
		else if (g.kind == HTR_GAP_ERROR &&
			 g.code == HTR_GAP_CODE_RUNAWAY)
			return g.id;
	}
	return end;
}

/*
 * The decoder read a PSB+ while decoding (a status update), as the build's
 * decoder did at the same point: the build gave the next block the ID it
 * recorded for that PSB.  Seeks start a PSB early and take the IDs from
 * the PSB they pass: a restart at a PSB can deliver an instruction more or
 * less than decoding through it (an event pending across it).
 */
static void passed_psb(struct htr_cursor *c)
{
	uint64_t pos = 0, i, lo, hi;

	(void) pt_blk_get_offset(c->dec, &pos);
	i = htr_decode__psb_before(c->trace, c->trace_size, pos, 0);
	if (i == UINT64_MAX || i == c->psb)
		return;
	lo = c->sync;
	hi = c->nsync;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		struct htr_sync_info s = sync_point(c, mid);

		if (s.offset == i) {
			c->sync = mid;
			c->psb = i;
			c->realign = 1;
			c->realign_id = s.id;
			return;
		}
		if (s.offset < i)
			lo = mid + 1;
		else
			hi = mid;
	}
}

/* Whether the build saw tracing stop right before instruction @id. */
static int disabled_at(const struct htr_cursor *c, uint64_t id)
{
	struct htr_gap_info g;
	uint64_t lo = 0, hi = c->ngaps;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		g.size = sizeof(g);
		if (htr_gap_get(c->file, mid, &g, sizeof(g)) < 0)
			return 0;
		if (g.id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < c->ngaps; lo++) {
		g.size = sizeof(g);
		if (htr_gap_get(c->file, lo, &g, sizeof(g)) < 0 || g.id != id)
			return 0;
		if (g.kind == HTR_GAP_DISABLED)
			return 1;
	}
	return 0;
}

/* The next block with instructions into c->blk, as the build saw it.
 * Returns 0 or HTR_ERR_ITEROVER. */
static int next_block(struct htr_cursor *c)
{
	for (;;) {
		int st;

		if (!c->synced && resync(c) < 0)
			return HTR_ERR_ITEROVER;
		while (c->status >= 0 && (c->status & pts_event_pending)) {
			struct pt_event ev;

			c->status = pt_blk_event(c->dec, &ev, sizeof(ev));
			if (c->status >= 0 && ev.status_update)
				passed_psb(c);
			if (c->status >= 0 && (ev.type == ptev_enabled ||
					       ev.type == ptev_disabled ||
					       ev.type == ptev_async_disabled))
				c->off_seen = 1;
		}
		if (c->status < 0) {
			c->synced = 0;
			continue;
		}
		memset(&c->blk, 0, sizeof(c->blk));
		st = pt_blk_next(c->dec, &c->blk, sizeof(c->blk));
		c->status = st;
		/* As the build: with an error other than about decoding the
		 * next instruction, the last instruction's trace was missing
		 * and it does not count. */
		if (st < 0 && c->blk.ninsn && st != -pte_nomap &&
		    st != -pte_bad_insn)
			c->blk.ninsn--;
		if (st < 0 && !c->off_seen && disabled_at(c, c->id) &&
		    (st == -pte_nomap || st == -pte_bad_insn)) {
			/* Stopped in the code it followed past an SKL014
			 * exit (below): the disable is still waiting. */
			struct pt_event ev;
			int est = pt_blk_event(c->dec, &ev, sizeof(ev));

			if (est >= 0 && ev.type == ptev_disabled &&
			    ev.ip_suppressed) {
				c->status = est;
				c->off_seen = 1;
				continue;
			}
		}
		if (st < 0)
			c->synced = 0;
		if (!c->blk.ninsn)
			continue;
		if (c->realign) {
			c->realign = 0;
			c->id = c->realign_id;
		}
		/* The build saw tracing stop before this instruction and the
		 * decoder did not: it went on past a direct branch out of the
		 * filtered code whose disable has no IP (erratum SKL014:
		 * libipt's block decoder is given no filters, decode.c says
		 * why).  What it decodes until it reports the disable never
		 * ran traced. */
		if (!c->off_seen && disabled_at(c, c->id))
			continue;
		c->off_seen = 0;
		c->left = c->blk.ninsn;
		c->next_ip = c->blk.ip;
		return 0;
	}
}

static enum htr_insn_class cls_of(const ZydisDecodedInstruction *z)
{
	switch (z->meta.category) {
	case ZYDIS_CATEGORY_CALL: return HTR_INSN_CALL;
	case ZYDIS_CATEGORY_RET: return HTR_INSN_RET;
	case ZYDIS_CATEGORY_UNCOND_BR: return HTR_INSN_JUMP;
	case ZYDIS_CATEGORY_COND_BR: return HTR_INSN_COND;
	case ZYDIS_CATEGORY_SYSCALL:
	case ZYDIS_CATEGORY_INTERRUPT: return HTR_INSN_FAR_CALL;
	case ZYDIS_CATEGORY_SYSRET: return HTR_INSN_FAR_RET;
	default: return HTR_INSN_OTHER;
	}
}

/* The next instruction of the current block into @x (fills ip, raw, len,
 * mode, cls).  Blocks are not contiguous in memory: libipt leaves direct
 * jumps for its users to follow. */
static int split(struct htr_cursor *c, struct htr_insn *x)
{
	ZydisDecodedInstruction z;
	ZydisDecoderContext ctx;
	const ZydisDecoder *zd;
	uint8_t buf[15];
	int n;

	x->ip = c->next_ip;
	if (c->left == 1 && c->blk.truncated) {
		n = c->blk.size;
		memcpy(buf, c->blk.raw, (size_t) n);
	} else {
		n = pt_iscache_read(c->isc, buf, sizeof(buf), c->blk.isid,
				    x->ip);
	}
	switch (c->blk.mode) {
	case ptem_32bit: zd = &c->z32; x->mode = 32; break;
	case ptem_16bit: zd = &c->z16; x->mode = 16; break;
	default: zd = &c->z64; x->mode = 64; break;
	}
	if (n <= 0 || !ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(zd, &ctx,
			buf, (ZyanUSize) n, &z)))
		return htr_err__set(&c->err, HTR_ERR_DECODE, "instruction %llu "
				    "at %#llx: cannot read or decode it",
				    (unsigned long long) c->id,
				    (unsigned long long) x->ip);
	x->len = z.length;
	memcpy(x->raw, buf, z.length);
	x->cls = cls_of(&z);
	c->next_ip = x->ip + z.length;
	if (x->cls == HTR_INSN_JUMP && z.raw.imm[0].is_relative)
		c->next_ip += (uint64_t) z.raw.imm[0].value.s;
	c->left--;
	return 0;
}

int htr_cursor_seek(struct htr_cursor *c, uint64_t id)
{
	struct htr_insn x;
	uint64_t lo = 0, hi;
	int rc, runaway;

	if (!c || !c->dec)
		return HTR_ERR_INVALID;
	if (id >= c->ninsns)
		return htr_err__set(&c->err, HTR_ERR_RANGE, "instruction %llu "
				    "is past the end (%llu)",
				    (unsigned long long) id,
				    (unsigned long long) c->ninsns);
	/* The last sync point at or before @id. */
	hi = c->nsync;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (sync_point(c, mid).id <= id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return htr_err__set(&c->err, HTR_ERR_DECODE, "no sync point "
				    "before instruction %llu",
				    (unsigned long long) id);
	/* One PSB early, so the IDs are the build's once it passes the
	 * next (see passed_psb). */
	sync_at(c, lo >= 2 ? lo - 2 : 0);
	c->gap_next = 0;
	c->tsc_hint = HTR_TSC_HINT_INIT;
	while (c->id < id || !c->left) {
		if (c->left) {
			uint64_t to = runaway_before(c, c->id + c->left);

			if (to == c->id && to < id) {
				(void) gap_before(c, to, &runaway);
				c->left = 0;
				c->synced = 0;
				continue;
			}
			to = to < id ? to : id;
			/* Blocks wholly before it are skipped, not split. */
			if (c->id + c->left <= to) {
				c->id += c->left;
				c->left = 0;
				continue;
			}
			if (c->id == to)
				break;
			if ((rc = split(c, &x)) < 0)
				return rc;
			c->id++;
			continue;
		}
		if (next_block(c) < 0)
			return htr_err__set(&c->err, HTR_ERR_DECODE, "the trace "
					    "ends before instruction %llu",
					    (unsigned long long) id);
	}
	return 0;
}

int htr_cursor_next(struct htr_cursor *c, struct htr_insn *out, size_t size)
{
	struct htr_insn x;
	int rc, runaway;

	if (!c || !c->dec)
		return HTR_ERR_INVALID;
	if (c->id >= c->ninsns)
		return HTR_ERR_ITEROVER;
	memset(&x, 0, sizeof(x));
	if (!c->left && next_block(c) < 0)
		goto ended;
	x.gap = gap_before(c, c->id, &runaway);
	/* The build stopped a runaway decode here and went on at the next
	 * sync point: so does the cursor. */
	if (runaway) {
		c->left = 0;
		c->synced = 0;
		if (next_block(c) < 0)
			goto ended;
	}
	if ((rc = split(c, &x)) < 0)
		return rc;
	x.id = c->id++;
	x.has_tsc = htr_tsc_lookup(c->file, x.id, &c->tsc_hint, &x.tsc) == 0;
	return htr_abi__out(out, size, &x, sizeof(x),
			    HTR_ABI_SIZE0(struct htr_insn, gap));
ended:
	return htr_err__set(&c->err, HTR_ERR_DECODE, "the trace ends before "
			    "instruction %llu", (unsigned long long) c->id);
}

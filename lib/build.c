/* htr_builder: image + decoder + tree builder + writer (htr/build.h). */
#include "htr/build.h"

#include "abi.h"
#include "build_int.h"
#include "treebuild.h"
#include "decode.h"
#include "err.h"
#include "format.h"
#include "image.h"
#include "pdecode.h"
#include "ev.h"
#include "writer.h"

#include <fcntl.h>
#include <intel-pt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TRACE_PAGE 4096u

#define BUILD_OPTS_SIZE0 HTR_ABI_SIZE0(struct htr_build_opts, payload)
#define BUILD_STATS_SIZE0 HTR_ABI_SIZE0(struct htr_build_stats, timing_unusable)
#define THREAD_INFO_SIZE0 HTR_ABI_SIZE0(struct htr_thread_info, clock_ns)

void htr_build_opts_init_size(struct htr_build_opts *opts, size_t size)
{
	htr_abi__init(opts, size);
}

static bool filters_valid(const struct htr_build_opts *o)
{
	unsigned i;

	if (o->nfilters > HTR_ADDR_FILTERS_MAX)
		return false;
	for (i = 0; i < o->nfilters; i++)
		if (o->filters[i].start >= o->filters[i].end ||
		    (o->filters[i].kind != HTR_FILTER_TRACE &&
		     o->filters[i].kind != HTR_FILTER_STOP))
			return false;
	return true;
}

int htr_builder_alloc(struct htr_builder **out,
		      const struct htr_build_opts *opts)
{
	struct htr_build_opts o;
	struct htr_builder *b;
	int rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	if (htr_abi__in(&o, sizeof(o), opts, htr_abi__size_of(opts),
			BUILD_OPTS_SIZE0) < 0 ||
	    o.decoder < HTR_DECODER_DEFAULT || o.decoder > HTR_DECODER_WALK ||
	    !filters_valid(&o))
		return HTR_ERR_INVALID;
	b = calloc(1, sizeof(*b));
	if (!b)
		return HTR_ERR_NOMEM;
	b->opts = o;
	rc = htr_image__alloc(&b->img);
	if (rc < 0) {
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

void htr_builder_free(struct htr_builder *b)
{
	if (!b)
		return;
	htr_image__free(b->img);
	free(b);
}

const char *htr_builder_last_error(const struct htr_builder *b)
{
	return b ? b->err.msg : "";
}

int htr_builder_add_elf(struct htr_builder *b, const char *spec)
{
	if (!b || !spec)
		return HTR_ERR_INVALID;
	htr_err__clear(&b->err);
	return htr_image__add_elf_spec(b->img, spec, &b->err);
}

int htr_builder_add_raw(struct htr_builder *b, const char *spec)
{
	if (!b || !spec)
		return HTR_ERR_INVALID;
	htr_err__clear(&b->err);
	return htr_image__add_raw_spec(b->img, spec, &b->err);
}

int htr_builder_add_elf_at(struct htr_builder *b, const char *path,
			   const uint64_t *base)
{
	if (!b || !path)
		return HTR_ERR_INVALID;
	htr_err__clear(&b->err);
	return htr_image__add_elf(b->img, path, base != NULL,
				  base ? *base : 0, &b->err);
}

int htr_builder_set_thread(struct htr_builder *b,
			   const struct htr_thread_info *info)
{
	struct htr_thread_info ti;
	struct htr_disk_thread *t;

	if (!b || !info || htr_abi__in(&ti, sizeof(ti), info, info->size,
				       THREAD_INFO_SIZE0) < 0 ||
	    ti.flags & ~(HTR_THREAD_NS | HTR_THREAD_WALL) || ti.time_shift > 63)
		return HTR_ERR_INVALID;
	t = &b->thread;
	memset(t, 0, sizeof(*t));
	t->pid = ti.pid;
	t->tid = ti.tid;
	t->flags = ti.flags;
	t->time_shift = ti.time_shift;
	t->time_mult = ti.time_mult;
	t->time_zero = ti.time_zero;
	t->wall_ns = ti.wall_ns;
	t->clock_ns = ti.clock_ns;
	memcpy(t->comm, ti.comm, sizeof(t->comm) - 1);
	b->have_thread = true;
	return 0;
}

int htr_builder_add_bytes(struct htr_builder *b, const void *data,
			  size_t size, uint64_t vaddr, const char *name)
{
	if (!b || !data || !size)
		return HTR_ERR_INVALID;
	htr_err__clear(&b->err);
	return htr_image__add_bytes(b->img, data, size, vaddr, name, &b->err);
}

/* ------------------------------------------------------------------ */
/* decoder(s) -> tree builder */

struct glue {
	struct htr_builder *b;
	struct htr_build_out *o;
	int apply_rc;           /* the tree builder's or writer's error */
	const uint8_t *trace;
	uint64_t trace_size;
	uint64_t released;      /* trace bytes given back to the kernel */
	bool mapped;            /* the trace is our mapping, not the
				 * caller's buffer (never madvise that) */
	int stop;               /* the progress callback's non-zero value */
	struct hasher *hash;    /* a small trace's: see spare() */
};

/* The trace is mapped; pages the decoder has passed would stay resident
 * and make memory grow with the trace.  Give back all but a margin behind
 * the decoder (it never reads far backwards). */
#define TRACE_MARGIN (4u << 20)

static void release_trace(struct glue *g, uint64_t offset)
{
	uint64_t upto;

	if (!g->mapped || offset <= TRACE_MARGIN)
		return;
	upto = (offset - TRACE_MARGIN) & ~(uint64_t) (TRACE_PAGE - 1);
	if (upto <= g->released + TRACE_MARGIN)
		return;
	madvise((void *) (g->trace + g->released), upto - g->released,
		MADV_DONTNEED);
	g->released = upto;
}

/* Whether the first MiB of the trace has MTC or CYC packets that the
 * timing options leave the decoder unable to use (it then keeps only the
 * TSC of each PSB+, and most blocks look equally long).  It scans only
 * when some packet could be unusable, and stops at the first one that is. */
static int timing_unusable(const struct htr_build_opts *o, const uint8_t *data,
			   uint64_t size)
{
	bool mtc_ok = o->cpuid_0x15_eax && o->cpuid_0x15_ebx && o->mtc_freq;
	bool cyc_ok = o->nom_freq != 0;
	struct pt_packet_decoder *d;
	struct pt_packet pkt;
	struct pt_config c;
	int n = 0, bad = 0;

	if (mtc_ok && cyc_ok)
		return 0;
	pt_config_init(&c);
	c.begin = (uint8_t *) (uintptr_t) data;
	c.end = c.begin + (size < (1u << 20) ? size : (1u << 20));
	d = pt_pkt_alloc_decoder(&c);
	if (!d)
		return 0;
	if (pt_pkt_sync_forward(d) >= 0)
		while (!bad && n++ < 100000 &&
		       pt_pkt_next(d, &pkt, sizeof(pkt)) >= 0)
			bad = (pkt.type == ppt_mtc && !mtc_ok) ||
			      (pkt.type == ppt_cyc && !cyc_ok);
	pt_pkt_free_decoder(d);
	return bad;
}

/* The trace's hash, taken on a thread of its own while a large trace
 * decodes (taken after it, with the trace faulted in again, it made a
 * one-thread build of 10^8 instructions ~6 % slower), in chunks, each
 * given back once hashed (the decoder faults in again what it still
 * needs).  A small trace's is taken by a decoding helper with no chunk
 * left (htr_pdecode__run's spare work) or, without one, at the end.
 * The timing check comes first (after the commit it cost a two-thread
 * build 1 % of its time). */
struct hasher {
	const uint8_t *data;
	uint64_t size, hash;
	const struct htr_build_opts *opts;
	int timing_unusable;      /* first, while the pages are there */
	bool mapped, started;
	bool done;                /* hash and timing_unusable are set */
	atomic_bool stop;
	pthread_t thread;
};

static void *hasher_main(void *arg)
{
	struct hasher *t = arg;
	uint64_t h = HTR_HASH_SEED, off;

	t->timing_unusable = timing_unusable(t->opts, t->data, t->size);
	for (off = 0; off < t->size && !atomic_load(&t->stop);
	     off += TRACE_MARGIN) {
		uint64_t n = t->size - off < TRACE_MARGIN ? t->size - off
							  : TRACE_MARGIN;

		h = htr_hash__bytes(h, t->data + off, n);
		/* A small trace's pages are still in use, by decoders
		 * of the last chunks (spare work): they go at munmap. */
		if (t->mapped && t->size > TRACE_MARGIN)
			madvise((void *) (t->data + off),
				n & ~(uint64_t) (TRACE_PAGE - 1),
				MADV_DONTNEED);
	}
	t->hash = h;
	t->done = !atomic_load(&t->stop);
	return NULL;
}

static void hasher_start(struct hasher *t, const struct htr_build_opts *opts,
			 const uint8_t *data, uint64_t size, bool mapped)
{
	memset(t, 0, sizeof(*t));
	t->opts = opts;
	t->data = data;
	t->size = size;
	t->mapped = mapped;
	atomic_init(&t->stop, false);
	t->started = size > TRACE_MARGIN &&
		     htr_pdecode__spawn(&t->thread, hasher_main, t, 1) == 0;
}

/* The hash, or (@cancel) none: the thread stops early. */
static uint64_t hasher_finish(struct hasher *t, bool cancel)
{
	if (cancel)
		atomic_store(&t->stop, true);
	if (t->started)
		pthread_join(t->thread, NULL);
	else if (!cancel && !t->done)
		hasher_main(t);
	t->started = false;
	return t->hash;
}

static int on_progress(void *ctx, uint64_t offset)
{
	struct glue *g = ctx;
	struct htr_build_progress p;

	release_trace(g, offset);
	if (!g->b->opts.progress)
		return 0;
	p.offset = offset;
	p.trace_size = g->trace_size;
	p.insns = htr_tb__insns(g->o->tb);
	p.blocks = htr_writer__nblocks(g->o->w);
	g->stop = g->b->opts.progress(&p, g->b->opts.payload);
	/* The decoder only knows "stop"; the value is mapped at the end. */
	return g->stop ? HTR_ERR_CANCELED : 0;
}

/* A decoding helper with nothing left to decode: a small trace's hash,
 * which would take the end of the build on one core. */
static void spare(void *ctx)
{
	struct glue *g = ctx;

	if (!g->hash->started && !g->hash->done)
		(void) hasher_main(g->hash);
}

/* The decoders' events, in trace order, on this thread. */
static int apply(void *ctx, const struct htr_ev *ev, size_t n)
{
	struct glue *g = ctx;

	return g->apply_rc = htr_ev__apply_n(g->o->tb, ev, n);
}

/* One thread: the decoder's callbacks straight into the tree builder (as
 * events, they cost a tenth of the build on call-dense code). */
static int direct_run(void *ctx, uint64_t ip, uint32_t ninsn,
		      enum htr_icls cls, uint64_t ret_ip, int timed,
		      uint64_t tsc)
{
	struct glue *g = ctx;
	int rc = htr_tb__run(g->o->tb, ip, ninsn, cls, ret_ip);

	return g->apply_rc = rc || !timed ? rc : htr_tb__time(g->o->tb, tsc);
}

static int direct_resume(void *ctx, uint64_t ip)
{
	struct glue *g = ctx;

	return g->apply_rc = htr_tb__resume(g->o->tb, ip);
}

static int direct_gap(void *ctx, const struct htr_decode_gap *gap)
{
	struct glue *g = ctx;

	return g->apply_rc = htr_tb__gap(g->o->tb, gap);
}

static int direct_time(void *ctx, uint64_t tsc)
{
	struct glue *g = ctx;

	return g->apply_rc = htr_tb__time(g->o->tb, tsc);
}

static int direct_sync(void *ctx, uint64_t offset)
{
	struct glue *g = ctx;

	return g->apply_rc = htr_tb__sync(g->o->tb, offset);
}

static int func_extent(void *ctx, uint64_t addr, uint64_t *entry,
		       uint64_t *func)
{
	uint64_t start, end;

	return htr_image__func_extent(ctx, addr, &start, &end, func, entry);
}

static int map_trace(struct htr_builder *b, const char *path,
		     const uint8_t **data, uint64_t *size)
{
	struct stat st;
	void *p;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return htr_err__sys(&b->err, "%s", path);
	if (fstat(fd, &st) < 0) {
		close(fd);
		return htr_err__sys(&b->err, "%s", path);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return htr_err__set(&b->err, HTR_ERR_IO,
				    "%s: not a regular file", path);
	}
	if (st.st_size == 0) {
		close(fd);
		return htr_err__set(&b->err, HTR_ERR_DECODE,
				    "%s: empty trace", path);
	}
	p = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return htr_err__sys(&b->err, "%s: mmap", path);
	*data = p;
	*size = (uint64_t) st.st_size;
	return 0;
}

static int run(struct htr_builder *b, const uint8_t *data, uint64_t tsize,
	       bool mapped, const char *trace, const char *out,
	       struct htr_build_stats *stats, size_t size);

int htr_builder_run(struct htr_builder *b, const char *trace,
		    const char *out, struct htr_build_stats *stats,
		    size_t size)
{
	const uint8_t *data = NULL;
	uint64_t tsize = 0;
	int rc;

	if (!b || !trace || !out)
		return HTR_ERR_INVALID;
	if (stats && size < BUILD_STATS_SIZE0)
		return HTR_ERR_INVALID;
	htr_err__clear(&b->err);
	if (!htr_image__count(b->img))
		return htr_err__set(&b->err, HTR_ERR_INVALID,
				    "no image: give at least one ELF or raw file");
	rc = map_trace(b, trace, &data, &tsize);
	if (rc < 0)
		return rc;
	rc = run(b, data, tsize, true, trace, out, stats, size);
	munmap((void *) data, tsize);
	return rc;
}

int htr_builder_run_buffer(struct htr_builder *b, const void *trace,
			   size_t trace_size, const char *out,
			   struct htr_build_stats *stats, size_t size)
{
	if (!b || !trace || !out)
		return HTR_ERR_INVALID;
	if (stats && size < BUILD_STATS_SIZE0)
		return HTR_ERR_INVALID;
	htr_err__clear(&b->err);
	if (!htr_image__count(b->img))
		return htr_err__set(&b->err, HTR_ERR_INVALID,
				    "no image: give at least one ELF or raw file");
	if (!trace_size)
		return htr_err__set(&b->err, HTR_ERR_DECODE, "(memory): empty "
				    "trace");
	return run(b, trace, trace_size, false, "(memory)", out, stats, size);
}

int htr_build__out_open(struct htr_builder *b, const char *out,
			struct htr_build_out *o)
{
	unsigned wflags = 0;
	size_t i;
	int rc;

	memset(o, 0, sizeof(*o));
	o->path = out;
	if (b->opts.no_fsync)
		wflags |= HTR_WRITER_NO_FSYNC;
	if (b->opts.no_sweep)
		wflags |= HTR_WRITER_NO_SWEEP;
	rc = htr_writer__open_flags(&o->w, out, wflags, &b->err);
	if (rc < 0)
		return rc;
	htr_writer__threads(o->w, b->opts.threads);
	for (i = 0; i < htr_image__count(b->img); i++) {
		const struct htr_image_piece *p = htr_image__piece(b->img, i);

		rc = htr_writer__image(o->w, p->kind, p->vaddr, p->offset,
				       p->size, p->path);
		if (rc < 0)
			return htr_build__out_fail(b, o, rc);
	}
	if (b->have_thread && (rc = htr_writer__thread(o->w, &b->thread)) < 0)
		return htr_build__out_fail(b, o, rc);
	rc = htr_tb__alloc(&o->tb, o->w);
	if (rc < 0)
		return htr_err__set(&b->err, rc, "out of memory");
	htr_tb__set_extents(o->tb, func_extent, b->img);
	return 0;
}

int htr_build__out_fail(struct htr_builder *b, struct htr_build_out *o,
			int rc)
{
	/* The writer and the tree builder report their failures through the
	 * writer's error state. */
	if (o->w && htr_writer__err(o->w)->msg[0])
		b->err = *htr_writer__err(o->w);
	else
		htr_err__set(&b->err, rc, "%s: %s", o->path, htr_errstr(rc));
	return rc;
}

/* A tree of nothing from @trace, every instruction a decode error (@errors
 * of them, @first the first): the image is not the traced code (another
 * program, or the right one at other addresses).  A file would hide
 * that; the caller's file of that name, if any, stays as it was.
 * Returns HTR_ERR_DECODE. */
static int nothing_decoded(struct htr_builder *b, const char *trace,
			   uint64_t errors, const struct htr_decode_gap *first)
{
	struct htr_gap_info g;

	memset(&g, 0, sizeof(g));
	g.size = sizeof(g);
	g.kind = HTR_GAP_ERROR;
	g.offset = first ? first->offset : 0;
	g.code = first ? first->code : 0;
	return htr_err__set(&b->err, HTR_ERR_DECODE, "%s: nothing decoded: 0 "
			    "instructions, %" PRIu64 " decode error%s, the "
			    "first at trace offset 0x%" PRIx64 ": %s; is the "
			    "image the traced code at its load address?",
			    trace, errors, errors == 1 ? "" : "s", g.offset,
			    htr_gap_reason(&g));
}

int htr_build__out_commit(struct htr_builder *b, struct htr_build_out *o,
			  const char *trace, uint64_t trace_size,
			  uint64_t trace_hash, struct htr_build_stats *s)
{
	uint64_t errors, runaways;
	struct htr_writer_meta meta;
	const struct htr_decode_gap *first;
	struct pt_version v;
	struct timespec t0, t1;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = htr_tb__finish(o->tb);

	if (rc < 0)
		return htr_build__out_fail(b, o, rc);
	memset(&meta, 0, sizeof(meta));
	meta.ninsns = htr_tb__insns(o->tb);
	errors = htr_tb__errors(o->tb, &runaways, &first);
	if (trace && !meta.ninsns && errors)
		return nothing_decoded(b, trace, errors, first);
	meta.trace_size = trace_size;
	meta.trace_hash = trace_hash;
	v = pt_library_version();
	meta.libipt_version[0] = v.major;
	meta.libipt_version[1] = v.minor;
	meta.libipt_version[2] = v.patch;
	meta.libipt_version[3] = v.build;
	rc = htr_writer__commit(o->w, &meta);
	if (rc < 0)
		return htr_build__out_fail(b, o, rc);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	memset(s, 0, sizeof(*s));
	s->commit_ns = (uint64_t) (t1.tv_sec - t0.tv_sec) * 1000000000u +
		       (uint64_t) t1.tv_nsec - (uint64_t) t0.tv_nsec;
	s->size = sizeof(*s);
	s->insns = meta.ninsns;
	s->blocks = htr_writer__nblocks(o->w);
	s->gaps = htr_tb__gaps(o->tb);
	s->funcs = htr_tb__funcs(o->tb);
	s->trace_size = trace_size;
	s->max_depth = htr_writer__max_depth(o->w);
	s->folded = htr_tb__folded(o->tb);
	s->threads = 1;
	s->decoder = HTR_DECODER_BLOCK;
	s->errors = errors;
	s->runaways = runaways;
	if (first) {
		s->first_error_offset = first->offset;
		s->first_error_code = first->code;
	}
	return 0;
}

void htr_build__out_free(struct htr_build_out *o)
{
	htr_tb__free(o->tb);
	htr_writer__free(o->w);
	o->tb = NULL;
	o->w = NULL;
}

void htr_build__decode_cfg(const struct htr_builder *b,
			   struct htr_decode_cfg *cfg, const uint8_t *data,
			   uint64_t size)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->trace = data;
	cfg->size = size;
	cfg->cpu_family = b->opts.cpu_family;
	cfg->cpu_model = b->opts.cpu_model;
	cfg->cpu_stepping = b->opts.cpu_stepping;
	cfg->cpuid_0x15_eax = b->opts.cpuid_0x15_eax;
	cfg->cpuid_0x15_ebx = b->opts.cpuid_0x15_ebx;
	cfg->mtc_freq = b->opts.mtc_freq;
	cfg->nom_freq = b->opts.nom_freq;
	cfg->filters = b->opts.filters;
	cfg->nfilters = b->opts.nfilters;
	cfg->walk = b->opts.decoder != HTR_DECODER_BLOCK;
}

/* Decode on @threads threads into @o.  Returns the decoder's value; the
 * tree builder's in *@prc. */
static int decode(struct glue *g, const struct htr_decode_cfg *cfg,
		  unsigned threads, int *prc)
{
	struct htr_decode_sink sink;
	int rc;

	if (threads >= 2) {
		rc = htr_pdecode__run(cfg, g->b->img, threads,
				      g->b->opts.chunk_size, apply, on_progress,
				      spare, g, &g->b->err);
	} else {
		memset(&sink, 0, sizeof(sink));
		sink.ctx = g;
		sink.run = direct_run;
		sink.resume = direct_resume;
		sink.gap = direct_gap;
		sink.time = direct_time;
		sink.sync = direct_sync;
		sink.progress = on_progress;
		rc = htr_decode__run(cfg, g->b->img, &sink, &g->b->err);
	}
	*prc = g->apply_rc;
	return rc;
}

static int run(struct htr_builder *b, const uint8_t *data, uint64_t tsize,
	       bool mapped, const char *trace, const char *out,
	       struct htr_build_stats *stats, size_t size)
{
	struct htr_decode_cfg cfg;
	struct htr_build_stats s;
	struct htr_build_out o;
	struct hasher hash;
	struct glue g;
	unsigned threads;
	int rc, prc;

	hasher_start(&hash, &b->opts, data, tsize, mapped);
	memset(&g, 0, sizeof(g));
	g.b = b;
	g.mapped = mapped;
	g.trace = data;
	g.trace_size = tsize;
	g.hash = &hash;
	rc = htr_build__out_open(b, out, &o);
	if (rc < 0)
		goto out;
	htr_build__decode_cfg(b, &cfg, data, tsize);
	g.o = &o;
	threads = b->opts.threads > 1 ? b->opts.threads : 1;
	for (;;) {
		rc = decode(&g, &cfg, threads, &prc);
		if (prc || (rc != HTR_PDECODE_DIVERGED &&
			    rc != HTR_DECODE_GAVE_UP))
			break;
		/* The walk met what it does not follow, or decode errors
		 * made the chunks disagree: start over with the block
		 * decoder or on one thread, into a new temporary. */
		if (rc == HTR_DECODE_GAVE_UP)
			cfg.walk = 0;
		else
			threads = 1;
		g.apply_rc = 0;
		g.released = 0;
		htr_build__out_free(&o);
		htr_err__clear(&b->err);
		if ((rc = htr_build__out_open(b, out, &o)) < 0)
			goto out;
	}
	if (prc < 0) {
		/* The builder failed first; decoding stopped because of it. */
		rc = htr_build__out_fail(b, &o, prc);
		goto out;
	}
	if (rc == HTR_ERR_CANCELED && g.stop < 0) {
		rc = htr_err__callback(g.stop);
		htr_err__set(&b->err, rc, "%s: canceled by the progress "
			     "callback (%d)", trace, g.stop);
	} else if (rc == HTR_ERR_CANCELED) {
		htr_err__set(&b->err, rc, "%s: canceled", trace);
	}
	if (rc < 0)
		goto out;
	rc = htr_build__out_commit(b, &o, trace, tsize,
				   hasher_finish(&hash, false), &s);
	if (rc == 0 && stats) {
		s.timing_unusable = hash.timing_unusable;
		s.threads = threads;
		s.decoder = cfg.walk ? HTR_DECODER_WALK : HTR_DECODER_BLOCK;
		htr_abi__out(stats, size, &s, sizeof(s), BUILD_STATS_SIZE0);
	}
out:
	(void) hasher_finish(&hash, true);
	htr_build__out_free(&o);
	return rc;
}

/* htr_builder: image + decoder + tree builder + writer (htr/build.h). */
#include "htr/build.h"

#include "builder.h"
#include "decode.h"
#include "err.h"
#include "format.h"
#include "image.h"
#include "writer.h"

#include <fcntl.h>
#include <intel-pt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct htr_builder {
	struct htr_build_opts opts;
	struct htr_image *img;
	struct htr_err err;
};

void htr_build_opts_init(struct htr_build_opts *opts)
{
	if (!opts)
		return;
	memset(opts, 0, sizeof(*opts));
	opts->size = sizeof(*opts);
}

int htr_builder_alloc(struct htr_builder **out,
		      const struct htr_build_opts *opts)
{
	struct htr_builder *b;
	int rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	if (opts && opts->size < offsetof(struct htr_build_opts, progress))
		return HTR_ERR_INVALID;
	b = calloc(1, sizeof(*b));
	if (!b)
		return HTR_ERR_NOMEM;
	htr_build_opts_init(&b->opts);
	if (opts) {
		/* Read only what the caller's version of the struct has. */
		size_t n = opts->size < sizeof(b->opts) ? opts->size
							 : sizeof(b->opts);

		memcpy(&b->opts, opts, n);
		b->opts.size = sizeof(b->opts);
	}
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

/* ------------------------------------------------------------------ */
/* decoder -> tree builder */

struct glue {
	struct htr_builder *b;
	struct htr_tb *tb;
	struct htr_writer *w;
	uint64_t trace_size;
};

static int on_run(void *ctx, uint64_t ip, uint32_t ninsn, enum htr_icls cls,
		  uint64_t ret_ip)
{
	struct glue *g = ctx;

	return htr_tb__run(g->tb, ip, ninsn, cls, ret_ip);
}

static int on_resume(void *ctx, uint64_t ip)
{
	return htr_tb__resume(((struct glue *) ctx)->tb, ip);
}

static int on_gap(void *ctx, int kind, uint64_t offset, int code)
{
	return htr_tb__gap(((struct glue *) ctx)->tb, kind, offset, code);
}

static int on_time(void *ctx, uint64_t tsc)
{
	return htr_tb__time(((struct glue *) ctx)->tb, tsc);
}

static int on_sync(void *ctx, uint64_t offset)
{
	return htr_tb__sync(((struct glue *) ctx)->tb, offset);
}

static int on_progress(void *ctx, uint64_t offset)
{
	struct glue *g = ctx;
	struct htr_build_progress p;

	if (!g->b->opts.progress)
		return 0;
	p.offset = offset;
	p.trace_size = g->trace_size;
	p.insns = htr_tb__insns(g->tb);
	p.blocks = htr_writer__nblocks(g->w);
	if (g->b->opts.progress(&p, g->b->opts.payload))
		return HTR_ERR_CANCELED;
	return 0;
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

int htr_builder_run(struct htr_builder *b, const char *trace,
		    const char *out, struct htr_build_stats *stats,
		    size_t size)
{
	struct htr_decode_cfg cfg;
	struct htr_decode_sink sink;
	struct htr_writer_meta meta;
	struct pt_version v;
	struct glue g;
	const uint8_t *data = NULL;
	uint64_t tsize = 0;
	size_t i;
	int rc;

	if (!b || !trace || !out)
		return HTR_ERR_INVALID;
	if (stats && size < offsetof(struct htr_build_stats, max_depth))
		return HTR_ERR_INVALID;
	htr_err__clear(&b->err);
	if (!htr_image__count(b->img))
		return htr_err__set(&b->err, HTR_ERR_INVALID,
				    "no image: give at least one ELF or raw file");
	rc = map_trace(b, trace, &data, &tsize);
	if (rc < 0)
		return rc;

	memset(&g, 0, sizeof(g));
	g.b = b;
	g.trace_size = tsize;
	rc = htr_writer__open(&g.w, out, &b->err);
	if (rc < 0)
		goto out;
	for (i = 0; i < htr_image__count(b->img); i++) {
		const struct htr_image_piece *p = htr_image__piece(b->img, i);

		rc = htr_writer__image(g.w, p->kind, p->vaddr, p->offset,
				       p->size, p->path);
		if (rc < 0)
			goto werr;
	}
	rc = htr_tb__alloc(&g.tb, g.w);
	if (rc < 0) {
		htr_err__set(&b->err, rc, "out of memory");
		goto out;
	}

	memset(&cfg, 0, sizeof(cfg));
	cfg.trace = data;
	cfg.size = tsize;
	cfg.cpu_family = b->opts.cpu_family;
	cfg.cpu_model = b->opts.cpu_model;
	cfg.cpu_stepping = b->opts.cpu_stepping;
	cfg.cpuid_0x15_eax = b->opts.cpuid_0x15_eax;
	cfg.cpuid_0x15_ebx = b->opts.cpuid_0x15_ebx;
	cfg.mtc_freq = b->opts.mtc_freq;
	cfg.nom_freq = b->opts.nom_freq;
	memset(&sink, 0, sizeof(sink));
	sink.ctx = &g;
	sink.run = on_run;
	sink.resume = on_resume;
	sink.gap = on_gap;
	sink.time = on_time;
	sink.sync = on_sync;
	sink.progress = on_progress;
	rc = htr_decode__run(&cfg, b->img, &sink, &b->err);
	if (rc == HTR_ERR_CANCELED)
		htr_err__set(&b->err, rc, "%s: canceled", trace);
	if (rc < 0)
		goto out;
	rc = htr_tb__finish(g.tb);
	if (rc < 0)
		goto werr;

	memset(&meta, 0, sizeof(meta));
	meta.ninsns = htr_tb__insns(g.tb);
	meta.trace_size = tsize;
	meta.trace_hash = htr_hash__bytes(HTR_HASH_SEED, data, tsize);
	v = pt_library_version();
	meta.libipt_version[0] = v.major;
	meta.libipt_version[1] = v.minor;
	meta.libipt_version[2] = v.patch;
	meta.libipt_version[3] = v.build;
	rc = htr_writer__commit(g.w, &meta);
	if (rc < 0)
		goto werr;
	if (stats) {
		struct htr_build_stats s;

		memset(&s, 0, sizeof(s));
		s.size = size;
		s.insns = meta.ninsns;
		s.blocks = htr_writer__nblocks(g.w);
		s.gaps = htr_tb__gaps(g.tb);
		s.funcs = htr_tb__funcs(g.tb);
		s.trace_size = tsize;
		s.max_depth = htr_writer__max_depth(g.w);
		memcpy(stats, &s, size < sizeof(s) ? size : sizeof(s));
	}
	goto out;
werr:
	/* The writer and the builder report their failures through the
	 * writer's error state. */
	if (htr_writer__err(g.w)->msg[0])
		b->err = *htr_writer__err(g.w);
	else
		htr_err__set(&b->err, rc, "%s: %s", out, htr_errstr(rc));
out:
	htr_tb__free(g.tb);
	htr_writer__free(g.w);
	munmap((void *) data, tsize);
	return rc;
}

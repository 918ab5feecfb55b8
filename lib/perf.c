/*
 * Building from a perf.data (htr/perf.h): the image of each thread from
 * the recorded mappings, the options from the recording's parameters,
 * one builder run per thread (per-thread buffers) or one CPU-wide build
 * per process (per-CPU buffers, lib/cpuwide.h), the output names, and
 * the warnings a tool prints.  On top of the perf.data reader
 * (lib/perfdata.h) and the public builder API.
 */
#include "htr/perf.h"
#include "htr/build.h"
#include "htr/tree.h"

#include "abi.h"
#include "cpuwide.h"
#include "err.h"
#include "perfdata.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define INFO_SIZE0 HTR_ABI_SIZE0(struct htr_perf_info, name)
#define THREAD_SIZE0 HTR_ABI_SIZE0(struct htr_perf_thread_info, aux_lost)
#define OPTS_SIZE0 HTR_ABI_SIZE0(struct htr_perf_build_opts, payload)
#define BOPTS_SIZE0 HTR_ABI_SIZE0(struct htr_build_opts, payload)

struct htr_perf {
	struct htr_err err;
	struct htr_perfdata *pd;   /* NULL: failed open */
	char *name;                /* the file read (DIR/data) */
	char *stem;                /* default output stem */
	char *kcore;               /* a --kcore directory's own, or NULL */
};

/* ------------------------------------------------------------------ */
/* What a file is. */

static char *path_cat(const char *a, const char *b)
{
	char *p = malloc(strlen(a) + strlen(b) + 1);

	if (p)
		sprintf(p, "%s%s", a, b);
	return p;
}

/* Whether @path starts with perf.data's magic. */
static int is_perfdata(const char *path)
{
	char magic[8];
	FILE *f = fopen(path, "rb");
	int r = 0;

	if (f) {
		r = fread(magic, 1, sizeof(magic), f) == sizeof(magic) &&
		    !memcmp(magic, "PERFILE2", 8);
		fclose(f);
	}
	return r;
}

/* Whether @path is a directory perf record --kcore wrote (DIR/data). */
static int is_perfdir(const char *path)
{
	struct stat sb;
	char *data;
	int r;

	if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return 0;
	data = path_cat(path, "/data");
	r = data && is_perfdata(data);
	free(data);
	return r;
}

/* Whether @n bytes at @p hold @pat (memmem, which C11 lacks). */
static int has_psb(const uint8_t *p, size_t n, const uint8_t *pat,
		   size_t len)
{
	const uint8_t *q = p, *end = p + n;

	while ((size_t) (end - q) >= len &&
	       (q = memchr(q, pat[0], (size_t) (end - q) - len + 1))) {
		if (!memcmp(q, pat, len))
			return 1;
		q++;
	}
	return 0;
}

int htr_perf_probe(const char *path, int empty_ok, char *why, size_t size)
{
	static const uint8_t psb[16] = {
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
	};
	static const char hint[] = "record one with 'htr record' or perf";
	char name[512], dummy[1];
	struct stat sb;
	const uint8_t *p;
	size_t n, i;
	int fd, text = 1, r = HTR_ERR_FORMAT;

	if (!why || !size) {
		why = dummy;
		size = sizeof(dummy);
	}
	why[0] = '\0';
	if (!path) {
		snprintf(why, size, "no file named");
		return HTR_ERR_IO;
	}
	if (is_perfdir(path) || is_perfdata(path))
		return 1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		snprintf(why, size, "%s: %s",
			 htr_err__escape(name, sizeof(name), path),
			 strerror(e));
		return HTR_ERR_IO;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
	    (!sb.st_size && empty_ok)) {
		close(fd);
		return 0;
	}
	htr_err__escape(name, sizeof(name), path);
	n = (size_t) sb.st_size;
	if (!n) {
		close(fd);
		snprintf(why, size, "%s: empty file: no trace or perf.data in "
			 "it", name);
		return HTR_ERR_FORMAT;
	}
	p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return 0;
	for (i = 0; i < n && i < 4096; i++)
		if (p[i] < 0x20 && p[i] != '\n' && p[i] != '\t' &&
		    p[i] != '\r' && p[i] != '\f')
			text = 0;
	if (n < 8 && !memcmp(p, "PERFILE2", n))
		snprintf(why, size, "%s: a perf.data cut short (%zu bytes, "
			 "less than its magic)", name, n);
	else if (has_psb(p, n, psb, sizeof(psb)))
		r = 0;
	else if (n >= 4 && !memcmp(p, "\x7f" "ELF", 4))
		snprintf(why, size, "%s: an ELF file, not a trace: give it "
			 "with --elf, and the trace or perf.data as TRACE",
			 name);
	else if (n >= 8 && !memcmp(p, "HTRTREE", 8))
		snprintf(why, size, "%s: an htr file, built already: 'htr "
			 "info %s' reads it", name, name);
	else if (text)
		snprintf(why, size, "%s: not an Intel PT trace or perf.data "
			 "(a text file); %s", name, hint);
	else
		snprintf(why, size, "%s: not an Intel PT trace or perf.data "
			 "(no PSB packet in its %zu bytes); %s", name, n,
			 hint);
	munmap((void *) p, n);
	return r;
}

/* ------------------------------------------------------------------ */
/* Open, close, what is in it. */

/* The default stem of a build's files: @path without its extension
 * (perf.data: perf, so perf.TID.htr). */
static char *stem_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *dot = strrchr(path, '.');
	size_t stem = dot && (!slash || dot > slash + 1) ? (size_t) (dot - path)
							 : strlen(path);

	return strndup(path, stem);
}

int htr_perf_open(struct htr_perf **out, const char *path)
{
	struct htr_perf *pf;
	int rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = pf = calloc(1, sizeof(*pf));
	if (!pf)
		return HTR_ERR_NOMEM;
	if (!path)
		return htr_err__set(&pf->err, HTR_ERR_INVALID, "no file named");
	/* perf record --kcore writes a directory: DIR/data, DIR/kcore_dir;
	 * its outputs go next to the directory, as for a file. */
	if (is_perfdir(path)) {
		char *kc = path_cat(path, "/kcore_dir/kcore");

		pf->name = path_cat(path, "/data");
		if (kc && access(kc, R_OK) == 0)
			pf->kcore = strdup(path);
		free(kc);
	} else {
		pf->name = strdup(path);
	}
	pf->stem = stem_of(path);
	if (!pf->name || !pf->stem)
		return htr_err__set(&pf->err, HTR_ERR_NOMEM, "out of memory");
	rc = htr_perfdata__open(&pf->pd, pf->name, &pf->err);
	if (rc < 0)
		pf->pd = NULL;
	return rc < 0 ? rc : 0;
}

void htr_perf_close(struct htr_perf *pf)
{
	if (!pf)
		return;
	htr_perfdata__close(pf->pd);
	free(pf->name);
	free(pf->stem);
	free(pf->kcore);
	free(pf);
}

const char *htr_perf_last_error(const struct htr_perf *pf)
{
	return pf ? pf->err.msg : "out of memory";
}

/* Whether htr_perf_build() builds @t. */
static int traced(const struct htr_perfdata *pd,
		  const struct htr_perf_thread *t)
{
	return pd->ncpus ? t->tid != 0 : t->pt_bytes != 0;
}

int htr_perf_info(const struct htr_perf *pf, struct htr_perf_info *info,
		  size_t size)
{
	const struct htr_perfdata *pd;
	struct htr_perf_info x;

	if (!pf || !pf->pd || !info || size < INFO_SIZE0)
		return HTR_ERR_INVALID;
	pd = pf->pd;
	memset(&x, 0, sizeof(x));
	x.size = sizeof(x);
	x.flags = (pd->ncpus ? HTR_PERF_CPUWIDE : 0) |
		  (pd->pt.kernel ? HTR_PERF_KERNEL : 0) |
		  (pd->pt.snapshot_mode ? HTR_PERF_SNAPSHOT : 0) |
		  (pd->pipe ? HTR_PERF_PIPE : 0);
	x.nthreads = (uint32_t) pd->nthreads;
	x.ncpus = (uint32_t) pd->ncpus;
	x.switches = pd->nswitches;
	x.cpu_family = pd->cpu_family;
	x.cpu_model = pd->cpu_model;
	x.cpu_stepping = pd->cpu_stepping;
	x.name = pf->name;
	return htr_abi__out(info, size, &x, sizeof(x), INFO_SIZE0);
}

int htr_perf_thread(const struct htr_perf *pf, size_t index,
		    struct htr_perf_thread_info *info, size_t size)
{
	const struct htr_perf_thread *t;
	struct htr_perf_thread_info x;

	if (!pf || !pf->pd || !info || size < THREAD_SIZE0)
		return HTR_ERR_INVALID;
	if (index >= pf->pd->nthreads)
		return HTR_ERR_RANGE;
	t = &pf->pd->threads[index];
	memset(&x, 0, sizeof(x));
	x.size = sizeof(x);
	x.pid = t->pid;
	x.tid = t->tid;
	memcpy(x.comm, t->comm, sizeof(x.comm));
	x.comm[sizeof(x.comm) - 1] = '\0';
	x.flags = (traced(pf->pd, t) ? HTR_PERF_THREAD_TRACED : 0) |
		  (t->exited ? HTR_PERF_THREAD_EXITED : 0);
	x.pt_bytes = t->pt_bytes;
	x.aux_truncated = t->aux_truncated;
	x.aux_lost = t->aux_lost;
	return htr_abi__out(info, size, &x, sizeof(x), THREAD_SIZE0);
}

void htr_perf_build_opts_init_size(struct htr_perf_build_opts *opts,
				   size_t size)
{
	htr_abi__init(opts, size);
}

/* ------------------------------------------------------------------ */
/* One htr_perf_build(). */

struct pbuild {
	struct htr_perf *pf;
	const struct htr_perfdata *pd;
	const char *trace;                   /* pf->name */
	struct htr_perf_build_opts o;
	struct htr_build_opts user;          /* the caller's, or defaults */
	const char *buildid_dir, *kcore;
	char *home_debug;
	char *pattern;                       /* the output names */
	char **warned;                       /* module paths warned of */
	size_t nwarned;
	int filter_warned;
	/* What could not be decoded, for the one line at the end. */
	uint64_t kernel_stretches;           /* user+kernel, no kernel code */
	uint64_t error_gaps, threads_with_errors;
	char first_error[96];                /* libipt's reason */
	char first_missing[512];             /* the first module's warning */
	char error_out[256];                 /* a .htr with error gaps */
};

/* opts.warning's message of @kind, printf-style, escaped. */
static void say(struct pbuild *pb, int kind, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;
static void say(struct pbuild *pb, int kind, const char *fmt, ...)
{
	char raw[2048], text[2048];
	va_list ap;

	if (!pb->o.warning)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	pb->o.warning(kind, htr_err__escape(text, sizeof(text), raw),
		      pb->o.payload);
}

static int nomem(struct pbuild *pb)
{
	return htr_err__set(&pb->pf->err, HTR_ERR_NOMEM, "out of memory");
}

/* Append @s to @d with each % doubled (literal in a pattern). */
static char *pat_cat(char *d, const char *s, size_t n)
{
	for (; n && *s; s++, n--) {
		if (*s == '%')
			*d++ = '%';
		*d++ = *s;
	}
	*d = '\0';
	return d;
}

/* The names of the files, as a pattern (opts.output in htr/perf.h) of
 * @outarg for @nthreads threads, into *@out (malloc'd).  Returns 0 or an
 * error with the message on @err. */
static int out_pattern(const char *outarg, const char *stem,
		       size_t nthreads, char **out, struct htr_err *err)
{
	const char *base, *p;
	struct stat sb;
	size_t n;
	char *pat, *e;
	int st;

	*out = NULL;
	if (outarg && !*outarg)
		return htr_err__set(err, HTR_ERR_INVALID, "-o: an empty name");
	base = outarg ? outarg : stem;
	n = strlen(base);
	pat = malloc(2 * (n + strlen(stem)) + 16);
	if (!pat)
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	*out = pat;
	if (!outarg) {
		strcpy(pat_cat(pat, stem, SIZE_MAX), ".%t.htr");
		return 0;
	}
	if (strchr(outarg, '%')) {
		int has_t = 0;

		for (p = outarg; (p = strchr(p, '%')); p += 2) {
			if (p[1] != 't' && p[1] != 'p' && p[1] != '%')
				return htr_err__set(err, HTR_ERR_INVALID,
						    "-o %s: a %% not followed "
						    "by t (tid), p (pid) or %%",
						    outarg);
			has_t |= p[1] == 't';
		}
		if (nthreads > 1 && !has_t)
			return htr_err__set(err, HTR_ERR_INVALID, "-o %s: %zu "
					    "threads but no %%t (tid) in the "
					    "pattern", outarg, nthreads);
		strcpy(pat, outarg);
		return 0;
	}
	st = stat(outarg, &sb);
	if (outarg[n - 1] == '/' || (st == 0 && S_ISDIR(sb.st_mode))) {
		if (st != 0 || !S_ISDIR(sb.st_mode))
			return htr_err__set(err, HTR_ERR_IO, "-o %s: %s",
					    outarg, st != 0 ? strerror(errno) :
					    "not a directory");
		p = strrchr(stem, '/');
		e = pat_cat(pat, outarg, SIZE_MAX);
		if (outarg[n - 1] != '/')
			*e++ = '/';
		strcpy(pat_cat(e, p ? p + 1 : stem, SIZE_MAX), ".%t.htr");
		return 0;
	}
	p = strrchr(outarg, '/');
	p = p ? p + 1 : outarg;
	if (strlen(p) > 4 && !strcmp(outarg + n - 4, ".htr")) {
		if (nthreads > 1)
			strcpy(pat_cat(pat, outarg, n - 4), ".%t.htr");
		else
			pat_cat(pat, outarg, SIZE_MAX);
		return 0;
	}
	strcpy(pat_cat(pat, outarg, SIZE_MAX), ".%t.htr");
	return 0;
}

/* The file of thread @tid of process @pid under out_pattern()'s @pat
 * (malloc'd; NULL: out of memory). */
static char *out_name(const char *pat, uint32_t tid, uint32_t pid)
{
	char *out = malloc(strlen(pat) * 6 + 1), *o = out;
	const char *p;

	if (!out)
		return NULL;
	for (p = pat; *p; p++) {
		if (*p != '%') {
			*o++ = *p;
			continue;
		}
		p++;
		if (*p == 't')
			o += sprintf(o, "%u", tid);
		else if (*p == 'p')
			o += sprintf(o, "%u", pid);
		else
			*o++ = '%';
	}
	*o = '\0';
	return out;
}

/* Whether writing @out would replace @in (the same file, by any name). */
static int same_file(const char *in, const char *out)
{
	struct stat a, b;

	return stat(in, &a) == 0 && stat(out, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Whether the build asks for @t. */
static int wanted(const struct pbuild *pb, const struct htr_perf_thread *t)
{
	return traced(pb->pd, t) && (!(pb->o.flags & HTR_PERF_BUILD_TID) ||
				     t->tid == pb->o.tid);
}

/* Set up @pb from @opts and check the outputs (htr_perf_check()). */
static int pb_init(struct pbuild *pb, struct htr_perf *pf,
		   const struct htr_perf_build_opts *opts)
{
	size_t i, n = 0;
	int rc;

	memset(pb, 0, sizeof(*pb));
	pb->pf = pf;
	if (!pf || !pf->pd)
		return HTR_ERR_INVALID;
	htr_err__clear(&pf->err);
	if (htr_abi__in(&pb->o, sizeof(pb->o), opts,
			htr_abi__size_of(opts), OPTS_SIZE0) < 0 ||
	    pb->o.flags & ~HTR_PERF_BUILD_TID)
		return htr_err__set(&pf->err, HTR_ERR_INVALID, "bad options");
	pb->pd = pf->pd;
	pb->trace = pf->name;
	if (htr_abi__in(&pb->user, sizeof(pb->user), pb->o.build,
			htr_abi__size_of(pb->o.build), BOPTS_SIZE0) < 0)
		return htr_err__set(&pf->err, HTR_ERR_INVALID, "bad build "
				    "options");
	pb->kcore = pb->o.kcore || pb->o.vmlinux ? pb->o.kcore : pf->kcore;
	pb->buildid_dir = pb->o.buildid_dir;
	if (!pb->buildid_dir && getenv("HOME")) {
		pb->home_debug = path_cat(getenv("HOME"), "/.debug");
		pb->buildid_dir = pb->home_debug;
	}
	if (pb->buildid_dir && !*pb->buildid_dir)
		pb->buildid_dir = NULL;
	/* The threads to build, known before anything is written. */
	for (i = 0; i < pb->pd->nthreads; i++)
		n += wanted(pb, &pb->pd->threads[i]);
	rc = out_pattern(pb->o.output, pf->stem, n, &pb->pattern, &pf->err);
	for (i = 0; rc == 0 && i < pb->pd->nthreads; i++) {
		const struct htr_perf_thread *t = &pb->pd->threads[i];
		char *out;

		if (!wanted(pb, t))
			continue;
		out = out_name(pb->pattern, t->tid, t->pid);
		if (!out)
			return nomem(pb);
		if (same_file(pb->trace, out))
			rc = htr_err__set(&pf->err, HTR_ERR_INVALID, "%s: the "
					  "output would overwrite the trace; "
					  "give another -o", out);
		free(out);
	}
	return rc;
}

static void pb_fini(struct pbuild *pb)
{
	size_t i;

	for (i = 0; i < pb->nwarned; i++)
		free(pb->warned[i]);
	free(pb->warned);
	free(pb->pattern);
	free(pb->home_debug);
}

int htr_perf_check(struct htr_perf *pf, const struct htr_perf_build_opts *opts)
{
	struct pbuild pb;
	int rc = pb_init(&pb, pf, opts);

	pb_fini(&pb);
	return rc;
}

/* ------------------------------------------------------------------ */
/* The image of a thread. */

/* Count thread @out's decode errors for what_lost(). */
static void count_lost(struct pbuild *pb, const char *out,
		       const struct htr_build_stats *st)
{
	struct htr_gap_info first;

	if (!st->errors)
		return;
	if (!pb->threads_with_errors++) {
		memset(&first, 0, sizeof(first));
		first.size = sizeof(first);
		first.kind = HTR_GAP_ERROR;
		first.offset = st->first_error_offset;
		first.code = st->first_error_code;
		snprintf(pb->first_error, sizeof(pb->first_error), "%s",
			 htr_gap_reason(&first));
		snprintf(pb->error_out, sizeof(pb->error_out), "%s", out);
	}
	pb->error_gaps += st->errors;
}

/* The one line that says what the build could not decode: the modules
 * it had no code of, the decode errors, the kernel's stretches of a
 * user+kernel trace without the kernel's code. */
static void what_lost(struct pbuild *pb)
{
	char more[64] = "", errs[512] = "", kern[256] = "";

	if (!pb->nwarned && !pb->error_gaps && !pb->kernel_stretches)
		return;
	if (pb->nwarned > 1)
		snprintf(more, sizeof(more), " %zu modules without code, the "
			 "first:", pb->nwarned);
	if (pb->error_gaps)
		snprintf(errs, sizeof(errs), " %" PRIu64 " decode error%s in %"
			 PRIu64 " thread%s (%s; 'htr gaps %s' lists them)%s",
			 pb->error_gaps, pb->error_gaps == 1 ? "" : "s",
			 pb->threads_with_errors,
			 pb->threads_with_errors == 1 ? "" : "s",
			 pb->first_error, pb->error_out,
			 pb->kernel_stretches ? ";" : "");
	if (pb->kernel_stretches)
		snprintf(kern, sizeof(kern), " %" PRIu64 " stretches in the "
			 "kernel, whose code is not at hand, are gaps named "
			 "[kernel] (%s)", pb->kernel_stretches,
			 pb->kcore || pb->o.vmlinux ?
			 "a CPU-wide recording does not use the kernel's code" :
			 "give --kcore DIR or --vmlinux FILE");
	say(pb, HTR_PERF_WARN_NOT_DECODED, "%s: not all decoded:%s%s%s%s%s%s",
	    pb->trace, more, pb->nwarned ? " " : "",
	    pb->nwarned ? pb->first_missing : "", pb->nwarned ? ";" : "",
	    errs, kern);
}

/* One warning per missing module, whatever the number of threads. */
static void warn_module(struct pbuild *pb, const char *path,
			const char *fmt, const char *why)
{
	size_t i;
	char **w;

	for (i = 0; i < pb->nwarned; i++)
		if (!strcmp(pb->warned[i], path))
			return;
	w = realloc(pb->warned, (pb->nwarned + 1) * sizeof(*w));
	if (w) {
		pb->warned = w;
		w[pb->nwarned] = strdup(path);
		if (w[pb->nwarned])
			pb->nwarned++;
	}
	if (pb->nwarned == 1) {
		char line[sizeof(pb->first_missing)];

		/* @path is the perf.data's: escaped as it is printed. */
		snprintf(line, sizeof(line), fmt, path, why);
		htr_err__escape(pb->first_missing, sizeof(pb->first_missing),
				line);
	}
}

/* Whether @file holds the build-id @id of @n bytes. */
static int has_build_id(const char *file, const uint8_t *id, size_t n)
{
	uint8_t got[20];
	size_t gn = 0;
	struct htr_err err;

	memset(&err, 0, sizeof(err));
	return htr_perfdata__elf_build_id(file, got, &gn, &err) == 0 &&
	       gn == n && !memcmp(got, id, n);
}

/*
 * A module with a recorded build-id: keep *@file if it matches, else
 * take the build-id cache's copy (DIR/.build-id/XX/REST/elf, .../vdso for
 * the vDSO, or the older DIR/.build-id/XX/REST); with neither, a file
 * that exists but differs is skipped with a warning.  Returns 0 (use
 * *@file: it matches, or is missing and the caller says so), 1 (skipped,
 * warned), -1 (out of memory).
 */
static int check_build_id(struct pbuild *pb, const struct htr_perf_module *m,
			  char **file)
{
	static const char *const names[] = { "/elf", "/vdso", "" };
	const char *dir = pb->buildid_dir;
	char hex[41], *cached;
	size_t i, n = m->build_id_size;
	int exists = (*file)[0] == '/' && access(*file, R_OK) == 0;

	if (exists && has_build_id(*file, m->build_id, n))
		return 0;
	for (i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", m->build_id[i]);
	cached = dir ? malloc(strlen(dir) + 64) : NULL;
	if (dir && !cached)
		return -1;
	for (i = 0; cached && i < sizeof(names) / sizeof(names[0]); i++) {
		sprintf(cached, "%s/.build-id/%.2s/%s%s", dir, hex, hex + 2,
			names[i]);
		if (access(cached, R_OK) == 0 &&
		    has_build_id(cached, m->build_id, n)) {
			free(*file);
			*file = cached;
			return 0;
		}
	}
	free(cached);
	if (!exists)
		return 0;
	warn_module(pb, *file, "module %s: its build-id is not the recorded "
		    "%s: its code becomes decode gaps", hex);
	return 1;
}

/*
 * A recording's [vdso] that is not in the build-id cache (perf record -N,
 * or recorded as another user): this process's own vDSO, the running
 * kernel's, if its build-id is the recorded one (the same build-id is the
 * same code).  Its bytes go in as a raw piece named [vdso], so names in it
 * read [vdso]+0xOFFSET.  Returns 0 (added), 1 (no vDSO here, another
 * build-id, or it could not be added).
 */
static int own_vdso(struct htr_builder *b, const struct htr_perf_module *m)
{
	const uint8_t *p = (const uint8_t *) getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *) p;
	uint64_t size = 0, n;
	uint8_t id[20], *copy;
	size_t idn, i;
	int rc;

	/* The kernel's own image; bounded all the same. */
	if (!p || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    eh->e_phoff + (uint64_t) eh->e_phnum * sizeof(Elf64_Phdr) > 4096)
		return 1;
	for (i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)
				       (p + eh->e_phoff) + i;

		if (ph->p_type == PT_LOAD && ph->p_offset + ph->p_filesz > size)
			size = ph->p_offset + ph->p_filesz;
	}
	if (size < sizeof(*eh) || size > (1u << 20) || m->pgoff >= size)
		return 1;
	copy = malloc(size);
	if (!copy)
		return 1;
	memcpy(copy, p, size);
	rc = htr_perfdata__mem_build_id(copy, size, id, &idn) == 0 &&
	     idn == m->build_id_size && !memcmp(id, m->build_id, idn) ? 0 : 1;
	n = size - m->pgoff < m->len ? size - m->pgoff : m->len;
	if (rc == 0 && htr_builder_add_bytes(b, copy + m->pgoff, n, m->addr,
					     "[vdso]") < 0)
		rc = 1;
	free(copy);
	return rc;
}

/*
 * The kernel's code of a user+kernel recording, if given: vmlinux at its
 * link address; a kcore directory, perf record --kcore's copy of
 * /proc/kcore (DIR/kcore_dir/kcore, or DIR/kcore): an ELF core file whose
 * PT_LOAD segments are the kernel's memory at its addresses, each loaded
 * as raw bytes.  Returns 0 or a failure (the message on the handle).
 */
static int kernel_image(struct pbuild *pb, struct htr_builder *b)
{
	struct htr_err *err = &pb->pf->err;
	char *path = NULL, spec[4200];
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	FILE *f = NULL;
	unsigned i, n = 0;
	int rc;

	if (pb->o.vmlinux && (rc = htr_builder_add_elf(b, pb->o.vmlinux)) < 0)
		return htr_err__set(err, rc, "--vmlinux: %s",
				    htr_builder_last_error(b));
	if (!pb->kcore)
		return 0;
	path = malloc(strlen(pb->kcore) + 32);
	if (!path)
		return nomem(pb);
	sprintf(path, "%s/kcore_dir/kcore", pb->kcore);
	if (access(path, R_OK) < 0)
		sprintf(path, "%s/kcore", pb->kcore);
	f = fopen(path, "rb");
	if (!f) {
		rc = htr_err__set(err, HTR_ERR_IO, "--kcore: %s: %s", path,
				  strerror(errno));
		goto done;
	}
	if (fread(&eh, sizeof(eh), 1, f) != 1 ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph)) {
		rc = htr_err__set(err, HTR_ERR_FORMAT, "--kcore: %s: not a "
				  "64-bit ELF core file", path);
		goto done;
	}
	for (i = 0; i < eh.e_phnum; i++) {
		if (fseeko(f, (off_t) (eh.e_phoff + (uint64_t) i * sizeof(ph)),
			   SEEK_SET) != 0 || fread(&ph, sizeof(ph), 1, f) != 1) {
			rc = htr_err__set(err, HTR_ERR_FORMAT, "--kcore: %s: "
					  "program header %u cut short", path,
					  i);
			goto done;
		}
		if (ph.p_type != PT_LOAD || !ph.p_filesz ||
		    !(ph.p_vaddr >> 63))
			continue;
		if (strlen(path) > sizeof(spec) - 64) {
			rc = htr_err__set(err, HTR_ERR_INVALID, "--kcore: path "
					  "too long");
			goto done;
		}
		snprintf(spec, sizeof(spec), "%s:0x%" PRIx64 ":0x%" PRIx64
			 "@0x%" PRIx64, path, (uint64_t) ph.p_offset,
			 (uint64_t) ph.p_filesz, (uint64_t) ph.p_vaddr);
		if ((rc = htr_builder_add_raw(b, spec)) < 0) {
			rc = htr_err__set(err, rc, "--kcore: %s",
					  htr_builder_last_error(b));
			goto done;
		}
		n++;
	}
	if (!n) {
		rc = htr_err__set(err, HTR_ERR_FORMAT, "--kcore: %s: no kernel "
				  "memory in it", path);
		goto done;
	}
	rc = 0;
done:
	if (f)
		fclose(f);
	free(path);
	return rc;
}

/* The file to read module @m from (malloc'd; NULL: out of memory). */
static char *module_file(const struct pbuild *pb,
			 const struct htr_perf_module *m)
{
	if (pb->o.symfs && m->path[0] == '/')
		return path_cat(pb->o.symfs, m->path);
	return strdup(m->path);
}

/* The image of thread @t: its process's executable mappings.  Returns 0
 * or a failure (the message on the handle). */
static int perf_image(struct pbuild *pb, struct htr_builder *b,
		      const struct htr_perf_thread *t)
{
	const struct htr_perfdata *pd = pb->pd;
	struct htr_err err;
	uint64_t *bases = calloc(pd->nmodules + 1, sizeof(*bases));
	size_t i, j;
	char *file;
	int rc;

	if (!bases)
		return nomem(pb);
	for (i = 0; i < pd->nmodules; i++) {
		const struct htr_perf_module *m = &pd->modules[i];
		int dup = 0;

		if (!htr_perfdata__thread_has(pd, t, m))
			continue;
		if (m->path[0] != '/' && strncmp(m->path, "[vdso", 5)) {
			/* //anon, [stack], [heap], ... */
			if (strcmp(m->path, "//anon") &&
			    strncmp(m->path, "[stack", 6) &&
			    strcmp(m->path, "[heap]"))
				warn_module(pb, m->path, "%s: no file to read "
					    "its code from%s: its code becomes "
					    "decode gaps", "");
			continue;
		}
		file = module_file(pb, m);
		if (!file) {
			free(bases);
			return nomem(pb);
		}
		memset(&err, 0, sizeof(err));
		if (m->build_id_size) {
			int r = check_build_id(pb, m, &file);

			if (r != 0) {
				free(file);
				if (r > 0)
					continue;
				free(bases);
				return nomem(pb);
			}
		}
		if (file[0] != '/') {
			/* The vDSO has no file; perf record copies it to its
			 * build-id cache. */
			if (!m->build_id_size || own_vdso(b, m) != 0)
				warn_module(pb, m->path, "%s: no file to read "
					    "its code from%s: its code becomes "
					    "decode gaps", m->build_id_size ?
					    " (not in the build-id cache)" :
					    " (no build-id recorded)");
		} else if (access(file, R_OK) < 0) {
			warn_module(pb, file, "module %s not found (%s): its "
				    "code becomes decode gaps", strerror(errno));
		} else if (htr_perfdata__elf_base(file, m, &bases[i],
						  &err) < 0) {
			warn_module(pb, file, "module %s: %s; its code becomes "
				    "decode gaps", err.msg);
		} else {
			/* One ELF per (file, base): perf records a mapping
			 * per segment. */
			for (j = 0; j < i && !dup; j++)
				dup = bases[j] == bases[i] &&
				      pd->modules[j].path &&
				      !strcmp(pd->modules[j].path, m->path) &&
				      htr_perfdata__thread_has(pd, t,
							       &pd->modules[j]);
			if (!dup && htr_builder_add_elf_at(b, file,
							   &bases[i]) < 0)
				warn_module(pb, file, "module %s: %s; its code "
					    "becomes decode gaps",
					    htr_builder_last_error(b));
		}
		free(file);
	}
	free(bases);
	for (i = 0; i < pb->o.nelfs; i++)
		if ((rc = htr_builder_add_elf(b, pb->o.elfs[i])) < 0)
			return htr_err__set(&pb->pf->err, rc, "%s",
					    htr_builder_last_error(b));
	for (i = 0; i < pb->o.nraws; i++)
		if ((rc = htr_builder_add_raw(b, pb->o.raws[i])) < 0)
			return htr_err__set(&pb->pf->err, rc, "%s",
					    htr_builder_last_error(b));
	if (pd->pt.kernel && !pd->ncpus)
		return kernel_image(pb, b);
	return 0;
}

/* What the .htr records of thread @t: who it is and perf's clock. */
static void perf_thread_info(const struct htr_perfdata *pd,
			     const struct htr_perf_thread *t,
			     struct htr_thread_info *ti)
{
	memset(ti, 0, sizeof(*ti));
	ti->size = sizeof(*ti);
	ti->pid = t->pid;
	ti->tid = t->tid;
	snprintf(ti->comm, sizeof(ti->comm), "%s", t->comm);
	/* Without cap_user_time_zero perf itself cannot place TSC values
	 * on its clock (the kernel did not publish time_zero). */
	if (pd->pt.present && pd->pt.time_mult && pd->pt.cap_user_time_zero &&
	    pd->pt.time_shift < 64) {
		ti->flags |= HTR_THREAD_NS;
		ti->time_shift = (uint32_t) pd->pt.time_shift;
		ti->time_mult = pd->pt.time_mult;
		ti->time_zero = pd->pt.time_zero;
	}
	if (pd->have_clock_data) {
		ti->flags |= HTR_THREAD_WALL;
		ti->wall_ns = pd->clock_wall_ns;
		ti->clock_ns = pd->clock_ref_ns;
	}
}

/* The build options of thread @t: the recording's parameters, unless
 * the caller's options give them. */
static void perf_opts(struct pbuild *pb, const struct htr_perf_thread *t,
		      struct htr_build_opts *o)
{
	const struct htr_perfdata *pd = pb->pd;
	const struct htr_build_opts *u = &pb->user;
	struct htr_err err;
	unsigned unplaced = 0;
	int n;

	*o = *u;
	if (!u->nfilters && pd->pt.filter) {
		memset(&err, 0, sizeof(err));
		n = htr_perfdata__filters(pd, t, o->filters, &unplaced, &err);
		o->nfilters = n > 0 ? (unsigned) n : 0;
		if ((n < 0 || unplaced) && !pb->filter_warned) {
			static const char hint[] = " (give the ranges with "
				"--filter: on a CPU with erratum SKL014 a "
				"disable may otherwise be placed late)";

			if (n < 0)
				say(pb, HTR_PERF_WARN_FILTER, "%s%s", err.msg,
				    hint);
			else
				say(pb, HTR_PERF_WARN_FILTER, "%s: thread %u "
				    "never mapped the file of %u address "
				    "filter entr%s in '%s'%s", pb->trace,
				    t->tid, unplaced, unplaced == 1 ? "y" :
				    "ies", pd->pt.filter, hint);
		}
		pb->filter_warned |= n < 0 || unplaced;
	}
	if (!u->cpu_family) {
		o->cpu_family = pd->cpu_family;
		o->cpu_model = pd->cpu_model;
		o->cpu_stepping = pd->cpu_stepping;
	}
	if (!u->cpuid_0x15_eax && !u->cpuid_0x15_ebx) {
		o->cpuid_0x15_eax = pd->pt.tsc_ctc_d;
		o->cpuid_0x15_ebx = pd->pt.tsc_ctc_n;
	}
	if (!u->mtc_freq && pd->pt.mtc)
		o->mtc_freq = pd->pt.mtc_freq;
	if (!u->nom_freq)
		o->nom_freq = (uint8_t) (pd->pt.max_nonturbo_ratio > 255 ?
					 255 : pd->pt.max_nonturbo_ratio);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Whether @rc ends the whole build (a cancel, a callback's code). */
static int stops(int rc)
{
	return rc == HTR_ERR_CANCELED || rc == HTR_ERR_CALLBACK ||
	       rc <= HTR_ERR_USER;
}

/* Tell opts.thread_done about @t.  Returns 0 or its stop code. */
static int report(struct pbuild *pb, const struct htr_perf_thread *t,
		  const char *out, int error, const char *message,
		  const struct htr_build_stats *st, int cpuwide, uint64_t ns)
{
	struct htr_perf_result r;
	int v;

	if (!pb->o.thread_done)
		return 0;
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.pid = t->pid;
	r.tid = t->tid;
	r.comm = t->comm;
	r.out = out;
	r.error = error;
	r.message = message ? message : "";
	r.stats = st;
	r.cpuwide = cpuwide;
	r.ns = ns;
	if (!cpuwide) {
		r.aux_truncated = t->aux_truncated;
		r.aux_lost = t->aux_lost;
	}
	v = pb->o.thread_done(&r, pb->o.payload);
	if (!v)
		return 0;
	v = htr_err__callback(v);
	if (v > 0)
		v = HTR_ERR_CANCELED;
	return htr_err__set(&pb->pf->err, v, "%s: interrupted", pb->trace);
}

/* Build thread @t (per-thread buffers) into @out from its @n chunks @ch
 * (all of them, or a snapshot-mode run).  Returns 0, or an error with
 * the message on the handle. */
static int perf_thread(struct pbuild *pb, const struct htr_perf_thread *t,
		       const struct htr_perf_chunk *ch, size_t n,
		       const char *out, struct htr_build_stats *st,
		       uint64_t *ns)
{
	const struct htr_perfdata *pd = pb->pd;
	struct htr_err *e = &pb->pf->err;
	struct htr_build_opts opts;
	struct htr_thread_info ti;
	struct htr_builder *b = NULL;
	struct htr_perf_joined joined;
	struct htr_err jerr;
	char name[128];
	uint64_t start;
	int err;

	perf_opts(pb, t, &opts);
	snprintf(name, sizeof(name), "%s tid %u", pb->trace, t->tid);
	memset(&jerr, 0, sizeof(jerr));
	if ((err = htr_perfdata__join(pd->data, ch, n, &joined, &jerr)) != 0)
		return htr_err__set(e, err, "%s: %s", name, jerr.msg);
	if (pd->pt.kernel && !pb->kcore && !pb->o.vmlinux) {
		struct htr_perf_kstats ks;

		if ((err = htr_perfdata__user_only(&joined, &ks, &jerr)) != 0) {
			htr_perfdata__unjoin(&joined);
			return htr_err__set(e, err, "%s: %s", name, jerr.msg);
		}
		pb->kernel_stretches += ks.stretches;
	}
	start = now_ns();
	err = htr_builder_alloc(&b, &opts);
	if (err < 0) {
		htr_err__set(e, err, "%s", htr_errstr(err));
		goto done;
	}
	perf_thread_info(pd, t, &ti);
	if ((err = perf_image(pb, b, t)) != 0)
		goto done;
	if ((err = htr_builder_set_thread(b, &ti)) < 0) {
		htr_err__set(e, err, "%s: %s", name, htr_errstr(err));
		goto done;
	}
	memset(st, 0, sizeof(*st));
	st->size = sizeof(*st);
	err = htr_builder_run_buffer(b, joined.data, (size_t) joined.size, out,
				     st, sizeof(*st));
	if (err == HTR_ERR_CANCELED)
		htr_err__set(e, err, "%s: interrupted, nothing written", out);
	else if (err < 0)
		htr_err__set(e, err, "%s: %s", name,
			     htr_builder_last_error(b)[0] ?
			     htr_builder_last_error(b) : htr_errstr(err));
	*ns = now_ns() - start;
done:
	htr_builder_free(b);
	htr_perfdata__unjoin(&joined);
	return err < 0 ? err : 0;
}

/* ------------------------------------------------------------------ */
/* Snapshot mode (perf record -S) */

/* Offset of the first PSB in @p[from, n), or n. */
static uint64_t next_psb(const uint8_t *p, uint64_t n, uint64_t from)
{
	static const uint8_t psb[16] = {
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
	};
	const uint8_t *q;

	while (from < n && n - from >= sizeof(psb)) {
		q = memchr(p + from, 0x02, (size_t) (n - from - sizeof(psb) + 1));
		if (!q)
			break;
		from = (uint64_t) (q - p);
		if (!memcmp(q, psb, sizeof(psb)))
			return from;
		from++;
	}
	return n;
}

/*
 * A thread's snapshots as runs of trace that continue each other.  Each
 * snapshot (AUXTRACE record) is the AUX area's content when it was taken:
 * its start may be a packet the area overwrote halfway, so it is decoded
 * from its first PSB; its data may repeat the end of the snapshot before
 * (the area had not been overwritten since).  As perf's decoder does
 * (intel_pt_find_overlap), a snapshot continues the one before when, from
 * one of the earlier one's PSBs to its end (the padding left out), the
 * bytes are the first ones of this snapshot from its first PSB: then only
 * what follows them is new, and it is appended to the run; else trace
 * was lost between the two, and the snapshot starts a new run.  @runs
 * gets, per chunk, the run's number (from 0; the chunk's trimmed extent
 * in @out).  Returns the number of runs.
 */
static size_t snapshot_runs(const uint8_t *base, const struct htr_perf_chunk *c,
			    size_t n, struct htr_perf_chunk *out, size_t *runs)
{
	size_t i, k = SIZE_MAX, nr = 0;

	for (i = 0; i < n; i++) {
		const uint8_t *b = base + c[i].offset;
		uint64_t nb = c[i].size, sb = next_psb(b, nb, 0);

		out[i].offset = c[i].offset + sb;
		out[i].size = nb - sb;
		runs[i] = SIZE_MAX;
		if (sb == nb)
			continue;       /* no PSB: nothing decodable */
		if (k != SIZE_MAX) {
			/* the previous snapshot, whole, from its first PSB */
			const uint8_t *a = base + c[k].offset;
			uint64_t na = c[k].size, p;

			/* perf pads each snapshot to 8 bytes with zeros */
			while (na && !a[na - 1])
				na--;
			for (p = next_psb(a, na, 0); p < na;
			     p = next_psb(a, na, p + 1)) {
				uint64_t len = na - p;

				if (len <= nb - sb && !memcmp(a + p, b + sb, len))
					break;
			}
			if (p < na) {
				/* It continues run runs[k]: the padding of
				 * the one before goes, and only what follows
				 * the repeated bytes is new. */
				if (out[k].size >= c[k].size - na)
					out[k].size -= c[k].size - na;
				out[i].offset = c[i].offset + sb + (na - p);
				out[i].size = nb - sb - (na - p);
				runs[i] = runs[k];
				k = i;
				continue;
			}
		}
		runs[i] = nr++;
		k = i;
	}
	return nr;
}

/* @out with ".sK" before its ".htr" (or at its end). */
static char *run_name(const char *out, size_t k)
{
	size_t n = strlen(out);
	char *r = malloc(n + 32);

	if (!r)
		return NULL;
	if (n > 4 && !strcmp(out + n - 4, ".htr"))
		snprintf(r, n + 32, "%.*s.s%zu.htr", (int) (n - 4), out, k + 1);
	else
		snprintf(r, n + 32, "%s.s%zu", out, k + 1);
	return r;
}

/* Build one tree: report it, count it.  Returns 0, a stop code, or the
 * build's error (remembered in *@rc). */
static int build_one(struct pbuild *pb, const struct htr_perf_thread *t,
		     const struct htr_perf_chunk *ch, size_t n,
		     const char *out, size_t *built, int *rc)
{
	char msg[sizeof(pb->pf->err.msg)];
	struct htr_build_stats st;
	uint64_t ns = 0;
	int r = perf_thread(pb, t, ch, n, out, &st, &ns);

	if (r < 0 && stops(r))
		return r;
	if (r < 0) {
		*rc = r;
		snprintf(msg, sizeof(msg), "%s", pb->pf->err.msg);
		r = report(pb, t, out, r, msg, NULL, 0, 0);
		/* The message of the last failure stays. */
		if (!r)
			htr_err__set(&pb->pf->err, *rc, "%s", msg);
		return r;
	}
	(*built)++;
	count_lost(pb, out, &st);
	return report(pb, t, out, 0, NULL, &st, 0, ns);
}

/* A thread of a snapshot-mode recording: one tree per run of snapshots
 * that continue each other (snapshot_runs()), OUT when there is one,
 * OUT with .s1, .s2, ... before .htr when there are several. */
static int snapshot_thread(struct pbuild *pb, const struct htr_perf_thread *t,
			   const char *out, size_t *built, int *rc)
{
	struct htr_perf_chunk *tr = NULL, *sel = NULL;
	size_t *runs = NULL, nr, k, i, m;
	int r = 0;

	tr = calloc(t->nchunks + 1, sizeof(*tr));
	sel = calloc(t->nchunks + 1, sizeof(*sel));
	runs = calloc(t->nchunks + 1, sizeof(*runs));
	if (!tr || !sel || !runs) {
		r = nomem(pb);
		goto done;
	}
	nr = snapshot_runs(pb->pd->data, t->chunks, t->nchunks, tr, runs);
	for (k = 0; k < nr && !r; k++) {
		char *name;

		for (i = m = 0; i < t->nchunks; i++)
			if (runs[i] == k && tr[i].size)
				sel[m++] = tr[i];
		name = nr > 1 ? run_name(out, k) : strdup(out);
		if (!name) {
			r = nomem(pb);
			break;
		}
		r = build_one(pb, t, sel, m, name, built, rc);
		free(name);
	}
done:
	free(tr);
	free(sel);
	free(runs);
	return r;
}

/* Every thread of a per-thread recording, each on its own. */
static int build_threads(struct pbuild *pb, size_t *built)
{
	const struct htr_perfdata *pd = pb->pd;
	size_t i;
	int rc = 0;

	for (i = 0; i < pd->nthreads; i++) {
		const struct htr_perf_thread *t = &pd->threads[i];
		char *out;
		int r;

		if (!wanted(pb, t))
			continue;
		out = out_name(pb->pattern, t->tid, t->pid);
		if (!out)
			return nomem(pb);
		if (pd->pt.snapshot_mode)
			r = snapshot_thread(pb, t, out, built, &rc);
		else
			r = build_one(pb, t, t->chunks, t->nchunks, out, built,
				      &rc);
		free(out);
		if (r < 0)
			return r;
	}
	return rc;
}

/* One process's threads of a CPU-wide recording (cpuwide.h): every CPU
 * decoded with the image of process @pid.  @cs gets the tids of other
 * threads found with trace. */
static int cpuwide_pid(struct pbuild *pb, uint32_t pid,
		       struct htr_cpuwide_stats *cs, size_t *built)
{
	const struct htr_perfdata *pd = pb->pd;
	struct htr_err *e = &pb->pf->err;
	struct htr_cpuwide_thread *v;
	const struct htr_perf_thread *rep = NULL;
	struct htr_build_opts opts;
	struct htr_builder *b = NULL;
	uint64_t start, ns;
	size_t i, n = 0;
	int err = 0;

	v = calloc(pd->nthreads ? pd->nthreads : 1, sizeof(*v));
	if (!v)
		return nomem(pb);
	for (i = 0; i < pd->nthreads; i++) {
		const struct htr_perf_thread *t = &pd->threads[i];
		char *out;

		if (t->pid != pid || !wanted(pb, t))
			continue;
		out = out_name(pb->pattern, t->tid, t->pid);
		if (!out) {
			err = nomem(pb);
			goto done;
		}
		v[n].tid = t->tid;
		v[n].out = out;
		perf_thread_info(pd, t, &v[n].info);
		n++;
		if (!rep)
			rep = t;
	}
	if (!n)
		goto done;
	start = now_ns();
	perf_opts(pb, rep, &opts);
	err = htr_builder_alloc(&b, &opts);
	if (err < 0) {
		htr_err__set(e, err, "%s", htr_errstr(err));
		goto done;
	}
	if ((err = perf_image(pb, b, rep)) != 0)
		goto done;
	err = htr_cpuwide__build(b, pd, v, n, cs);
	if (err == HTR_ERR_CANCELED) {
		htr_err__set(e, err, "%s: interrupted", pb->trace);
		goto done;
	}
	if (err < 0) {
		htr_err__set(e, err, "%s: %s", pb->trace,
			     htr_builder_last_error(b)[0] ?
			     htr_builder_last_error(b) : htr_errstr(err));
		goto done;
	}
	ns = now_ns() - start;
	for (i = 0; i < n && !err; i++) {
		const struct htr_perf_thread *t;

		if (!v[i].built)
			continue;
		(*built)++;
		for (t = pd->threads; t->tid != v[i].tid; t++)
			;
		count_lost(pb, v[i].out, &v[i].stats);
		err = report(pb, t, v[i].out, 0, NULL, &v[i].stats, 1, ns);
	}
done:
	htr_builder_free(b);
	for (i = 0; i < n; i++)
		free((char *) v[i].out);
	free(v);
	return err;
}

/* A CPU-wide recording: the threads of the workload's process first, then
 * those of any other process that has trace. */
static int build_cpuwide(struct pbuild *pb, size_t *built)
{
	const struct htr_perfdata *pd = pb->pd;
	struct htr_cpuwide_stats cs;
	uint32_t *pids = NULL;
	size_t npids = 0, i, j, k;
	uint64_t lost = 0, truncated = 0;
	int rc = 0;

	if (!pd->nswitches)
		return htr_err__set(&pb->pf->err, HTR_ERR_FORMAT, "%s: a "
				    "CPU-wide recording (per-CPU trace "
				    "buffers) without context-switch records"
				    "%s: the threads cannot be told apart; "
				    "record with perf record --per-thread, or "
				    "with switch events (the default since "
				    "Linux 4.3)", pb->trace,
				    pd->switches_untimed ? " that carry time "
				    "and CPU" : "");
	if (!pd->pt.present || !pd->pt.tsc)
		return htr_err__set(&pb->pf->err, HTR_ERR_FORMAT, "%s: a "
				    "CPU-wide recording without TSC packets: "
				    "the trace cannot be matched to the "
				    "context switches (record with "
				    "intel_pt/tsc/u)", pb->trace);
	if (pd->pt.kernel && (pb->kcore || pb->o.vmlinux))
		say(pb, HTR_PERF_NOTE_KERNEL_UNUSED, "%s: a CPU-wide "
		    "recording: --kcore/--vmlinux are not used (its threads "
		    "are told apart where user code resumes)", pb->trace);
	for (i = 0; i < pd->ncpus; i++) {
		lost += pd->cpus[i].aux_lost;
		truncated += pd->cpus[i].aux_truncated;
	}
	memset(&cs, 0, sizeof(cs));
	pids = malloc((pd->nthreads + 1) * sizeof(*pids));
	if (!pids)
		return nomem(pb);
	/* The first process named in the file, usually the workload. */
	if (pd->nthreads)
		pids[npids++] = pd->threads[0].pid;
	for (k = 0; k < npids && rc == 0; k++) {
		rc = cpuwide_pid(pb, pids[k], &cs, built);
		/* Processes of the other threads that had trace. */
		for (i = 0; i < cs.nother; i++) {
			const struct htr_perf_thread *t = NULL;

			for (j = 0; j < pd->nthreads; j++)
				if (pd->threads[j].tid == cs.other[i])
					t = &pd->threads[j];
			for (j = 0; t && j < npids && pids[j] != t->pid; j++)
				;
			if (t && j == npids)
				pids[npids++] = t->pid;
		}
	}
	if (rc == 0 && cs.insns_unknown)
		say(pb, HTR_PERF_WARN_UNEXPLAINED, "%s: %" PRIu64 " "
		    "instructions ran when no context-switch record says "
		    "which thread was on the CPU: left out", pb->trace,
		    cs.insns_unknown);
	if (rc == 0 && (lost || truncated))
		say(pb, HTR_PERF_WARN_AUX_LOST, "%s: perf lost trace data (%"
		    PRIu64 " AUX records truncated, %" PRIu64 " partial or "
		    "collided): the trees have gaps there", pb->trace,
		    truncated, lost);
	pb->kernel_stretches += cs.kernel_stretches;
	htr_cpuwide__stats_free(&cs);
	free(pids);
	return rc;
}

int htr_perf_build(struct htr_perf *pf, const struct htr_perf_build_opts *opts)
{
	struct pbuild pb;
	size_t built = 0;
	int rc;

	rc = pb_init(&pb, pf, opts);
	if (rc < 0)
		goto done;
	/* Snapshot mode: per-thread buffers are decoded as perf does
	 * (snapshot_thread()); per-CPU ones one after the other, with a
	 * warning. */
	if (pb.pd->pt.snapshot_mode && pb.pd->ncpus)
		say(&pb, HTR_PERF_WARN_SNAPSHOT, "%s: snapshot mode with "
		    "per-CPU buffers: each CPU's snapshots are decoded one "
		    "after the other (overlaps not removed)", pb.trace);
	rc = pb.pd->ncpus ? build_cpuwide(&pb, &built)
			  : build_threads(&pb, &built);
	if (rc == 0 && !built) {
		if (pb.o.flags & HTR_PERF_BUILD_TID)
			rc = htr_err__set(&pf->err, HTR_ERR_NOTFOUND, "%s: no "
					  "Intel PT trace of thread %u",
					  pb.trace, pb.o.tid);
		else
			rc = htr_err__set(&pf->err, HTR_ERR_NOTFOUND, "%s: no "
					  "Intel PT trace of any thread",
					  pb.trace);
	}
	if (rc == 0)
		what_lost(&pb);
done:
	pb_fini(&pb);
	return rc;
}

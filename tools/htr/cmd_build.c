/* htr build: decode a trace into an .htr file. */
#include "cmd.h"

#include "htr/htr.h"
#include "cpuwide.h"
#include "perfdata.h"
#include "err.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char usage_text[] =
"usage: htr build TRACE --elf FILE[@BASE]... [--raw FILE[:OFF[:SIZE]]@VADDR]...\n"
"                 [--cpu FAMILY/MODEL[/STEPPING]|auto] [-o OUT] [options]\n"
"       htr build FILE.data [--tid N] [--symfs DIR] [--buildid-dir DIR]\n"
"                 [--kcore DIR|--vmlinux FILE] [-o OUT] [options]\n"
"\n"
"Decode the raw Intel PT trace TRACE with libipt and write its call tree to\n"
"OUT (default: TRACE with its extension replaced by .htr).\n"
"\n"
"A perf.data (perf record -e intel_pt//u, also with -z; htr record) is\n"
"recognized by its magic: each thread's trace becomes STEM.TID.htr\n"
"(STEM: FILE without its extension; or see -o), with the image from the\n"
"recorded mappings and the timing parameters, CPU and TSC conversion\n"
"from the file.  Per-CPU buffers (perf record without --per-thread, -a)\n"
"are split into threads with the context-switch records.  A module that\n"
"cannot be found, or whose build-id is not the recorded one, is a\n"
"warning; its code becomes decode gaps.\n"
"The vDSO ([vdso]) has no file: its code comes from the build-id cache,\n"
"where perf record copies it, or from this machine's own vDSO when its\n"
"build-id is the recorded one (names in it read [vdso]+0xOFFSET).\n"
"\n"
"  -e, --elf FILE[@BASE]   an ELF; at its link address, or with its lowest\n"
"                          PT_LOAD at BASE (position-independent code)\n"
"  -r, --raw FILE[:OFFSET[:SIZE]]@VADDR\n"
"                          raw code bytes loaded at VADDR\n"
"      --cpu F/M[/S]|auto  processor the trace was recorded on, for libipt's\n"
"                          errata workarounds (auto: none)\n"
"      --mtc-freq N        IA32_RTIT_CTL.MTCFreq of the recording\n"
"      --nom-freq N        nominal core:bus ratio (for CYC)\n"
"      --cpuid-0x15-eax N, --cpuid-0x15-ebx N\n"
"                          the TSC:CTC ratio CPUID leaf 0x15 reports\n"
"      --filter START-END, --trace-stop START-END\n"
"                          an IP filter range (END excluded) or TraceStop\n"
"                          region the trace was recorded with; up to 4\n"
"                          (perf.data: default from the file).  With a\n"
"                          --cpu that has erratum SKL014 (Skylake, Kaby\n"
"                          Lake, ...) the build needs them: a direct\n"
"                          jump or call out of the ranges may stop\n"
"                          tracing without saying where\n"
"  -o, --output OUT        where to write the .htr file.  perf.data:\n"
"                          NAME.htr is that file for one thread,\n"
"                          NAME.TID.htr for several; DIR/ or a directory\n"
"                          gives DIR/STEM.TID.htr (STEM: FILE's name\n"
"                          without its extension); a pattern expands %t\n"
"                          to the tid, %p to the pid, %% to % (several\n"
"                          threads need %t); another OUT is a prefix:\n"
"                          OUT.TID.htr\n"
"      --tid N             perf.data: only the thread N\n"
"      --symfs DIR         perf.data: look for the modules under DIR\n"
"      --buildid-dir DIR   perf.data: perf's build-id cache, for modules\n"
"                          whose file is missing or has another build-id\n"
"                          (default: ~/.debug)\n";

/* The rest of the help (one string would pass C11's 4095 characters). */
static const char usage_text2[] =
"      --kcore DIR         perf.data of user and kernel (intel_pt// without\n"
"                          u), per-thread: the kernel's code from perf\n"
"                          record --kcore's copy (DIR/kcore_dir/kcore;\n"
"                          default: that of a perf.data directory, which\n"
"                          perf record --kcore writes: DIR/data is read);\n"
"                          without it or --vmlinux the kernel's stretches\n"
"                          are gaps named [kernel]\n"
"      --vmlinux FILE      the same from the kernel's ELF image\n"
"  -j, --jobs N            threads (default: the number of processors):\n"
"                          one builds the tree, all decode; the .htr is\n"
"                          the same for any N\n"
"      --chunk-size BYTES  trace per parallel chunk, cut at a PSB (suffix\n"
"                          K, M or G; default: 64K to 256K, half of\n"
"                          what is left a thread, less where events\n"
"                          are dense)\n"
"      --decoder block|walk\n"
"                          block: libipt's block decoder follows every\n"
"                          instruction; walk (default, faster): libipt\n"
"                          reads the packets, htr walks the code; the .htr\n"
"                          is the same either way\n"
"  -q, --quiet             no progress, no summary\n"
"  -h, --help              show this help\n"
"\n"
"Progress goes to stderr: a live line on a terminal, a heartbeat line every\n"
"5 seconds otherwise.  Bad trace data does not stop a build: it becomes\n"
"gaps, counted in the summary.  A trace holding what the walk does not\n"
"follow itself (a decode error, 16-bit code, VMX, ptwrite, ...) is\n"
"decoded again with the block decoder, and a note says so.  OUT\n"
"is written under a temporary name and renamed when complete.\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

struct progress {
	struct timespec start, last;
	int tty, printed, quiet;
};

/* The signal that asked the build to stop (SIGINT, SIGTERM), 0 if none.
 * A signal handler can only set a flag: the build checks it at its next
 * progress report, stops, and removes its temporary output itself. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static double seconds(const struct timespec *a, const struct timespec *b)
{
	return (double) (b->tv_sec - a->tv_sec) +
	       (double) (b->tv_nsec - a->tv_nsec) / 1e9;
}

static int on_progress(const struct htr_build_progress *p, void *payload)
{
	struct progress *pr = payload;
	struct timespec now;
	double t, frac, eta;

	if (stop_signal)
		return 1;
	if (pr->quiet)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (seconds(&pr->last, &now) < (pr->tty ? 0.25 : 5.0))
		return 0;
	pr->last = now;
	t = seconds(&pr->start, &now);
	frac = p->trace_size ? (double) p->offset / (double) p->trace_size : 0;
	eta = frac > 0 ? t / frac - t : 0;
	fprintf(stderr, "%shtr: build: %5.1f%% %.1f/%.1f MiB, %" PRIu64
		" insns, %.1f M insns/s, ETA %.0f s%s",
		pr->tty ? "\r" : "", 100.0 * frac,
		(double) p->offset / 1048576.0,
		(double) p->trace_size / 1048576.0, p->insns,
		t > 0 ? (double) p->insns / t / 1e6 : 0.0, eta,
		pr->tty ? "  " : "\n");
	pr->printed = 1;
	return 0;
}

static char *default_output(const char *trace)
{
	const char *slash = strrchr(trace, '/');
	const char *dot = strrchr(trace, '.');
	size_t stem = dot && (!slash || dot > slash + 1) ? (size_t) (dot - trace)
							 : strlen(trace);
	char *out = malloc(stem + 5);

	if (out) {
		memcpy(out, trace, stem);
		strcpy(out + stem, ".htr");
	}
	return out;
}

/* Whether writing @out would replace @in (the same file, by any name). */
static int same_file(const char *in, const char *out)
{
	struct stat a, b;

	return stat(in, &a) == 0 && stat(out, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The file of an image spec: what comes before its last '@' (an ELF may
 * have no '@'). */
static int spec_is(const char *spec, const char *out)
{
	const char *at = strrchr(spec, '@');
	char *path = at ? strndup(spec, (size_t) (at - spec)) : strdup(spec);
	int r;

	if (!path)
		return 0;
	/* A raw spec may also carry :OFFSET[:SIZE]. */
	r = same_file(path, out);
	if (!r && at) {
		char *colon = strchr(path, ':');

		if (colon) {
			*colon = 0;
			r = same_file(path, out);
		}
	}
	free(path);
	return r;
}

/* Warnings a build's result calls for: each one line, each a sign that
 * the tree is not what the user wants (wrong image, missing timing
 * options), none a failure. */
static void warn_result(const char *trace, const char *out,
			const struct htr_build_stats *st, int perf)
{
	struct htr_gap_info first;

	if (st->timing_unusable)
		fprintf(stderr, "htr: build: warning: %s has MTC/CYC timing "
			"packets but --cpuid-0x15-eax/--cpuid-0x15-ebx/"
			"--mtc-freq/--nom-freq do not describe them: time "
			"moves only at each PSB\n", trace);
	if (st->folded)
		fprintf(stderr, "htr: build: warning: %" PRIu64 " calls past "
			"the call-stack limit were folded into their caller\n",
			st->folded);
	memset(&first, 0, sizeof(first));
	first.size = sizeof(first);
	first.kind = HTR_GAP_ERROR;
	first.offset = st->first_error_offset;
	first.code = st->first_error_code;
	/* A perf.data build says it once for all its threads (what_lost). */
	if (st->errors && perf)
		return;
	if (st->errors)
		fprintf(stderr, "htr: build: warning: %" PRIu64 " decode "
			"error%s%s, the first at trace offset 0x%" PRIx64
			": %s; %s ('htr gaps %s' lists them)\n",
			st->errors, st->errors == 1 ? "" : "s",
			st->runaways ? " (the decoder ran away)" : "",
			first.offset, htr_gap_reason(&first),
			"are the --elf/--raw files the "
			"recorded code at its load addresses?", out);
	else if (!st->insns)
		fprintf(stderr, "htr: build: warning: %s: no instruction "
			"decoded\n", trace);
}

static int parse_cpu(const char *s, struct htr_build_opts *o)
{
	unsigned f, m, st = 0;
	char tail;
	int n;

	if (!strcmp(s, "auto") || !strcmp(s, "none"))
		return 0;
	n = sscanf(s, "%u/%u/%u%c", &f, &m, &st, &tail);
	if (n == 2 || n == 3) {
		if (!f || f > 255 || m > 255 || st > 255)
			return -1;
		o->cpu_family = (int) f;
		o->cpu_model = (int) m;
		o->cpu_stepping = (int) st;
		return 0;
	}
	return -1;
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

/*
 * Why @path cannot be a trace to build, as one message in @msg (@size
 * bytes); 0 when it may be one (it holds a PSB, where every decode
 * starts) or is not a plain file.  @empty_ok: an
 * empty file is left to the build ("empty trace").  Run after the
 * perf.data check: a file that starts as perf.data's magic and is
 * shorter than it is a perf.data cut short.
 */
static int not_a_trace(const char *path, int empty_ok, char *msg,
		       size_t size)
{
	static const uint8_t psb[16] = {
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
	};
	static const char hint[] = "record one with 'htr record' or perf";
	char name[512];
	struct stat sb;
	const uint8_t *p;
	size_t n, i;
	int fd, text = 1, r = 1;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		snprintf(msg, size, "%s: %s",
			 htr_err__escape(name, sizeof(name), path),
			 strerror(e));
		return 1;
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
		snprintf(msg, size, "%s: empty file: no trace or perf.data in "
			 "it", name);
		return 1;
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
		snprintf(msg, size, "%s: a perf.data cut short (%zu bytes, "
			 "less than its magic)", name, n);
	else if (has_psb(p, n, psb, sizeof(psb)))
		r = 0;
	else if (n >= 4 && !memcmp(p, "\x7f" "ELF", 4))
		snprintf(msg, size, "%s: an ELF file, not a trace: give it "
			 "with --elf, and the trace or perf.data as TRACE",
			 name);
	else if (n >= 8 && !memcmp(p, "HTRTREE", 8))
		snprintf(msg, size, "%s: an htr file, built already: 'htr "
			 "info %s' reads it", name, name);
	else if (text)
		snprintf(msg, size, "%s: not an Intel PT trace or perf.data "
			 "(a text file); %s", name, hint);
	else
		snprintf(msg, size, "%s: not an Intel PT trace or perf.data "
			 "(no PSB packet in its %zu bytes); %s", name, n,
			 hint);
	munmap((void *) p, n);
	return r;
}

/* The default stem of a perf.data build's files: the file without its
 * extension (perf.data: perf, so perf.TID.htr). */
static char *perf_stem(const char *trace)
{
	const char *slash = strrchr(trace, '/');
	const char *dot = strrchr(trace, '.');
	size_t stem = dot && (!slash || dot > slash + 1) ? (size_t) (dot - trace)
							 : strlen(trace);

	return strndup(trace, stem);
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

/* The names of a perf.data build's files, as a pattern of -o: %t the tid,
 * %p the pid, %% a %.  @outarg is -o (NULL: none), @stem the default
 * (perf_stem()), @nthreads how many threads are built.
 *   none            STEM.%t.htr
 *   DIR/ or a dir   DIR/BASENAME-OF-STEM.%t.htr
 *   with a %        itself (several threads need %t)
 *   NAME.htr        itself for one thread, NAME.%t.htr for several
 *   anything else   a prefix: OUT.%t.htr
 * Returns the pattern (malloc'd), or NULL with the error printed and
 * *@rc set (before anything is written). */
static char *perf_pattern(const char *outarg, const char *stem,
			  size_t nthreads, int *rc)
{
	const char *base, *p;
	struct stat sb;
	size_t n;
	char *pat, *e;
	int st;

	*rc = HTR_EXIT_OK;
	if (outarg && !*outarg) {
		*rc = usage_error("build", "-o: an empty name");
		return NULL;
	}
	base = outarg ? outarg : stem;
	n = strlen(base);
	pat = malloc(2 * (n + strlen(stem)) + 16);
	if (!pat) {
		*rc = fail("build", "out of memory");
		return NULL;
	}
	if (!outarg) {
		strcpy(pat_cat(pat, stem, SIZE_MAX), ".%t.htr");
		return pat;
	}
	if (strchr(outarg, '%')) {
		int has_t = 0;

		for (p = outarg; (p = strchr(p, '%')); p += 2) {
			if (p[1] != 't' && p[1] != 'p' && p[1] != '%') {
				*rc = usage_error("build", "-o %s: a %% not "
						  "followed by t (tid), p (pid) "
						  "or %%", outarg);
				free(pat);
				return NULL;
			}
			has_t |= p[1] == 't';
		}
		if (nthreads > 1 && !has_t) {
			*rc = usage_error("build", "-o %s: %zu threads but no %%t "
					  "(tid) in the pattern", outarg,
					  nthreads);
			free(pat);
			return NULL;
		}
		strcpy(pat, outarg);
		return pat;
	}
	st = stat(outarg, &sb);
	if (outarg[n - 1] == '/' || (st == 0 && S_ISDIR(sb.st_mode))) {
		if (st != 0 || !S_ISDIR(sb.st_mode)) {
			*rc = fail("build", "-o %s: %s", outarg, st != 0 ?
				   strerror(errno) : "not a directory");
			free(pat);
			return NULL;
		}
		p = strrchr(stem, '/');
		e = pat_cat(pat, outarg, SIZE_MAX);
		if (outarg[n - 1] != '/')
			*e++ = '/';
		strcpy(pat_cat(e, p ? p + 1 : stem, SIZE_MAX), ".%t.htr");
		return pat;
	}
	p = strrchr(outarg, '/');
	p = p ? p + 1 : outarg;
	if (strlen(p) > 4 && !strcmp(outarg + n - 4, ".htr")) {
		if (nthreads > 1)
			strcpy(pat_cat(pat, outarg, n - 4), ".%t.htr");
		else
			pat_cat(pat, outarg, SIZE_MAX);
		return pat;
	}
	strcpy(pat_cat(pat, outarg, SIZE_MAX), ".%t.htr");
	return pat;
}

/* The file of thread @tid of process @pid under perf_pattern()'s @pat
 * (malloc'd; NULL: out of memory). */
static char *perf_out_name(const char *pat, uint32_t tid, uint32_t pid)
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

struct perf_build {
	const char *trace, *symfs, *buildid_dir;
	const char **elfs, **raws;
	size_t nelf, nraw;
	const struct htr_build_opts *user;   /* the command line's */
	struct progress *pr;
	int quiet;
	char **warned;                       /* module paths warned of */
	size_t nwarned;
	int filter_warned;
	const char *kcore, *vmlinux;         /* kernel code, if given */
	/* What could not be decoded, for the one line at the end. */
	uint64_t kernel_stretches;           /* user+kernel, no kernel code */
	uint64_t error_gaps, threads_with_errors;
	uint64_t first_error_offset;
	char first_error[96];                /* libipt's reason */
	char first_missing[512];             /* the first module's warning */
	char error_out[256];                 /* a .htr with error gaps */
};

/* Count thread @out's decode errors for what_lost(). */
static void count_lost(struct perf_build *pb, const char *out,
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

/* The one line that says what a perf.data build could not decode: the
 * modules it had no code of, the decode errors, the kernel's stretches
 * of a user+kernel trace without the kernel's code. */
static void what_lost(const struct perf_build *pb)
{
	char more[64] = "";

	if (!pb->nwarned && !pb->error_gaps && !pb->kernel_stretches)
		return;
	fprintf(stderr, "htr: build: warning: %s: not all decoded:",
		pb->trace);
	if (pb->nwarned) {
		if (pb->nwarned > 1)
			snprintf(more, sizeof(more), " %zu modules without "
				 "code, the first:", pb->nwarned);
		fprintf(stderr, "%s %s;", more, pb->first_missing);
	}
	if (pb->error_gaps)
		fprintf(stderr, " %" PRIu64 " decode error%s in %" PRIu64
			" thread%s (%s; 'htr gaps %s' lists them)%s",
			pb->error_gaps, pb->error_gaps == 1 ? "" : "s",
			pb->threads_with_errors,
			pb->threads_with_errors == 1 ? "" : "s",
			pb->first_error, pb->error_out,
			pb->kernel_stretches ? ";" : "");
	if (pb->kernel_stretches)
		fprintf(stderr, " %" PRIu64 " stretches in the kernel, whose "
			"code is not at hand, are gaps named [kernel] (%s)",
			pb->kernel_stretches, pb->kcore || pb->vmlinux ?
			"a CPU-wide recording does not use the kernel's code" :
			"give --kcore DIR or --vmlinux FILE");
	fputc('\n', stderr);
}

/* One warning per missing module, whatever the number of threads. */
static void warn_module(struct perf_build *pb, const char *path,
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
static int check_build_id(struct perf_build *pb,
			  const struct htr_perf_module *m, char **file)
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
 * The kernel's code of a user+kernel recording, if given: --vmlinux FILE
 * at its link address; --kcore DIR, perf record --kcore's copy of
 * /proc/kcore (DIR/kcore_dir/kcore, or DIR/kcore): an ELF core file whose
 * PT_LOAD segments are the kernel's memory at its addresses, each loaded
 * as raw bytes.  Returns 0 or a failure (the message printed).
 */
static int kernel_image(struct perf_build *pb, struct htr_builder *b)
{
	char *path = NULL, spec[4200];
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	FILE *f = NULL;
	unsigned i, n = 0;
	int rc = HTR_EXIT_FAIL;

	if (pb->vmlinux && htr_builder_add_elf(b, pb->vmlinux) < 0)
		return fail("build", "--vmlinux: %s",
			    htr_builder_last_error(b));
	if (!pb->kcore)
		return 0;
	path = malloc(strlen(pb->kcore) + 32);
	if (!path)
		return fail("build", "out of memory");
	sprintf(path, "%s/kcore_dir/kcore", pb->kcore);
	if (access(path, R_OK) < 0)
		sprintf(path, "%s/kcore", pb->kcore);
	f = fopen(path, "rb");
	if (!f) {
		rc = fail("build", "--kcore: %s: %s", path, strerror(errno));
		goto done;
	}
	if (fread(&eh, sizeof(eh), 1, f) != 1 ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph)) {
		rc = fail("build", "--kcore: %s: not a 64-bit ELF core file",
			  path);
		goto done;
	}
	for (i = 0; i < eh.e_phnum; i++) {
		if (fseeko(f, (off_t) (eh.e_phoff + (uint64_t) i * sizeof(ph)),
			   SEEK_SET) != 0 || fread(&ph, sizeof(ph), 1, f) != 1) {
			rc = fail("build", "--kcore: %s: program header %u cut "
				  "short", path, i);
			goto done;
		}
		if (ph.p_type != PT_LOAD || !ph.p_filesz ||
		    !(ph.p_vaddr >> 63))
			continue;
		if (strlen(path) > sizeof(spec) - 64) {
			rc = fail("build", "--kcore: path too long");
			goto done;
		}
		snprintf(spec, sizeof(spec), "%s:0x%" PRIx64 ":0x%" PRIx64
			 "@0x%" PRIx64, path, (uint64_t) ph.p_offset,
			 (uint64_t) ph.p_filesz, (uint64_t) ph.p_vaddr);
		if (htr_builder_add_raw(b, spec) < 0) {
			rc = fail("build", "--kcore: %s",
				  htr_builder_last_error(b));
			goto done;
		}
		n++;
	}
	if (!n) {
		rc = fail("build", "--kcore: %s: no kernel memory in it", path);
		goto done;
	}
	rc = 0;
done:
	if (f)
		fclose(f);
	free(path);
	return rc;
}

/* The image of thread @t: its process's executable mappings. */
static int perf_image(struct perf_build *pb, struct htr_builder *b,
		      const struct htr_perfdata *pd,
		      const struct htr_perf_thread *t)
{
	struct htr_err err;
	uint64_t *bases = calloc(pd->nmodules + 1, sizeof(*bases));
	size_t i, j;
	char *file;

	if (!bases)
		return fail("build", "out of memory");
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
		if (pb->symfs && m->path[0] == '/') {
			file = malloc(strlen(pb->symfs) + strlen(m->path) + 1);
			if (file)
				sprintf(file, "%s%s", pb->symfs, m->path);
		} else {
			file = strdup(m->path);
		}
		if (!file) {
			free(bases);
			return fail("build", "out of memory");
		}
		memset(&err, 0, sizeof(err));
		if (m->build_id_size) {
			int r = check_build_id(pb, m, &file);

			if (r < 0) {
				free(bases);
				free(file);
				return fail("build", "out of memory");
			}
			if (r > 0) {
				free(file);
				continue;
			}
		}
		if (file[0] != '/') {
			/* The vDSO has no file; perf record copies it to its
			 * build-id cache. */
			if (m->build_id_size && own_vdso(b, m) == 0) {
				free(file);
				continue;
			}
			warn_module(pb, m->path, "%s: no file to read its code "
				    "from%s: its code becomes decode gaps",
				    m->build_id_size ? " (not in the build-id "
				    "cache)" : " (no build-id recorded)");
			free(file);
			continue;
		}
		if (access(file, R_OK) < 0) {
			warn_module(pb, file, "module %s not found (%s): its "
				    "code becomes decode gaps", strerror(errno));
			free(file);
			continue;
		}
		if (htr_perfdata__elf_base(file, m, &bases[i], &err) < 0) {
			warn_module(pb, file, "module %s: %s; its code becomes "
				    "decode gaps", err.msg);
			free(file);
			continue;
		}
		/* One ELF per (file, base): perf records a mapping per
		 * segment. */
		for (j = 0; j < i && !dup; j++)
			dup = bases[j] == bases[i] && pd->modules[j].path &&
			      !strcmp(pd->modules[j].path, m->path) &&
			      htr_perfdata__thread_has(pd, t, &pd->modules[j]);
		if (!dup && htr_builder_add_elf_at(b, file, &bases[i]) < 0)
			warn_module(pb, file, "module %s: %s; its code becomes "
				    "decode gaps", htr_builder_last_error(b));
		free(file);
	}
	free(bases);
	for (i = 0; i < pb->nelf; i++)
		if (htr_builder_add_elf(b, pb->elfs[i]) < 0)
			return fail("build", "%s", htr_builder_last_error(b));
	for (i = 0; i < pb->nraw; i++)
		if (htr_builder_add_raw(b, pb->raws[i]) < 0)
			return fail("build", "%s", htr_builder_last_error(b));
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

/* The build options of thread @t: the file's parameters, unless given
 * on the command line. */
static void perf_opts(struct perf_build *pb, const struct htr_perfdata *pd,
		      const struct htr_perf_thread *t,
		      struct htr_build_opts *o)
{
	const struct htr_build_opts *u = pb->user;
	struct htr_err err;
	char filter[512];
	unsigned unplaced = 0;
	int n;

	*o = *u;
	if (!u->nfilters && pd->pt.filter) {
		n = htr_perfdata__filters(pd, t, o->filters, &unplaced, &err);
		o->nfilters = n > 0 ? (unsigned) n : 0;
		if ((n < 0 || unplaced) && !pb->filter_warned && !pb->quiet) {
			if (n < 0)
				fprintf(stderr, "htr: build: warning: %s", err.msg);
			else
				fprintf(stderr, "htr: build: warning: %s: "
					"thread %u never mapped the file of "
					"%u address filter entr%s in '%s'",
					pb->trace, t->tid, unplaced,
					unplaced == 1 ? "y" : "ies",
					htr_err__escape(filter, sizeof(filter),
							pd->pt.filter));
			fprintf(stderr, " (give the ranges with --filter: on "
				"a CPU with erratum SKL014 a disable may "
				"otherwise be placed late)\n");
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

/* Say when a build fell back from what @o asked for: to one decoding
 * thread, or from the walk to libipt's block decoder. */
static void fallback_note(const struct htr_build_opts *o,
			  const struct htr_build_stats *st)
{
	if (o->threads > 1 && st->threads == 1)
		fprintf(stderr, "htr: build: note: decode errors made the %u "
			"threads' chunks disagree: decoded again on one "
			"thread\n", o->threads);
	if (o->decoder != HTR_DECODER_BLOCK &&
	    st->decoder == HTR_DECODER_BLOCK)
		fprintf(stderr, "htr: build: note: the walk met what it does "
			"not follow (16-bit code, VMX, ptwrite, an event "
			"the code does not explain, ...): decoded with "
			"libipt's block decoder\n");
}

/* The summary line of a thread's build; @cpuwide: of a CPU-wide one,
 * whose stats say nothing of threads and decoders (it decodes on one
 * thread, and falls back from the walk CPU by CPU). */
static void perf_summary(const struct perf_build *pb, const char *name,
			 const struct htr_perf_thread *t, const char *out,
			 const struct htr_build_stats *st, double sec,
			 int cpuwide)
{
	struct stat sb;
	uint64_t fsize = stat(out, &sb) == 0 ? (uint64_t) sb.st_size : 0;
	char comm[4 * sizeof(t->comm)];

	if (pb->quiet)
		return;
	fprintf(stderr, "htr: build: %s (pid %u, %s) -> %s: %" PRIu64
		" insns, %" PRIu64 " blocks, depth %u, %" PRIu64 " gaps, %"
		PRIu64 " bytes, %.3f s (commit %.3f s)\n", name, t->pid,
		t->comm[0] ? htr_err__escape(comm, sizeof(comm), t->comm) :
		"?", out, st->insns, st->blocks,
		st->max_depth, st->gaps, fsize, sec, st->commit_ns / 1e9);
	if (!cpuwide)
		fallback_note(pb->user, st);
}

/* Build thread @t of @pd into @out. */
static int perf_thread(struct perf_build *pb, const struct htr_perfdata *pd,
		       const struct htr_perf_thread *t, const char *out)
{
	struct htr_build_opts opts;
	struct htr_thread_info ti;
	struct htr_build_stats st;
	struct htr_builder *b = NULL;
	struct timespec start, end;
	struct htr_perf_joined joined;
	struct htr_err jerr;
	char name[128];
	int err, rc = HTR_EXIT_FAIL;

	perf_opts(pb, pd, t, &opts);
	snprintf(name, sizeof(name), "%s tid %u", pb->trace, t->tid);
	if (same_file(pb->trace, out))
		return usage_error("build", "%s: the output would overwrite "
				   "the trace; give another -o", out);
	if (htr_perfdata__join(pd->data, t->chunks, t->nchunks, &joined,
			       &jerr) != 0)
		return fail("build", "%s: %s", name, jerr.msg);
	if (pd->pt.kernel && !pb->kcore && !pb->vmlinux) {
		struct htr_perf_kstats ks;

		if (htr_perfdata__user_only(&joined, &ks, &jerr) != 0) {
			htr_perfdata__unjoin(&joined);
			return fail("build", "%s: %s", name, jerr.msg);
		}
		pb->kernel_stretches += ks.stretches;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	err = htr_builder_alloc(&b, &opts);
	if (err < 0) {
		rc = fail("build", "%s", htr_errstr(err));
		goto done;
	}
	perf_thread_info(pd, t, &ti);
	if (perf_image(pb, b, pd, t) != 0 ||
	    (err = htr_builder_set_thread(b, &ti)) < 0) {
		if (err < 0)
			rc = fail("build", "%s: %s", name, htr_errstr(err));
		goto done;
	}
	memset(&st, 0, sizeof(st));
	err = htr_builder_run_buffer(b, joined.data, (size_t) joined.size, out, &st,
				     sizeof(st));
	if (pb->pr->printed && pb->pr->tty)
		fputc('\n', stderr);
	if (err == HTR_ERR_CANCELED && stop_signal) {
		fprintf(stderr, "htr: build: %s: interrupted, nothing written\n",
			out);
		htr_builder_free(b);
		htr_perfdata__unjoin(&joined);
		signal(stop_signal, SIG_DFL);
		raise(stop_signal);
		return HTR_EXIT_FAIL;
	}
	if (err < 0) {
		rc = fail("build", "%s: %s", name, htr_builder_last_error(b)[0] ?
			  htr_builder_last_error(b) : htr_errstr(err));
		goto done;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	perf_summary(pb, name, t, out, &st, seconds(&start, &end), 0);
	if (t->aux_truncated || t->aux_lost)
		fprintf(stderr, "htr: build: warning: %s: perf lost trace data "
			"(%" PRIu64 " AUX records truncated, %" PRIu64
			" partial or collided): the tree has gaps there\n",
			name, t->aux_truncated, t->aux_lost);
	warn_result(name, out, &st, 1);
	count_lost(pb, out, &st);
	rc = HTR_EXIT_OK;
done:
	htr_builder_free(b);
	htr_perfdata__unjoin(&joined);
	return rc;
}

/* One process's threads of a CPU-wide recording (cpuwide.h): every CPU
 * decoded with the image of process @pid.  @others gets the tids of
 * other threads found with trace. */
static int cpuwide_pid(struct perf_build *pb, const struct htr_perfdata *pd,
		       uint32_t pid, const char *pattern, int has_tid,
		       uint32_t tid, struct htr_cpuwide_stats *cs,
		       size_t *built)
{
	struct htr_cpuwide_thread *v;
	const struct htr_perf_thread *rep = NULL;
	struct htr_build_opts opts;
	struct htr_builder *b = NULL;
	struct timespec start, end;
	size_t i, n = 0;
	char name[128];
	int err, rc = HTR_EXIT_FAIL;

	v = calloc(pd->nthreads ? pd->nthreads : 1, sizeof(*v));
	if (!v)
		return fail("build", "out of memory");
	for (i = 0; i < pd->nthreads; i++) {
		const struct htr_perf_thread *t = &pd->threads[i];
		char *out;

		if (t->pid != pid || !t->tid || (has_tid && t->tid != tid))
			continue;
		out = perf_out_name(pattern, t->tid, t->pid);
		if (!out) {
			rc = fail("build", "out of memory");
			goto done;
		}
		if (same_file(pb->trace, out)) {
			rc = usage_error("build", "%s: the output would "
					 "overwrite the trace; give another "
					 "-o", out);
			free(out);
			goto done;
		}
		v[n].tid = t->tid;
		v[n].out = out;
		perf_thread_info(pd, t, &v[n].info);
		n++;
		if (!rep)
			rep = t;
	}
	if (!n) {
		rc = HTR_EXIT_OK;
		goto done;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	perf_opts(pb, pd, rep, &opts);
	err = htr_builder_alloc(&b, &opts);
	if (err < 0) {
		rc = fail("build", "%s", htr_errstr(err));
		goto done;
	}
	if (perf_image(pb, b, pd, rep) != 0)
		goto done;
	err = htr_cpuwide__build(b, pd, v, n, cs);
	if (pb->pr->printed && pb->pr->tty)
		fputc('\n', stderr);
	if (err == HTR_ERR_CANCELED && stop_signal) {
		fprintf(stderr, "htr: build: %s: interrupted\n", pb->trace);
		rc = HTR_EXIT_FAIL;
		goto done;
	}
	if (err < 0) {
		rc = fail("build", "%s: %s", pb->trace,
			  htr_builder_last_error(b)[0] ?
			  htr_builder_last_error(b) : htr_errstr(err));
		goto done;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	for (i = 0; i < n; i++) {
		const struct htr_perf_thread *t;

		if (!v[i].built)
			continue;
		(*built)++;
		for (t = pd->threads; t->tid != v[i].tid; t++)
			;
		snprintf(name, sizeof(name), "%s tid %u", pb->trace, t->tid);
		perf_summary(pb, name, t, v[i].out, &v[i].stats,
			     seconds(&start, &end), 1);
		warn_result(name, v[i].out, &v[i].stats, 1);
		count_lost(pb, v[i].out, &v[i].stats);
	}
	rc = HTR_EXIT_OK;
done:
	htr_builder_free(b);
	for (i = 0; i < n; i++)
		free((char *) v[i].out);
	free(v);
	return rc;
}

/* A CPU-wide recording: the threads of the workload's process first, then
 * those of any other process that has trace. */
static int build_cpuwide(struct perf_build *pb, const struct htr_perfdata *pd,
			 const char *pattern, int has_tid, uint32_t tid,
			 size_t *built)
{
	struct htr_cpuwide_stats cs;
	uint32_t *pids = NULL;
	size_t npids = 0, i, j, k;
	int rc = HTR_EXIT_OK;
	uint64_t lost = 0, truncated = 0;

	if (!pd->nswitches)
		return fail("build", "%s: a CPU-wide recording (per-CPU trace "
			    "buffers) without context-switch records%s: the "
			    "threads cannot be told apart; record with perf "
			    "record --per-thread, or with switch events (the "
			    "default since Linux 4.3)", pb->trace,
			    pd->switches_untimed ? " that carry time and CPU" :
			    "");
	if (!pd->pt.present || !pd->pt.tsc)
		return fail("build", "%s: a CPU-wide recording without TSC "
			    "packets: the trace cannot be matched to the "
			    "context switches (record with intel_pt/tsc/u)",
			    pb->trace);
	for (i = 0; i < pd->ncpus; i++) {
		lost += pd->cpus[i].aux_lost;
		truncated += pd->cpus[i].aux_truncated;
	}
	memset(&cs, 0, sizeof(cs));
	pids = malloc((pd->nthreads + 1) * sizeof(*pids));
	if (!pids)
		return fail("build", "out of memory");
	/* The first process named in the file, usually the workload. */
	if (pd->nthreads)
		pids[npids++] = pd->threads[0].pid;
	for (k = 0; k < npids && rc == HTR_EXIT_OK && !stop_signal; k++) {
		rc = cpuwide_pid(pb, pd, pids[k], pattern, has_tid, tid, &cs,
				 built);
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
	if (rc == HTR_EXIT_OK && cs.insns_unknown)
		fprintf(stderr, "htr: build: warning: %s: %" PRIu64 " "
			"instructions ran when no context-switch record says "
			"which thread was on the CPU: left out\n", pb->trace,
			cs.insns_unknown);
	if (rc == HTR_EXIT_OK && (lost || truncated))
		fprintf(stderr, "htr: build: warning: %s: perf lost trace "
			"data (%" PRIu64 " AUX records truncated, %" PRIu64
			" partial or collided): the trees have gaps there\n",
			pb->trace, truncated, lost);
	pb->kernel_stretches += cs.kernel_stretches;
	htr_cpuwide__stats_free(&cs);
	free(pids);
	return rc;
}

/* htr build FILE.data: one .htr per thread, named by perf_pattern() from
 * -o (@outarg, NULL: none) and @stem (NULL: perf_stem() of the trace). */
static int build_perf(struct perf_build *pb, const char *outarg,
		      const char *stem, int has_tid, uint32_t tid)
{
	struct htr_perfdata *pd = NULL;
	struct htr_err err;
	char *pattern = NULL, *defstem = NULL, *out = NULL;
	size_t i, built = 0, nthreads = 0;
	int rc = HTR_EXIT_OK, r;

	memset(&err, 0, sizeof(err));
	if (htr_perfdata__open(&pd, pb->trace, &err) < 0)
		return fail("build", "%s", err.msg);
	if (pd->pt.snapshot_mode)
		fprintf(stderr, "htr: build: warning: %s: snapshot mode: each "
			"thread's snapshots are decoded one after the other\n",
			pb->trace);
	if (!stem)
		stem = defstem = perf_stem(pb->trace);
	if (!stem) {
		rc = fail("build", "out of memory");
		goto done;
	}
	/* The threads to build (CPU-wide: those the file names), known
	 * before anything is written. */
	for (i = 0; i < pd->nthreads; i++) {
		const struct htr_perf_thread *t = &pd->threads[i];

		if ((pd->ncpus ? t->tid != 0 : t->pt_bytes != 0) &&
		    (!has_tid || t->tid == tid))
			nthreads++;
	}
	pattern = perf_pattern(outarg, stem, nthreads, &rc);
	if (!pattern)
		goto done;
	if (pd->ncpus) {
		if (pd->pt.kernel && (pb->kcore || pb->vmlinux))
			fprintf(stderr, "htr: build: note: %s: a CPU-wide "
				"recording: --kcore/--vmlinux are not used "
				"(its threads are told apart where user code "
				"resumes)\n", pb->trace);
		rc = build_cpuwide(pb, pd, pattern, has_tid, tid, &built);
		goto none;
	}
	for (i = 0; i < pd->nthreads; i++) {
		const struct htr_perf_thread *t = &pd->threads[i];

		if (!t->pt_bytes || (has_tid && t->tid != tid))
			continue;
		free(out);
		out = perf_out_name(pattern, t->tid, t->pid);
		if (!out) {
			rc = fail("build", "out of memory");
			goto done;
		}
		r = perf_thread(pb, pd, t, out);
		if (r != HTR_EXIT_OK)
			rc = r;
		else
			built++;
		if (stop_signal)
			break;
	}
none:
	if (!built && rc == HTR_EXIT_OK) {
		if (has_tid)
			rc = fail("build", "%s: no Intel PT trace of thread %u",
				  pb->trace, tid);
		else
			rc = fail("build", "%s: no Intel PT trace of any "
				  "thread", pb->trace);
	}
	if (rc == HTR_EXIT_OK)
		what_lost(pb);
done:
	for (i = 0; i < pb->nwarned; i++)
		free(pb->warned[i]);
	free(pb->warned);
	pb->warned = NULL;
	pb->nwarned = 0;
	free(pattern);
	free(defstem);
	free(out);
	htr_perfdata__close(pd);
	return rc;
}

/* A byte count with an optional K, M or G (powers of 1024). */
static int parse_bytes(const char *s, uint64_t *out)
{
	static const char units[] = "KMG";
	size_t n = strlen(s);
	const char *u = n ? strchr(units, s[n - 1] & ~0x20) : NULL;
	char num[32];
	uint64_t v;
	int shift;

	if (!u || !*u)
		return parse_u64(s, out);
	if (n - 1 >= sizeof(num))
		return -1;
	memcpy(num, s, n - 1);
	num[n - 1] = 0;
	shift = 10 * (int) (u - units + 1);
	if (parse_u64(num, &v) < 0 || v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

int cmd_build(int argc, char **argv)
{
	enum { O_CPU = 256, O_MTC, O_NOM, O_EAX, O_EBX, O_TID, O_SYMFS,
	       O_BUILDID, O_CHUNK, O_DECODER, O_FILTER, O_STOP, O_KCORE,
	       O_VMLINUX };
	static const struct option lopts[] = {
		{ "elf", required_argument, NULL, 'e' },
		{ "raw", required_argument, NULL, 'r' },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "mtc-freq", required_argument, NULL, O_MTC },
		{ "nom-freq", required_argument, NULL, O_NOM },
		{ "cpuid-0x15-eax", required_argument, NULL, O_EAX },
		{ "cpuid-0x15-ebx", required_argument, NULL, O_EBX },
		{ "output", required_argument, NULL, 'o' },
		{ "tid", required_argument, NULL, O_TID },
		{ "symfs", required_argument, NULL, O_SYMFS },
		{ "buildid-dir", required_argument, NULL, O_BUILDID },
		{ "kcore", required_argument, NULL, O_KCORE },
		{ "vmlinux", required_argument, NULL, O_VMLINUX },
		{ "jobs", required_argument, NULL, 'j' },
		{ "chunk-size", required_argument, NULL, O_CHUNK },
		{ "decoder", required_argument, NULL, O_DECODER },
		{ "filter", required_argument, NULL, O_FILTER },
		{ "trace-stop", required_argument, NULL, O_STOP },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_build_opts opts;
	struct htr_build_stats st;
	struct htr_builder *b = NULL;
	struct progress pr;
	struct timespec end;
	const char **elfs = NULL, **raws = NULL;
	const char *symfs = NULL, *buildid_dir = NULL;
	const char *kcore = NULL, *vmlinux = NULL;
	char *home_debug = NULL;
	char *out = NULL, *defout = NULL, *dirdata = NULL;
	int has_tid = 0;
	uint32_t tid = 0;
	size_t nelf = 0, nraw = 0, i;
	int c, quiet = 0, rc = HTR_EXIT_FAIL, err;
	uint64_t v;

	htr_build_opts_init(&opts);
	{
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		opts.threads = n > 1 ? (unsigned) (n > 64 ? 64 : n) : 1;
	}
	elfs = calloc((size_t) argc, sizeof(*elfs));
	raws = calloc((size_t) argc, sizeof(*raws));
	if (!elfs || !raws) {
		rc = fail("build", "out of memory");
		goto done;
	}
	optind = 1;
	opterr = 0;     /* one error line, ours */
	while ((c = getopt_long(argc, argv, ":e:r:o:j:qh", lopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			if (parse_u64(optarg, &v) < 0 || !v || v > 1024) {
				rc = usage_error("build", "--jobs: bad value "
						 "'%s' (1 to 1024)", optarg);
				goto done;
			}
			opts.threads = (unsigned) v;
			break;
		case O_CHUNK:
			if (parse_bytes(optarg, &v) < 0 || !v) {
				rc = usage_error("build", "--chunk-size: bad "
						 "value '%s'",
						 optarg);
				goto done;
			}
			opts.chunk_size = v;
			break;
		case O_DECODER:
			if (!strcmp(optarg, "block")) {
				opts.decoder = HTR_DECODER_BLOCK;
			} else if (!strcmp(optarg, "walk")) {
				opts.decoder = HTR_DECODER_WALK;
			} else {
				rc = usage_error("build", "--decoder: bad value "
						 "'%s' (block or walk)", optarg);
				goto done;
			}
			break;
		case O_FILTER: case O_STOP: {
			struct htr_addr_filter *f = &opts.filters[opts.nfilters];

			if (opts.nfilters == HTR_ADDR_FILTERS_MAX ||
			    parse_range(optarg, &f->start, &f->end) < 0 ||
			    f->end <= f->start) {
				rc = usage_error("build", "--%s: %s '%s'",
						 c == O_FILTER ? "filter" :
						 "trace-stop", opts.nfilters ==
						 HTR_ADDR_FILTERS_MAX ? "more "
						 "than 4 ranges at" : "bad range",
						 optarg);
				goto done;
			}
			f->kind = c == O_FILTER ? HTR_FILTER_TRACE :
						  HTR_FILTER_STOP;
			opts.nfilters++;
			break;
		}
		case 'e': elfs[nelf++] = optarg; break;
		case 'r': raws[nraw++] = optarg; break;
		case 'o': out = optarg; break;
		case 'q': quiet = 1; break;
		case 'h':
			fputs(usage_text, stdout);
			fputs(usage_text2, stdout);
			rc = HTR_EXIT_OK;
			goto done;
		case O_CPU:
			if (parse_cpu(optarg, &opts) < 0) {
				rc = usage_error("build", "--cpu: bad value '%s'",
						 optarg);
				goto done;
			}
			break;
		case O_TID:
			if (parse_u64(optarg, &v) < 0 || v > UINT32_MAX) {
				rc = usage_error("build", "--tid: bad value '%s'",
						 optarg);
				goto done;
			}
			has_tid = 1;
			tid = (uint32_t) v;
			break;
		case O_SYMFS:
			symfs = optarg;
			break;
		case O_BUILDID:
			buildid_dir = optarg;
			break;
		case O_KCORE:
			kcore = optarg;
			break;
		case O_VMLINUX:
			vmlinux = optarg;
			break;
		case O_MTC: case O_NOM: case O_EAX: case O_EBX:
			if (parse_u64(optarg, &v) < 0 ||
			    ((c == O_MTC || c == O_NOM) && v > 255) ||
			    v > UINT32_MAX) {
				rc = usage_error("build", "--%s: bad value '%s'",
						 c == O_MTC ? "mtc-freq" :
						 c == O_NOM ? "nom-freq" :
						 c == O_EAX ? "cpuid-0x15-eax" :
						 "cpuid-0x15-ebx", optarg);
				goto done;
			}
			if (c == O_MTC)
				opts.mtc_freq = (uint8_t) v;
			else if (c == O_NOM)
				opts.nom_freq = (uint8_t) v;
			else if (c == O_EAX)
				opts.cpuid_0x15_eax = (uint32_t) v;
			else
				opts.cpuid_0x15_ebx = (uint32_t) v;
			break;
		default:
			rc = option_error("build", c, argv);
			goto done;
		}
	}
	if (optind + 1 != argc) {
		rc = usage_error("build", optind == argc ? "no TRACE given"
				 : "more than one TRACE given");
		goto done;
	}
	/* perf record --kcore writes a directory: DIR/data, DIR/kcore_dir. */
	{
		struct stat sb;

		if (stat(argv[optind], &sb) == 0 && S_ISDIR(sb.st_mode) &&
		    (dirdata = malloc(strlen(argv[optind]) + 16))) {
			sprintf(dirdata, "%s/data", argv[optind]);
			if (is_perfdata(dirdata)) {
				char *kc = malloc(strlen(argv[optind]) + 32);

				if (kc) {
					sprintf(kc, "%s/kcore_dir/kcore",
						argv[optind]);
					if (!kcore && !vmlinux &&
					    access(kc, R_OK) == 0)
						kcore = argv[optind];
					free(kc);
				}
				/* OUT next to the directory, as for a file. */
				defout = perf_stem(argv[optind]);
				argv[optind] = dirdata;
			}
		}
	}
	if (is_perfdata(argv[optind])) {
		struct perf_build pb;

		memset(&pb, 0, sizeof(pb));
		memset(&pr, 0, sizeof(pr));
		clock_gettime(CLOCK_MONOTONIC, &pr.start);
		pr.last = pr.start;
		pr.tty = isatty(2);
		pr.quiet = quiet;
		opts.progress = on_progress;
		opts.payload = &pr;
		pb.trace = argv[optind];
		pb.symfs = symfs;
		pb.buildid_dir = buildid_dir;
		pb.kcore = kcore;
		pb.vmlinux = vmlinux;
		if (!buildid_dir && getenv("HOME")) {
			home_debug = malloc(strlen(getenv("HOME")) + 8);
			if (home_debug)
				sprintf(home_debug, "%s/.debug", getenv("HOME"));
			pb.buildid_dir = home_debug;
		}
		pb.elfs = elfs;
		pb.raws = raws;
		pb.nelf = nelf;
		pb.nraw = nraw;
		pb.user = &opts;
		pb.pr = &pr;
		pb.quiet = quiet;
		{
			struct sigaction sa;

			memset(&sa, 0, sizeof(sa));
			sa.sa_handler = on_signal;
			sigemptyset(&sa.sa_mask);
			sigaction(SIGINT, &sa, NULL);
			sigaction(SIGTERM, &sa, NULL);
		}
		rc = build_perf(&pb, out, defout, has_tid, tid);
		goto done;
	}
	if (has_tid || symfs || buildid_dir) {
		rc = usage_error("build", "--tid, --symfs and --buildid-dir are "
				 "for perf.data input");
		goto done;
	}
	{
		char why[1200];

		if (not_a_trace(argv[optind], nelf || nraw, why,
				sizeof(why))) {
			rc = fail("build", "%s", why);
			goto done;
		}
	}
	if (!nelf && !nraw) {
		rc = usage_error("build", "no image: give --elf or --raw");
		goto done;
	}
	if (!out)
		out = defout = default_output(argv[optind]);
	if (!out) {
		rc = fail("build", "out of memory");
		goto done;
	}
	if (same_file(argv[optind], out)) {
		rc = usage_error("build", "%s: the output would overwrite the "
				 "trace; give another -o", out);
		goto done;
	}
	for (i = 0; i < nelf + nraw; i++)
		if (spec_is(i < nelf ? elfs[i] : raws[i - nelf], out)) {
			rc = usage_error("build", "%s: the output would "
					 "overwrite an image file; give "
					 "another -o", out);
			goto done;
		}

	memset(&pr, 0, sizeof(pr));
	clock_gettime(CLOCK_MONOTONIC, &pr.start);
	pr.last = pr.start;
	pr.tty = isatty(2);
	pr.quiet = quiet;
	opts.progress = on_progress;
	opts.payload = &pr;
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	err = htr_builder_alloc(&b, &opts);
	if (err < 0) {
		rc = fail("build", "%s", htr_errstr(err));
		goto done;
	}
	for (i = 0; i < nelf; i++)
		if (htr_builder_add_elf(b, elfs[i]) < 0) {
			rc = fail("build", "%s", htr_builder_last_error(b));
			goto done;
		}
	for (i = 0; i < nraw; i++)
		if (htr_builder_add_raw(b, raws[i]) < 0) {
			rc = fail("build", "%s", htr_builder_last_error(b));
			goto done;
		}
	memset(&st, 0, sizeof(st));
	err = htr_builder_run(b, argv[optind], out, &st, sizeof(st));
	if (pr.printed && pr.tty)
		fputc('\n', stderr);
	if (err == HTR_ERR_CANCELED && stop_signal) {
		fprintf(stderr, "htr: build: %s: interrupted, nothing written\n",
			out);
		htr_builder_free(b);
		b = NULL;
		/* Die of the signal, so the caller sees why. */
		signal(stop_signal, SIG_DFL);
		raise(stop_signal);
		goto done;
	}
	if (err == HTR_ERR_DECODE && nelf + nraw) {
		char img[512];

		/* Which image: the library's message names the trace. */
		htr_err__escape(img, sizeof(img), nelf ? elfs[0] : raws[0]);
		rc = fail("build", "%s (--%s %s%s)", htr_builder_last_error(b),
			  nelf ? "elf" : "raw", img,
			  nelf + nraw > 1 ? " and others" : "");
		goto done;
	}
	if (err < 0) {
		rc = fail("build", "%s", htr_builder_last_error(b)[0] ?
			  htr_builder_last_error(b) : htr_errstr(err));
		goto done;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	if (!quiet) {
		struct stat sb;
		double t = seconds(&pr.start, &end);
		uint64_t fsize = stat(out, &sb) == 0 ? (uint64_t) sb.st_size : 0;

		fprintf(stderr, "htr: build: %s -> %s: %" PRIu64 " insns, %"
			PRIu64 " blocks, depth %u, %" PRIu64 " gaps, %" PRIu64
			" bytes (%.1f per block), %.3f s (commit %.3f s), %.1f M"
			" insns/s\n", argv[optind], out, st.insns, st.blocks,
			st.max_depth, st.gaps, fsize,
			st.blocks ? (double) fsize / (double) st.blocks : 0.0,
			t, st.commit_ns / 1e9,
			t > 0 ? (double) st.insns / t / 1e6 : 0.0);
		fallback_note(&opts, &st);
	}
	warn_result(argv[optind], out, &st, 0);
	rc = HTR_EXIT_OK;
done:
	htr_builder_free(b);
	free(home_debug);
	free(defout);
	free(dirdata);
	free(elfs);
	free(raws);
	return rc;
}

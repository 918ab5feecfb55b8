/* What a build tells: its summary lines, warnings and notes, for a raw
 * trace and for each thread of a perf.data (the CLI's side of
 * htr/perf.h's callbacks). */
#include "cmd.h"
#include "summary.h"

#include "htr/htr.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Warnings a build's result calls for: each one line, each a sign that
 * the tree is not what the user wants (wrong image, missing timing
 * options), none a failure.  @perf: a perf.data's thread, whose decode
 * errors the library's one line at the end counts. */
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
	if (st->errors && !perf)
		fprintf(stderr, "htr: build: warning: %" PRIu64 " decode "
			"error%s%s, the first at trace offset 0x%" PRIx64
			": %s; are the --elf/--raw files the recorded code at "
			"its load addresses? ('htr gaps %s' lists them)\n",
			st->errors, st->errors == 1 ? "" : "s",
			st->runaways ? " (the decoder ran away)" : "",
			first.offset, htr_gap_reason(&first), out);
	else if (!st->errors && !st->insns)
		fprintf(stderr, "htr: build: warning: %s: no instruction "
			"decoded\n", trace);
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

struct perf_run {
	const char *trace;
	const struct htr_build_opts *opts;
	struct progress *pr;
	int failed;                /* threads that failed, each said */
};

static void on_warning(int kind, const char *text, void *payload)
{
	struct perf_run *r = payload;

	if (kind == HTR_PERF_WARN_FILTER && r->pr->quiet)
		return;
	progress_end(r->pr);
	fprintf(stderr, "htr: build: %s: %s\n", kind >= HTR_PERF_NOTE ?
		"note" : "warning", text);
}

/* A thread built (its summary line and warnings) or failed. */
static int on_thread(const struct htr_perf_result *t, void *payload)
{
	struct perf_run *r = payload;
	const struct htr_build_stats *st = t->stats;
	char name[128], comm[128];
	struct stat sb;

	progress_end(r->pr);
	if (t->error) {
		r->failed++;
		fail("build", "%s", t->message);
		return stop_signal ? 1 : 0;
	}
	snprintf(name, sizeof(name), "%s tid %u", r->trace, t->tid);
	if (!r->pr->quiet) {
		fprintf(stderr, "htr: build: %s (pid %u, %s) -> %s: %" PRIu64
			" insns, %" PRIu64 " blocks, depth %u, %" PRIu64
			" gaps, %" PRIu64 " bytes, %.3f s (commit %.3f s)\n",
			name, t->pid, t->comm[0] ? htr_escape(comm,
			sizeof(comm), t->comm) : "?", t->out, st->insns,
			st->blocks, st->max_depth, st->gaps, stat(t->out, &sb)
			== 0 ? (uint64_t) sb.st_size : 0, t->ns / 1e9,
			st->commit_ns / 1e9);
		if (!t->cpuwide)
			fallback_note(r->opts, st);
	}
	if (t->aux_truncated || t->aux_lost)
		fprintf(stderr, "htr: build: warning: %s: perf lost trace data "
			"(%" PRIu64 " AUX records truncated, %" PRIu64
			" partial or collided): the tree has gaps there\n",
			name, t->aux_truncated, t->aux_lost);
	warn_result(name, t->out, st, 1);
	return stop_signal ? 1 : 0;
}

/* htr build FILE.data: one .htr per thread (htr/perf.h). */
int build_perf(const char *trace, struct htr_perf_build_opts *po,
		      struct progress *pr)
{
	struct perf_run r = { NULL, po->build, pr, 0 };
	struct htr_perf_info info;
	struct htr_perf *pf = NULL;
	int err, rc = HTR_EXIT_OK;

	po->thread_done = on_thread;
	po->warning = on_warning;
	po->payload = &r;
	if ((err = htr_perf_open(&pf, trace)) < 0 ||
	    (err = htr_perf_info(pf, &info, sizeof(info))) < 0) {
		rc = fail("build", "%s", htr_perf_last_error(pf)[0] ?
			  htr_perf_last_error(pf) : htr_errstr(err));
		goto done;
	}
	r.trace = info.name;
	if ((err = htr_perf_check(pf, po)) < 0) {
		rc = err == HTR_ERR_INVALID ?
		     usage_error("build", "%s", htr_perf_last_error(pf)) :
		     fail("build", "%s", htr_perf_last_error(pf));
		goto done;
	}
	err = htr_perf_build(pf, po);
	progress_end(pr);
	if (err == HTR_ERR_CANCELED && stop_signal) {
		fail("build", "%s", htr_perf_last_error(pf));
		htr_perf_close(pf);
		if (!(info.flags & HTR_PERF_CPUWIDE))
			progress_die();
		return HTR_EXIT_FAIL;
	}
	if (err < 0 && !r.failed)
		fail("build", "%s", htr_perf_last_error(pf));
	rc = err < 0 ? HTR_EXIT_FAIL : HTR_EXIT_OK;
done:
	htr_perf_close(pf);
	return rc;
}

/* The summary line of a raw trace's build, its notes and warnings. */
void report_raw(const char *trace, const char *out,
		const struct htr_build_opts *opts,
		const struct htr_build_stats *st, struct progress *pr)
{
	struct stat sb;
	uint64_t fsize = stat(out, &sb) == 0 ? (uint64_t) sb.st_size : 0;
	struct timespec end;
	double t;

	clock_gettime(CLOCK_MONOTONIC, &end);
	t = progress_seconds(&pr->start, &end);
	if (!pr->quiet) {
		fprintf(stderr, "htr: build: %s -> %s: %" PRIu64 " insns, %"
			PRIu64 " blocks, depth %u, %" PRIu64 " gaps, %" PRIu64
			" bytes (%.1f per block), %.3f s (commit %.3f s), %.1f M"
			" insns/s\n", trace, out, st->insns, st->blocks,
			st->max_depth, st->gaps, fsize,
			st->blocks ? (double) fsize / (double) st->blocks : 0.0,
			t, st->commit_ns / 1e9,
			t > 0 ? (double) st->insns / t / 1e6 : 0.0);
		fallback_note(opts, st);
	}
	warn_result(trace, out, st, 0);
}

/* What htr build tells while and after it builds: the live progress line
 * and stopping on SIGINT or SIGTERM (progress.c), the summary lines,
 * warnings and notes (summary.c). */
#ifndef HTR_TOOL_SUMMARY_H
#define HTR_TOOL_SUMMARY_H

#include <signal.h>
#include <time.h>

struct htr_build_progress;
struct htr_build_opts;
struct htr_build_stats;
struct htr_perf_build_opts;

struct progress {
	struct timespec start, last;
	int tty, quiet;
	int open;               /* a live line is on the terminal */
};

/* The signal that asked the command to stop, 0 if none.  A signal
 * handler can only set a flag: the library sees it at its next progress
 * report, stops, and removes its temporary output itself. */
extern volatile sig_atomic_t stop_signal;

/* Start @pr's clock and catch SIGINT and SIGTERM into stop_signal. */
void progress_start(struct progress *pr, int quiet);
/* The build's progress callback (htr/build.h): "htr: build: 12.5% ..."
 * on stderr, live on a terminal, every 5 s otherwise; 1 (stop) once a
 * signal came.  @payload is a struct progress. */
int progress_build(const struct htr_build_progress *p, void *payload);
/* End the live line, if one is open, before anything else is printed. */
void progress_end(struct progress *pr);
/* Seconds from @a to @b. */
double progress_seconds(const struct timespec *a, const struct timespec *b);
/* Die of stop_signal, as the caller of a stopped command should see. */
void progress_die(void);

/* The summary line of a raw trace's build into @out (@opts as asked,
 * @st as built; @pr's clock), its notes and warnings, on stderr. */
void report_raw(const char *trace, const char *out,
		const struct htr_build_opts *opts,
		const struct htr_build_stats *st, struct progress *pr);
/* htr build FILE.data: htr_perf_build() of @trace with @po (its
 * callbacks and payload are set here), every thread's summary line,
 * warnings and failures on stderr.  Returns the exit status; dies of
 * stop_signal when a per-thread build was interrupted. */
int build_perf(const char *trace, struct htr_perf_build_opts *po,
	       struct progress *pr);
#endif

/* The live progress line and the stop-on-signal of long commands. */
#include "summary.h"

#include "htr/htr.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

void progress_start(struct progress *pr, int quiet)
{
	struct sigaction sa;

	memset(pr, 0, sizeof(*pr));
	clock_gettime(CLOCK_MONOTONIC, &pr->start);
	pr->last = pr->start;
	pr->tty = isatty(2);
	pr->quiet = quiet;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

double progress_seconds(const struct timespec *a, const struct timespec *b)
{
	return (double) (b->tv_sec - a->tv_sec) +
	       (double) (b->tv_nsec - a->tv_nsec) / 1e9;
}

int progress_build(const struct htr_build_progress *p, void *payload)
{
	struct progress *pr = payload;
	struct timespec now;
	double t, frac, eta;

	if (stop_signal)
		return 1;
	if (pr->quiet)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (progress_seconds(&pr->last, &now) < (pr->tty ? 0.25 : 5.0))
		return 0;
	pr->last = now;
	t = progress_seconds(&pr->start, &now);
	frac = p->trace_size ? (double) p->offset / (double) p->trace_size : 0;
	eta = frac > 0 ? t / frac - t : 0;
	fprintf(stderr, "%shtr: build: %5.1f%% %.1f/%.1f MiB, %" PRIu64
		" insns, %.1f M insns/s, ETA %.0f s%s",
		pr->tty ? "\r" : "", 100.0 * frac,
		(double) p->offset / 1048576.0,
		(double) p->trace_size / 1048576.0, p->insns,
		t > 0 ? (double) p->insns / t / 1e6 : 0.0, eta,
		pr->tty ? "  " : "\n");
	pr->open = pr->tty;
	return 0;
}

void progress_end(struct progress *pr)
{
	if (pr->open)
		fputc('\n', stderr);
	pr->open = 0;
}

void progress_die(void)
{
	signal(stop_signal, SIG_DFL);
	raise(stop_signal);
}

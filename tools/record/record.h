/*
 * htr record's engine: run a program under qemu-user, turn every executed
 * guest instruction into the Intel PT a processor would have written, and
 * the ground truth of the execution (tools/synth/TRUTH.md's format).
 *
 * A static library so tests can drive it in-process; `htr record` is its
 * command-line front end.  Nothing here keeps global state: one call of
 * rec_run() owns everything it allocates.  See README.md beside this file.
 */
#ifndef HTR_RECORD_H
#define HTR_RECORD_H

#include <stddef.h>
#include <stdint.h>

/* One IP filter: a module (path or file name; the ranges of its executable
 * segments once it is mapped) or an address range [start, end). */
struct rec_filter {
	const char *module;     /* NULL for an address range */
	uint64_t start, end;
};

struct rec_opts {
	size_t size;                    /* sizeof(struct rec_opts) */
	const char *raw_dir;            /* --raw DIR, or NULL */
	const char *out;                /* perf.data path (when !raw_dir) */
	const struct rec_filter *filters;
	size_t nfilters;
	uint64_t psb_period;            /* bytes between PSB+ */
	int no_ret_compression;
	uint64_t tsc_gran;              /* min ticks between TSC packets */
	const char *qemu;               /* qemu-x86_64 to run */
	int quiet;                      /* no summary on stderr */
	unsigned cpus;                  /* --cpus N: a CPU-wide perf.data of
					 * N modelled CPUs; 0: per-thread */
	int skl014;                     /* a direct jump or call out of the
					 * filters gives TIP.PGD without its
					 * target, as erratum SKL014 may */
	const char *lldb_dir;           /* --lldb DIR: also an LLDB trace
					 * bundle (DIR/trace.json), or NULL;
					 * not with cpus */
	int engine;                     /* REC_ENGINE_*: how qemu says what
					 * the guest ran */
	const char *plugin;             /* the tcg engine's plugin (NULL:
					 * rec_plugin_path()) */
	uint64_t ring;                  /* --ring SIZE: per thread, only the
					 * last SIZE bytes of trace are kept
					 * (PSB-aligned files); 0: all.  Not
					 * with cpus, raw_dir, lldb_dir; the
					 * truth is the window's (OUT.tN.truth,
					 * and one per snapshot), but for
					 * perf_snapshot and no_truth (none) */
	int snapshot_signal;            /* with ring: this signal (0:
					 * SIGUSR1) writes OUT.snapshot.N.data,
					 * the window at that moment */
	uint64_t snapshot_every;        /* with ring: also a snapshot every
					 * this many instructions run (0:
					 * never) */
	int perf_snapshot;              /* with ring: the snapshots go into
					 * OUT as `perf record -S` writes
					 * them (AUX area of ring / 2 bytes,
					 * overwrite mode), the end being the
					 * last one */
	unsigned heartbeat;             /* seconds between heartbeat lines
					 * on stderr while it runs (0: none) */
	int no_truth;                   /* no truth at all (OUT.tN.truth,
					 * raw_dir/tN.truth, --ring's
					 * segments and snapshots' truths);
					 * the traces as without it */
};

/* REC_ENGINE_TCG: htr's TCG plugin in qemu (tools/record/tcg/), tens of
 * millions of instructions a second; REC_ENGINE_LOG: qemu's exec log with
 * -singlestep, parsed (under a million a second). */
#define REC_ENGINE_TCG 0
#define REC_ENGINE_LOG 1
/* The default: tcg when its plugin is there (rec_plugin_path()), else
 * log. */
#define REC_ENGINE_AUTO 2

void rec_opts_init(struct rec_opts *o);

/* The plugin the tcg engine loads: $HTR_RECORD_PLUGIN, else the one built
 * with this recorder, else the installed one; NULL if none exists. */
const char *rec_plugin_path(void);

struct rec_result {
	int exit_status;        /* PROG's exit status when !signal */
	int signal;             /* PROG was killed by this signal, or 0 */
	uint64_t executed;      /* guest instructions run */
	uint64_t traced;        /* instructions in the traces */
	uint64_t bytes;         /* PT bytes written */
	unsigned threads, modules;
	uint64_t oddities;      /* successors qemu gave that no branch explains */
	double seconds;
	unsigned snapshots;     /* --ring: snapshots written */
	uint64_t kept;          /* PT bytes in the output (--ring: the last
				 * window's) */
	int stopped;            /* --ring: the recorder was asked to stop by
				 * this signal (SIGINT, SIGTERM): PROG was
				 * killed and the last window written */
};

/* Run @argv (argv[0] is PROG, resolved on PATH to its real file, which the
 * outputs name; PROG still sees argv[0] as given) and write the outputs.
 * Outputs appear all at once when everything succeeded, never in part.
 * Returns 0 (also when PROG exited non-zero: see res->exit_status), or -1
 * with a one-line reason in @err (PROG killed by a signal is -1 too, with
 * res->signal set). */
int rec_run(const struct rec_opts *o, char *const argv[],
	    struct rec_result *res, char *err, size_t errlen);

#endif

/*
 * Analyzers against the synthesizer's ground truth: cumulative TSC ticks
 * (total, children, local) computed from the truth's TSC_FIRST/TSC_LAST,
 * names and the symbol index from the truth's func table (demangled with
 * libiberty), per-function figures; the sidecar's life: reload, rebuild of
 * the .htr, two processes at once, corruption, read-only directories.
 */
#include "build_truth.h"
#include "htr/htr.h"
#include "report_int.h"
#include "synth.h"
#include "truth.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <libiberty/demangle.h>
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/htr-test-analyze-XXXXXX";

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s", dir, dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(analyze, .init = setup, .fini = teardown);

/* Synthesize into DIR/TAG.*, build DIR/OUT (TAG.htr if NULL). */
static void make(struct synth_opts *o, const char *tag, const char *out,
		 struct truth *t)
{
	char prefix[256], path[300], spec[300], outp[300], err[512];

	snprintf(prefix, sizeof(prefix), "%s/%s", dir, tag);
	cr_assert_eq(synth_run(o, prefix, NULL, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(t, path, err, sizeof(err)), 0, "%s", err);
	snprintf(spec, sizeof(spec), "%s.elf", prefix);
	snprintf(path, sizeof(path), "%s.pt", prefix);
	if (out)
		snprintf(outp, sizeof(outp), "%s/%s", dir, out);
	else
		snprintf(outp, sizeof(outp), "%s.htr", prefix);
	build_with_truth(t, spec, path, outp, NULL);
}

/* make() for a mixed trace of @insns instructions from @seed. */
static void make_mixed(const char *tag, const char *out, uint64_t seed,
		       uint64_t insns, struct truth *t)
{
	struct synth_opts o;

	synth_opts_init(&o);
	o.scenario = SYNTH_MIXED;
	o.seed = seed;
	o.insns = insns;
	make(&o, tag, out, t);
}

static struct htr_file *open_file(const char *name)
{
	char path[300];
	struct htr_file *f = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	rc = htr_file_open(&f, path, NULL);
	cr_assert_eq(rc, 0, "%s: %s", path, f ? htr_file_last_error(f) : "");
	return f;
}

static struct htr_analysis *open_an(struct htr_file *f, const char *sidecar,
				    int no_sidecar)
{
	struct htr_analysis_opts ao;
	struct htr_analysis *a = NULL;
	int rc;

	htr_analysis_opts_init(&ao);
	ao.sidecar = sidecar;
	ao.no_sidecar = no_sidecar;
	rc = htr_analysis_open(&a, f, &ao);
	cr_assert_eq(rc, 0, "analysis: %s", htr_analysis_last_error(a));
	return a;
}

/* Expected figures from the truth alone. */
struct expect {
	uint64_t *total, *children;
	char **name;             /* per block; "~name" for late blocks */
	int64_t *parent;         /* post-order index of the parent, -1 */
	uint32_t *chrono;        /* block indices by pre-order index */
};

static char *demangled(const char *name)
{
	char *d = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);

	return d ? d : strdup(name);
}

/* The start time of late blocks: the trace's start, the truth's TSC_FIRST of
 * any L block (the decoder reports it at instruction 0, from the first
 * PSB+). */
static uint64_t late_start_time(const struct truth *t)
{
	size_t i;

	for (i = 0; i < t->nblocks; i++)
		if (t->blocks[i].flags & TRUTH_LATE)
			return t->blocks[i].tsc_first;
	return 0;
}

static void expect_init(struct expect *e, const struct truth *t)
{
	uint64_t t0 = late_start_time(t);
	uint64_t npre = 0;
	int64_t *post_of_pre;
	size_t i;

	e->total = calloc(t->nblocks + 1, sizeof(*e->total));
	e->children = calloc(t->nblocks + 1, sizeof(*e->children));
	e->name = calloc(t->nblocks + 1, sizeof(*e->name));
	e->parent = calloc(t->nblocks + 1, sizeof(*e->parent));
	for (i = 0; i < t->nblocks; i++)
		if ((uint64_t) t->blocks[i].pre + 1 > npre)
			npre = (uint64_t) t->blocks[i].pre + 1;
	post_of_pre = malloc((npre + 1) * sizeof(*post_of_pre));
	cr_assert(e->total && e->children && e->name && e->parent &&
		  post_of_pre);
	for (i = 0; i <= npre; i++)
		post_of_pre[i] = -1;
	for (i = 0; i < t->nblocks; i++)
		post_of_pre[t->blocks[i].pre] = (int64_t) i;
	e->chrono = malloc((t->nblocks + 1) * sizeof(*e->chrono));
	cr_assert_not_null(e->chrono);
	{
		size_t n = 0;

		for (i = 0; i < npre; i++)
			if (post_of_pre[i] >= 0)
				e->chrono[n++] = (uint32_t) post_of_pre[i];
		cr_assert_eq(n, t->nblocks);
	}
	for (i = 0; i < t->nblocks; i++) {
		const struct truth_block *b = &t->blocks[i];

		uint64_t first = b->flags & TRUTH_LATE ? t0 : b->tsc_first;

		e->total[i] = b->tsc_last > first ? b->tsc_last - first : 0;
		e->parent[i] = b->parent < 0 || (uint64_t) b->parent >= npre ?
			       -1 : post_of_pre[b->parent];
		e->name[i] = demangled(t->funcs[b->func].name);
		/* Late blocks: inferred from an address they ran. */
		if (b->flags & TRUTH_LATE) {
			char *late = malloc(strlen(e->name[i]) + 2);

			cr_assert(late);
			sprintf(late, "~%s", e->name[i]);
			free(e->name[i]);
			e->name[i] = late;
		}
	}
	/* Children come before parents (post-order). */
	for (i = 0; i < t->nblocks; i++)
		if (e->parent[i] >= 0)
			e->children[e->parent[i]] += e->total[i];
	free(post_of_pre);
}

static void expect_free(struct expect *e, const struct truth *t)
{
	size_t i;

	for (i = 0; i < t->nblocks; i++)
		free(e->name[i]);
	free(e->total);
	free(e->children);
	free(e->name);
	free(e->parent);
	free(e->chrono);
}

static void check_tsc(struct htr_analysis *a, const struct truth *t,
		      const struct expect *e, const char *tag)
{
	size_t i;

	for (i = 0; i < t->nblocks; i++) {
		uint64_t total, children, local;
		int rc = htr_tsc_get(a, (uint32_t) i, &total, &children, &local);

		cr_assert_eq(rc, 0, "%s: block %zu: %s", tag, i,
			     htr_analysis_last_error(a));
		cr_assert_eq(total, e->total[i], "%s: block %zu total %" PRIu64
			     ", truth %" PRIu64, tag, i, total, e->total[i]);
		cr_assert_eq(children, e->children[i], "%s: block %zu children "
			     "%" PRIu64 ", truth %" PRIu64, tag, i, children,
			     e->children[i]);
		cr_assert_eq(local, e->total[i] - e->children[i],
			     "%s: block %zu local", tag, i);
	}
	cr_assert_eq(htr_tsc_get(a, (uint32_t) t->nblocks, NULL, NULL, NULL),
		     HTR_ERR_RANGE);
}

struct list {
	uint32_t v[1 << 16];
	size_t n;
};

static int collect(const char *name, uint32_t block, void *payload)
{
	struct list *l = payload;

	(void) name;
	cr_assert_lt(l->n, sizeof(l->v) / sizeof(l->v[0]));
	l->v[l->n++] = block;
	return 0;
}

struct fstat_check {
	const struct truth *t;
	const struct expect *e;
	size_t seen;
};

/* Per-function figures recomputed from the truth. */
static int check_func(const struct htr_func_stats *st, void *payload)
{
	struct fstat_check *c = payload;
	const struct truth *t = c->t;
	const struct expect *e = c->e;
	uint64_t calls = 0, incl = 0, local = 0, slow = 0;
	size_t i;
	int64_t slowest = -1, pre_best = 0;

	for (i = 0; i < t->nblocks; i++) {
		int64_t p;
		int nested = 0;

		if (strcmp(e->name[i], st->name))
			continue;
		calls++;
		local += e->total[i] - e->children[i];
		for (p = e->parent[i]; p >= 0; p = e->parent[p])
			if (!strcmp(e->name[p], st->name))
				nested = 1;
		if (!nested)
			incl += e->total[i];
		/* Slowest: largest total, the earliest (pre-order) on ties. */
		if (slowest < 0 || e->total[i] > slow ||
		    (e->total[i] == slow && t->blocks[i].pre < pre_best)) {
			slow = e->total[i];
			slowest = (int64_t) i;
			pre_best = t->blocks[i].pre;
		}
	}
	cr_assert_gt(calls, 0, "%s: not in the truth", st->name);
	cr_assert_eq(st->calls, calls, "%s calls", st->name);
	cr_assert_eq(st->local, local, "%s local", st->name);
	cr_assert_eq(st->inclusive, incl, "%s inclusive %" PRIu64 ", truth %"
		     PRIu64, st->name, st->inclusive, incl);
	cr_assert_eq(st->slowest_total, slow, "%s slowest", st->name);
	cr_assert_eq(st->slowest, (uint32_t) slowest, "%s slowest block",
		     st->name);
	c->seen++;
	return 0;
}

/* The truth's blocks of @name, chronologically (by pre-order index). */
static size_t truth_list(const struct truth *t, const struct expect *e,
			 const char *pattern, int glob, uint32_t *out)
{
	size_t i, n = 0;

	/* Names in byte order, then blocks chronologically per name: walk
	 * names by repeated minimum. */
	{
		const char *last = NULL;

		for (;;) {
			const char *next = NULL;

			for (i = 0; i < t->nblocks; i++) {
				const char *nm = e->name[i];

				if (glob ? fnmatch(pattern, nm, 0) :
					   strcmp(pattern, nm))
					continue;
				if (last && strcmp(nm, last) <= 0)
					continue;
				if (!next || strcmp(nm, next) < 0)
					next = nm;
			}
			if (!next)
				break;
			for (i = 0; i < t->nblocks; i++)
				if (!strcmp(e->name[e->chrono[i]], next))
					out[n++] = e->chrono[i];
			last = next;
		}
	}
	return n;
}

/* htr_find_visit()'s hits, in its order. */
static int find_hit(const struct htr_find_hit *h, void *payload)
{
	struct list *l = payload;

	cr_assert_lt(l->n, sizeof(l->v) / sizeof(l->v[0]));
	l->v[l->n++] = h->block;
	return 0;
}

/* `htr find` over every block the truth names @glob matches: in time
 * order they come in pre-order (the truth's chronology), in cost order by
 * the truth's total, largest first, then in pre-order; a limit keeps the
 * first ones of that order; and so whether the hits are sorted in memory
 * or in runs spilled to a temporary file and merged. */
static void check_find(struct htr_file *f, struct htr_analysis *a,
		       const struct truth *t, const struct expect *e,
		       const char *glob, const char *tag)
{
	static struct list got;
	static uint32_t want[1 << 16];
	static const uint64_t limits[] = { 0, 1, 5, 37, 1u << 20 };
	/* Runs of so few hits that the sort spills and merges many (0: the
	 * library's own size). */
	static const size_t runs[] = { 0, 1, 3, 64 };
	const size_t nl = sizeof(limits) / sizeof(limits[0]);
	size_t i, j, k, n = 0;
	int order, rc;

	for (i = 0; i < t->nblocks; i++)
		if (!fnmatch(glob, e->name[e->chrono[i]], 0))
			want[n++] = e->chrono[i];
	for (order = HTR_FIND_TIME; order <= HTR_FIND_COST; order++) {
		if (order == HTR_FIND_COST)
			/* Stable: equal totals stay in pre-order. */
			for (i = 1; i < n; i++)
				for (j = i; j > 0 && e->total[want[j - 1]] <
						       e->total[want[j]]; j--) {
					uint32_t x = want[j];

					want[j] = want[j - 1];
					want[j - 1] = x;
				}
		/* every limit with every run size */
		for (k = 0; k < nl * sizeof(runs) / sizeof(runs[0]); k++) {
			uint64_t limit = limits[k % nl];
			size_t run = runs[k / nl];
			size_t m = limit && limit < n ? (size_t) limit : n;

			got.n = 0;
			rc = run ? htr_find__visit(f, a, glob, HTR_MATCH_GLOB,
						   order, limit, run, find_hit,
						   &got)
				 : htr_find_visit(f, a, glob, HTR_MATCH_GLOB,
						  order, limit, find_hit, &got);
			if (!n) {
				cr_assert_eq(rc, HTR_ERR_NOTFOUND);
				continue;
			}
			cr_assert_eq(rc, 0, "%s: find %s: %d", tag, glob, rc);
			cr_assert_eq(got.n, m, "%s: find %s order %d limit "
				     "%" PRIu64 " run %zu: %zu hits, truth %zu",
				     tag, glob, order, limit, run, got.n, m);
			cr_assert_eq(memcmp(got.v, want, m * sizeof(*want)),
				     0, "%s: find %s order %d limit %" PRIu64
				     " run %zu", tag, glob, order, limit, run);
		}
	}
	/* Nowhere to spill: an error that says why, nothing visited. */
	if (n > 1) {
		const char *tmp = getenv("TMPDIR");
		char *keep = tmp ? strdup(tmp) : NULL;

		setenv("TMPDIR", "/nonexistent-htr-dir", 1);
		got.n = 0;
		errno = 0;
		rc = htr_find__visit(f, a, glob, HTR_MATCH_GLOB, HTR_FIND_TIME,
				     0, 1, find_hit, &got);
		cr_assert_eq(rc, HTR_ERR_IO, "%s: find %s: %d", tag, glob, rc);
		cr_assert_eq(errno, ENOENT);
		cr_assert_eq(got.n, 0);
		if (keep)
			setenv("TMPDIR", keep, 1);
		else
			unsetenv("TMPDIR");
		free(keep);
	}
}

static void check_syms(struct htr_file *f, struct htr_analysis *a,
		       const struct truth *t, const struct expect *e,
		       const char *tag)
{
	static struct list got;
	static uint32_t want[1 << 16];
	static const char *globs[] = { "*", "parse_*", "*::*", "?", "[a-l]*",
				       "no_such_function*" };
	struct fstat_check fc = { t, e, 0 };
	size_t i, n;
	int rc;

	cr_assert_lt(t->nblocks, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < t->nblocks; i++) {
		const char *name;

		cr_assert_eq(htr_block_name(a, (uint32_t) i, &name), 0);
		cr_assert_str_eq(name, e->name[i], "%s: block %zu", tag, i);
	}
	/* Exact lookups: every function of the truth's table. */
	for (i = 0; i < t->nfuncs; i++) {
		char *nm = demangled(t->funcs[i].name);

		n = truth_list(t, e, nm, 0, want);
		got.n = 0;
		rc = htr_symidx_find(a, nm, HTR_MATCH_EXACT, collect, &got);
		if (!n) {
			cr_assert_eq(rc, HTR_ERR_NOTFOUND, "%s: %s", tag, nm);
		} else {
			cr_assert_eq(rc, 0, "%s: %s: %d", tag, nm, rc);
			cr_assert_eq(got.n, n, "%s: %s: %zu blocks, truth %zu",
				     tag, nm, got.n, n);
			cr_assert_eq(memcmp(got.v, want, n * sizeof(*want)), 0,
				     "%s: %s: block list", tag, nm);
		}
		free(nm);
	}
	for (i = 0; i < sizeof(globs) / sizeof(globs[0]); i++) {
		n = truth_list(t, e, globs[i], 1, want);
		got.n = 0;
		rc = htr_symidx_find(a, globs[i], HTR_MATCH_GLOB, collect, &got);
		if (!n) {
			cr_assert_eq(rc, HTR_ERR_NOTFOUND, "%s: %s", tag,
				     globs[i]);
			continue;
		}
		cr_assert_eq(rc, 0, "%s: glob %s: %d", tag, globs[i], rc);
		cr_assert_eq(got.n, n, "%s: glob %s: %zu, truth %zu", tag,
			     globs[i], got.n, n);
		cr_assert_eq(memcmp(got.v, want, n * sizeof(*want)), 0,
			     "%s: glob %s: block list", tag, globs[i]);
	}
	check_find(f, a, t, e, "*", tag);
	check_find(f, a, t, e, "[a-l]*", tag);
	rc = htr_func_visit(a, NULL, HTR_MATCH_GLOB, check_func, &fc);
	cr_assert_eq(rc, 0, "%s: %s", tag, htr_analysis_last_error(a));
	cr_assert_gt(fc.seen, 0);
}

static void scenario(enum synth_scenario s)
{
	uint64_t seed;

	for (seed = 1; seed <= 3; seed++) {
		struct synth_opts o;
		struct truth t;
		struct expect e;
		struct htr_file *f;
		struct htr_analysis *a;
		char tag[64], name[80];

		synth_opts_init(&o);
		o.scenario = s;
		o.seed = seed;
		o.insns = 20000 + 7000 * seed;
		snprintf(tag, sizeof(tag), "%s-%" PRIu64,
			 synth_scenario_name(s), seed);
		make(&o, tag, NULL, &t);
		snprintf(name, sizeof(name), "%s.htr", tag);
		expect_init(&e, &t);
		f = open_file(name);

		/* First open computes, the second reloads, both agree with
		 * the truth; so does an in-memory analysis. */
		a = open_an(f, NULL, 0);
		cr_assert_eq(htr_analysis_flags(a) & (HTR_ANALYSIS_COMPUTED |
			     HTR_ANALYSIS_RELOADED | HTR_ANALYSIS_IN_MEMORY),
			     HTR_ANALYSIS_COMPUTED, "%s: %s", tag,
			     htr_analysis_note(a));
		check_tsc(a, &t, &e, tag);
		check_syms(f, a, &t, &e, tag);
		htr_analysis_close(a);

		a = open_an(f, NULL, 0);
		cr_assert_eq(htr_analysis_flags(a) & (HTR_ANALYSIS_COMPUTED |
			     HTR_ANALYSIS_RELOADED), HTR_ANALYSIS_RELOADED);
		check_tsc(a, &t, &e, tag);
		check_syms(f, a, &t, &e, tag);
		htr_analysis_close(a);

		a = open_an(f, NULL, 1);
		cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_IN_MEMORY);
		check_tsc(a, &t, &e, tag);
		check_syms(f, a, &t, &e, tag);
		htr_analysis_close(a);

		htr_file_close(f);
		expect_free(&e, &t);
		truth_free(&t);
	}
}

Test(analyze, basic, .timeout = 300) { scenario(SYNTH_BASIC); }
Test(analyze, nocomp, .timeout = 300) { scenario(SYNTH_NOCOMP); }
Test(analyze, gap, .timeout = 300) { scenario(SYNTH_GAP); }
Test(analyze, overflow, .timeout = 300) { scenario(SYNTH_OVERFLOW); }
Test(analyze, late_start, .timeout = 300) { scenario(SYNTH_LATE_START); }
Test(analyze, abrupt_end, .timeout = 300) { scenario(SYNTH_ABRUPT_END); }
Test(analyze, mixed, .timeout = 300) { scenario(SYNTH_MIXED); }

/* The compute counters the sidecar keeps ("count.tsc", "count.sym"). */
static uint64_t counter(const char *sidecar, const char *key)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k, v;
	uint64_t n = 0;

	cr_assert_eq(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 8);
	cr_assert_eq(mdb_env_open(env, sidecar, MDB_RDONLY, 0), 0);
	cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	cr_assert_eq(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
	k.mv_data = (void *) key;
	k.mv_size = strlen(key);
	if (mdb_get(txn, dbi, &k, &v) == 0 && v.mv_size == 8)
		memcpy(&n, v.mv_data, 8);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return n;
}

/* Rebuilding the .htr from another trace makes the sidecar stale: the
 * next open recomputes and gives the new trace's figures. */
Test(analyze, rebuilt_htr_is_not_reused, .timeout = 300)
{
	struct truth t1, t2;
	struct expect e1, e2;
	struct htr_file *f;
	struct htr_analysis *a;
	char side[300];

	snprintf(side, sizeof(side), "%s/x.htr.lmdb", dir);
	make_mixed("one", "x.htr", 21, 30000, &t1);
	expect_init(&e1, &t1);
	f = open_file("x.htr");
	a = open_an(f, NULL, 0);
	cr_assert_str_eq(htr_analysis_sidecar(a), side);
	check_tsc(a, &t1, &e1, "one");
	htr_analysis_close(a);
	htr_file_close(f);
	cr_assert_eq(counter(side, "count.tsc"), 1);

	make_mixed("two", "x.htr", 22, 30000, &t2);
	expect_init(&e2, &t2);
	f = open_file("x.htr");
	a = open_an(f, NULL, 0);
	cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_COMPUTED);
	cr_assert_not(htr_analysis_flags(a) & HTR_ANALYSIS_RELOADED);
	check_tsc(a, &t2, &e2, "two");
	check_syms(f, a, &t2, &e2, "two");
	htr_analysis_close(a);
	htr_file_close(f);
	cr_assert_eq(counter(side, "count.tsc"), 2);
	cr_assert_eq(counter(side, "count.sym"), 2);
	expect_free(&e1, &t1);
	expect_free(&e2, &t2);
	truth_free(&t1);
	truth_free(&t2);
}

static void probe(const struct truth *t, const struct expect *e,
		  const char *name, int no_memory);

/* Two processes open the same fresh sidecar at the same moment: both get
 * the truth's figures, and the analyzers were computed once. */
Test(analyze, two_processes_compute_once, .timeout = 600)
{
	struct truth t;
	struct expect e;
	char side[300];
	int go[2], k, status;
	pid_t pid[2];

	make_mixed("race", NULL, 5, 400000, &t);
	expect_init(&e, &t);
	snprintf(side, sizeof(side), "%s/race.htr.lmdb", dir);
	cr_assert_eq(pipe(go), 0);
	for (k = 0; k < 2; k++) {
		pid[k] = fork();
		cr_assert_neq(pid[k], -1);
		if (pid[k] == 0) {
			char c;

			close(go[1]);
			/* Wait until the parent lets both go. */
			if (read(go[0], &c, 1) != 0)
				_exit(3);
			probe(&t, &e, "race.htr", 1);
		}
	}
	close(go[0]);
	close(go[1]);
	for (k = 0; k < 2; k++) {
		cr_assert_eq(waitpid(pid[k], &status, 0), pid[k]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "child %d: status %#x", k, status);
	}
	cr_assert_eq(counter(side, "count.tsc"), 1);
	cr_assert_eq(counter(side, "count.sym"), 1);
	expect_free(&e, &t);
	truth_free(&t);
}

/* In a child (no criterion assertions there): open the analyses of
 * DIR/@name and read every block.  Exit 0 when the figures are the truth's
 * (recomputed or reloaded), 1 on a clear error, 4 when computed in memory
 * (if @no_memory), 5 on an error without a message, 6 on a misread. */
static void probe(const struct truth *t, const struct expect *e,
		  const char *name, int no_memory)
{
	struct htr_file *f = NULL;
	struct htr_analysis_opts ao;
	struct htr_analysis *a = NULL;
	char path[300];
	size_t i;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (htr_file_open(&f, path, NULL) < 0)
		_exit(7);
	htr_analysis_opts_init(&ao);
	if (htr_analysis_open(&a, f, &ao) < 0) {
		if (!htr_analysis_last_error(a)[0])
			_exit(5);
		_exit(1);
	}
	for (i = 0; i < t->nblocks; i++) {
		uint64_t total, children;
		const char *name;

		if (htr_tsc_get(a, (uint32_t) i, &total, &children, NULL) < 0 ||
		    htr_block_name(a, (uint32_t) i, &name) < 0)
			_exit(htr_analysis_last_error(a)[0] ? 1 : 5);
		if (total != e->total[i] || children != e->children[i] ||
		    strcmp(name, e->name[i]))
			_exit(6);       /* misread */
	}
	if (no_memory && (htr_analysis_flags(a) & HTR_ANALYSIS_IN_MEMORY))
		_exit(4);
	htr_analysis_close(a);
	htr_file_close(f);
	_exit(0);
}

static int run_probe(const struct truth *t, const struct expect *e)
{
	int status;
	pid_t pid = fork();

	cr_assert_neq(pid, -1);
	if (pid == 0)
		probe(t, e, "c.htr", 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "probe died of signal %d",
		  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert(WEXITSTATUS(status) <= 1, "probe: exit %d",
		  WEXITSTATUS(status));
	return WEXITSTATUS(status);
}

static void copy_file(const char *from, const char *to)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	cr_assert_eq(system(cmd), 0);
}

/* A damaged sidecar gives a clear error or a recompute, never a crash and
 * never wrong figures. */
Test(analyze, corrupt_sidecar, .timeout = 600)
{
	struct truth t;
	struct expect e;
	struct htr_file *f;
	struct htr_analysis *a;
	char data[300], saved[300];
	struct stat sb;
	int fd, i, errors = 0, k;
	uint64_t seed = 12345;

	make_mixed("c", NULL, 9, 60000, &t);
	expect_init(&e, &t);
	f = open_file("c.htr");
	a = open_an(f, NULL, 0);
	htr_analysis_close(a);
	htr_file_close(f);
	snprintf(data, sizeof(data), "%s/c.htr.lmdb/data.mdb", dir);
	snprintf(saved, sizeof(saved), "%s/saved.mdb", dir);
	copy_file(data, saved);
	cr_assert_eq(stat(saved, &sb), 0);
	cr_assert_eq(run_probe(&t, &e), 0);

	/* Truncated: the last pages are missing. */
	cr_assert_eq(truncate(data, sb.st_size / 2), 0);
	errors += run_probe(&t, &e);
	/* Emptied: a new environment, recomputed. */
	cr_assert_eq(truncate(data, 0), 0);
	cr_assert_eq(run_probe(&t, &e), 0);

	/* Flipped bytes all over the file, one region at a time. */
	for (i = 0; i < 60; i++) {
		unsigned char buf[16];

		copy_file(saved, data);
		fd = open(data, O_RDWR);
		cr_assert_geq(fd, 0);
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		{
			off_t at = (off_t) ((seed >> 17) %
					    (uint64_t) (sb.st_size - 16));

			/* Every other probe hits a data page's payload area
			 * rather than anywhere. */
			cr_assert_eq(pread(fd, buf, 16, at), 16);
			for (k = 0; k < 16; k++)
				buf[k] ^= (unsigned char) (0xa5 + k + i);
			cr_assert_eq(pwrite(fd, buf, 16, at), 16);
		}
		close(fd);
		errors += run_probe(&t, &e);
	}
	/* Garbage instead of a sidecar. */
	fd = open(data, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	for (i = 0; i < 4096; i++)
		cr_assert_eq(write(fd, "garbage!", 8), 8);
	close(fd);
	cr_assert_eq(run_probe(&t, &e), 1);
	cr_log_info("corrupt_sidecar: %d clear errors", errors);
	expect_free(&e, &t);
	truth_free(&t);
}

/* A directory nobody may write to: the results are computed in memory and
 * flagged; an existing, current sidecar there is still reloaded. */
Test(analyze, read_only_directory, .timeout = 300)
{
	struct truth t;
	struct expect e;
	struct htr_file *f;
	struct htr_analysis *a;
	char ro[300], side[400];

	make_mixed("ro", NULL, 4, 30000, &t);
	expect_init(&e, &t);
	f = open_file("ro.htr");

	/* A sidecar path that cannot be created (works as root too). */
	a = open_an(f, "/proc/self/htr-no-such/x.lmdb", 0);
	cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_IN_MEMORY);
	cr_assert_neq(htr_analysis_note(a)[0], 0);
	check_tsc(a, &t, &e, "proc");
	check_syms(f, a, &t, &e, "proc");
	htr_analysis_close(a);

	if (geteuid() != 0) {
		snprintf(ro, sizeof(ro), "%s/rodir", dir);
		cr_assert_eq(mkdir(ro, 0755), 0);
		snprintf(side, sizeof(side), "%s/ro.htr.lmdb", ro);
		cr_assert_eq(chmod(ro, 0555), 0);
		a = open_an(f, side, 0);
		cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_IN_MEMORY);
		check_tsc(a, &t, &e, "rodir");
		htr_analysis_close(a);

		/* Computed while writable, then reloaded read-only. */
		cr_assert_eq(chmod(ro, 0755), 0);
		a = open_an(f, side, 0);
		cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_COMPUTED);
		htr_analysis_close(a);
		cr_assert_eq(chmod(side, 0555), 0);
		{
			char p[500];

			snprintf(p, sizeof(p), "%s/data.mdb", side);
			cr_assert_eq(chmod(p, 0444), 0);
			snprintf(p, sizeof(p), "%s/lock.mdb", side);
			cr_assert_eq(chmod(p, 0444), 0);
		}
		cr_assert_eq(chmod(ro, 0555), 0);
		a = open_an(f, side, 0);
		cr_assert_eq(htr_analysis_flags(a) & (HTR_ANALYSIS_RELOADED |
			     HTR_ANALYSIS_IN_MEMORY), HTR_ANALYSIS_RELOADED,
			     "flags %#x: %s", htr_analysis_flags(a),
			     htr_analysis_note(a));
		check_tsc(a, &t, &e, "rodir-reload");
		check_syms(f, a, &t, &e, "rodir-reload");
		htr_analysis_close(a);
		cr_assert_eq(chmod(ro, 0755), 0);
	} else {
		cr_log_info("running as root: chmod cannot make a directory "
			    "read-only; only the uncreatable path is tested");
	}
	htr_file_close(f);
	expect_free(&e, &t);
	truth_free(&t);
}

/* Bad arguments and a failed open leave a handle that explains. */
Test(analyze, api_contract)
{
	struct htr_analysis *a = NULL;
	struct htr_analysis_opts ao;

	cr_assert_eq(htr_analysis_open(NULL, NULL, NULL), HTR_ERR_INVALID);
	cr_assert_eq(htr_analysis_open(&a, NULL, NULL), HTR_ERR_INVALID);
	cr_assert_not_null(a);
	cr_assert_neq(htr_analysis_last_error(a)[0], 0);
	cr_assert_eq(htr_tsc_get(a, 0, NULL, NULL, NULL), HTR_ERR_INVALID);
	htr_analysis_close(a);
	htr_analysis_opts_init(&ao);
	ao.size = 1;
	a = NULL;
	cr_assert_eq(htr_analysis_open(&a, NULL, &ao), HTR_ERR_INVALID);
	htr_analysis_close(a);
	htr_analysis_close(NULL);
	cr_assert_eq(htr_analysis_flags(NULL), 0);
	cr_assert_str_eq(htr_analysis_last_error(NULL), "");
}

/* A sidecar computed while the program's ELF was missing names functions
 * MODULE+0xOFFSET; once the ELF is back the index is recomputed with the
 * real names. */
Test(analyze, names_refresh)
{
	struct synth_opts o;
	struct truth t;
	struct htr_file *f = NULL;
	struct htr_analysis *a = NULL;
	char elf[300], hidden[300], htr[300];
	const char *name;
	uint32_t b;

	synth_opts_init(&o);
	o.seed = 77;
	o.insns = 20000;
	make(&o, "nr", NULL, &t);
	snprintf(elf, sizeof(elf), "%s/nr.elf", dir);
	snprintf(hidden, sizeof(hidden), "%s/nr.elf.hidden", dir);
	snprintf(htr, sizeof(htr), "%s/nr.htr", dir);
	cr_assert_eq(rename(elf, hidden), 0);
	cr_assert_eq(htr_file_open(&f, htr, NULL), 0);
	cr_assert_eq(htr_analysis_open(&a, f, NULL), 0, "%s",
		     htr_analysis_last_error(a));
	cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_SYMS_PARTIAL);
	for (b = 0; b < htr_block_count(f); b++)
		if (htr_block_name(a, b, &name) == 0 && strcmp(name, "?"))
			break;
	cr_assert_not_null(strstr(name, "nr.elf+0x"), "%s", name);
	htr_analysis_close(a);
	cr_assert_eq(rename(hidden, elf), 0);
	cr_assert_eq(htr_analysis_open(&a, f, NULL), 0, "%s",
		     htr_analysis_last_error(a));
	cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_COMPUTED);
	cr_assert(!(htr_analysis_flags(a) & HTR_ANALYSIS_SYMS_PARTIAL));
	cr_assert_eq(htr_block_name(a, b, &name), 0);
	cr_assert_null(strstr(name, "+0x"), "%s", name);
	htr_analysis_close(a);
	htr_file_close(f);
	truth_free(&t);
}

/* --- one store per process, readers per thread --- */

#define NTHREADS 6

struct reader_arg {
	struct htr_store *store;
	const struct truth *t;
	const struct expect *e;
	pthread_barrier_t *bar;
	int rc;                 /* 0 ok, else what went wrong */
	char msg[256];
};

static void *reader_thread(void *p)
{
	struct reader_arg *r = p;
	struct htr_analysis *a = NULL;
	size_t i;

	if (htr_analysis_open_store(&a, r->store, NULL) < 0) {
		r->rc = 1;
		snprintf(r->msg, sizeof(r->msg), "%s",
			 htr_analysis_last_error(a));
	}
	/* Every thread holds its handle (its reader slot) here. */
	pthread_barrier_wait(r->bar);
	pthread_barrier_wait(r->bar);
	for (i = 0; !r->rc && i < r->t->nblocks; i++) {
		uint64_t total, children;
		const char *name;

		if (htr_tsc_get(a, (uint32_t) i, &total, &children, NULL) < 0 ||
		    htr_block_name(a, (uint32_t) i, &name) < 0) {
			r->rc = 2;
			snprintf(r->msg, sizeof(r->msg), "block %zu: %s", i,
				 htr_analysis_last_error(a));
		} else if (total != r->e->total[i] ||
			   children != r->e->children[i] ||
			   strcmp(name, r->e->name[i])) {
			r->rc = 3;
			snprintf(r->msg, sizeof(r->msg), "block %zu misread", i);
		}
	}
	htr_analysis_close(a);
	return NULL;
}

static struct htr_store_info store_info(struct htr_store *s)
{
	struct htr_store_info si;

	cr_assert_eq(htr_store_info(s, &si, sizeof(si)), 0);
	return si;
}

/*
 * Threads of one process read through one store (one LMDB environment)
 * while another process computes the same results: each handle holds one
 * reader slot of this process, every figure is the truth's, and the
 * analyzers were computed once in all.  Closing one handle does not
 * disturb another's reads (two environments in one process would: LMDB's
 * locks are per process).
 */
Test(analyze, one_store_many_threads, .timeout = 600)
{
	struct truth t;
	struct expect e;
	struct htr_file *f;
	struct htr_store *s = NULL;
	struct htr_analysis *a1 = NULL, *a2 = NULL;
	struct reader_arg ra[NTHREADS];
	pthread_t th[NTHREADS];
	pthread_barrier_t bar;
	struct htr_store_info si;
	char side[300];
	int go[2], status, k;
	pid_t pid;
	uint64_t total;

	make_mixed("st", NULL, 15, 300000, &t);
	expect_init(&e, &t);
	snprintf(side, sizeof(side), "%s/st.htr.lmdb", dir);
	f = open_file("st.htr");
	cr_assert_eq(htr_store_open(&s, f, NULL), 0, "%s",
		     htr_store_last_error(s));
	cr_assert_eq(htr_store_flags(s), 0, "%s", htr_store_note(s));
	cr_assert_str_eq(htr_store_sidecar(s), side);
	si = store_info(s);
	cr_assert_eq(si.process_readers, 0);
	cr_assert_gt(si.max_readers, NTHREADS);

	/* The other process: computes through its own store. */
	cr_assert_eq(pipe(go), 0);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		char c;

		close(go[1]);
		if (read(go[0], &c, 1) != 0)
			_exit(3);
		probe(&t, &e, "st.htr", 1);
	}
	close(go[0]);
	cr_assert_eq(pthread_barrier_init(&bar, NULL, NTHREADS + 1), 0);
	close(go[1]);
	for (k = 0; k < NTHREADS; k++) {
		memset(&ra[k], 0, sizeof(ra[k]));
		ra[k].store = s;
		ra[k].t = &t;
		ra[k].e = &e;
		ra[k].bar = &bar;
		cr_assert_eq(pthread_create(&th[k], NULL, reader_thread,
					    &ra[k]), 0);
	}
	pthread_barrier_wait(&bar);
	/* Each handle holds exactly one slot, in this process's name. */
	si = store_info(s);
	cr_assert_eq(si.process_readers, NTHREADS, "%u reader slots",
		     si.process_readers);
	cr_assert_geq(si.readers, NTHREADS);
	pthread_barrier_wait(&bar);
	for (k = 0; k < NTHREADS; k++) {
		cr_assert_eq(pthread_join(th[k], NULL), 0);
		cr_assert_eq(ra[k].rc, 0, "thread %d: %s", k, ra[k].msg);
	}
	pthread_barrier_destroy(&bar);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "other process: status %#x", status);
	si = store_info(s);
	cr_assert_eq(si.process_readers, 0);
	cr_assert_eq(counter(side, "count.tsc"), 1);
	cr_assert_eq(counter(side, "count.sym"), 1);

	/* Two handles, one closed: the other keeps reading. */
	cr_assert_eq(htr_analysis_open_store(&a1, s, NULL), 0);
	cr_assert_eq(htr_analysis_open_store(&a2, s, NULL), 0);
	cr_assert(htr_analysis_flags(a2) & HTR_ANALYSIS_RELOADED);
	cr_assert_eq(store_info(s).process_readers, 2);
	htr_analysis_close(a1);
	cr_assert_eq(store_info(s).process_readers, 1);
	for (k = 0; k < (int) t.nblocks; k++) {
		cr_assert_eq(htr_tsc_get(a2, (uint32_t) k, &total, NULL, NULL),
			     0);
		cr_assert_eq(total, e.total[k]);
	}
	htr_analysis_close(a2);

	/* Past the readers the sidecar holds: HTR_ERR_LIMIT, as store.h
	 * says, and closing a handle makes room again. */
	{
		struct htr_analysis *h[300];
		unsigned max = store_info(s).max_readers, n = 0;
		int rc;

		cr_assert_lt(max, 300);
		while ((rc = htr_analysis_open_store(&h[n], s, NULL)) == 0)
			cr_assert_lt(++n, 300);
		cr_assert_eq(rc, HTR_ERR_LIMIT, "%d: %s", rc,
			     htr_analysis_last_error(h[n]));
		cr_assert(strstr(htr_analysis_last_error(h[n]), "reader"));
		cr_assert_eq(store_info(s).process_readers, n);
		cr_assert_leq(n, max);
		htr_analysis_close(h[n]);
		htr_analysis_close(h[--n]);
		cr_assert_eq(htr_analysis_open_store(&h[n], s, NULL), 0);
		do
			htr_analysis_close(h[n]);
		while (n-- > 0);
	}
	htr_store_close(s);
	htr_file_close(f);
	expect_free(&e, &t);
	truth_free(&t);
}

/* --- the registry: an analyzer registered by the caller --- */

/* "ipb": instructions per block, one u64 LE per block under key "v". */
struct ipb {
	int computes;           /* how often compute() ran */
	uint32_t version;
	int stream;             /* compute() stores "v" when storing */
	int storing;            /* what htr_analyzer_storing() said last */
};

struct ipb_res {
	uint64_t n;
	const uint8_t *v;       /* n u64 LE */
	uint8_t *own;
};

static int ipb_compute(struct htr_analyzer_ctx *ctx, void **result, void *p)
{
	const struct htr_file *f = htr_analyzer_file(ctx);
	struct ipb *ipb = p;
	struct ipb_res *r;
	const void *tsc = NULL;
	uint64_t i;

	if (htr_analyzer_dep(ctx, "tsc", &tsc) < 0 || !tsc)
		return htr_analyzer_fail(ctx, HTR_ERR_INVALID, "no tsc");
	if (htr_analyzer_dep(ctx, "sym", &tsc) != HTR_ERR_NOTFOUND)
		return htr_analyzer_fail(ctx, HTR_ERR_INVALID, "sym is no dep");
	__atomic_add_fetch(&ipb->computes, 1, __ATOMIC_SEQ_CST);
	r = calloc(1, sizeof(*r));
	r->n = htr_block_count(f);
	r->own = malloc(r->n * 8 + 1);
	for (i = 0; i < r->n; i++) {
		struct htr_block_info b;
		uint64_t v;
		int k;

		if (htr_block_get(f, (uint32_t) i, &b, sizeof(b)) < 0)
			return htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "block");
		v = b.last - b.first + 1;
		for (k = 0; k < 8; k++)
			r->own[i * 8 + k] = (uint8_t) (v >> (8 * k));
	}
	r->v = r->own;
	*result = r;
	ipb->storing = htr_analyzer_storing(ctx);
	if (ipb->stream && !ipb->storing &&
	    htr_analyzer_put(ctx, "v", 1, r->v, r->n * 8) != HTR_ERR_INVALID)
		return htr_analyzer_fail(ctx, HTR_ERR_INVALID, "put in memory");
	if (ipb->stream && ipb->storing) {
		int rc = htr_analyzer_put(ctx, "v", 1, r->v, r->n * 8);

		/* Stored: nothing left for encode(). */
		free(r->own);
		r->own = NULL;
		r->v = NULL;
		return rc;
	}
	return 0;
}

static int ipb_encode(struct htr_analyzer_ctx *ctx, const void *result,
		      void *p)
{
	const struct ipb_res *r = result;

	(void) p;
	if (!htr_analyzer_storing(ctx))
		return htr_analyzer_fail(ctx, HTR_ERR_INVALID, "encode does "
					 "not store");
	return r->v ? htr_analyzer_put(ctx, "v", 1, r->v, r->n * 8) : 0;
}

static int ipb_decode(struct htr_analyzer_ctx *ctx, void **result, void *p)
{
	struct ipb_res *r = calloc(1, sizeof(*r));
	const void *v;
	size_t len;
	int rc;

	(void) p;
	*result = r;
	r->n = htr_block_count(htr_analyzer_file(ctx));
	rc = htr_analyzer_value(ctx, "v", 1, &v, &len);
	if (rc < 0 || len != r->n * 8)
		return htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "%s: ipb damaged",
					 htr_analyzer_sidecar(ctx));
	r->v = v;
	return 0;
}

static void ipb_free(void *result, void *p)
{
	struct ipb_res *r = result;

	(void) p;
	if (r)
		free(r->own);
	free(r);
}

static void ipb_descriptor(struct htr_analyzer *d, struct ipb *ipb)
{
	static const char *const deps[] = { "tsc", NULL };

	htr_analyzer_init(d);
	d->name = "ipb";
	d->version = ipb->version;
	d->deps = deps;
	d->compute = ipb_compute;
	d->encode = ipb_encode;
	d->decode = ipb_decode;
	d->free = ipb_free;
	d->payload = ipb;
}

static void check_ipb(struct htr_file *f, const struct ipb_res *r)
{
	uint64_t i;

	cr_assert_eq(r->n, htr_block_count(f));
	for (i = 0; i < r->n; i++) {
		struct htr_block_info b;
		uint64_t v = 0;
		int k;

		cr_assert_eq(htr_block_get(f, (uint32_t) i, &b, sizeof(b)), 0);
		for (k = 0; k < 8; k++)
			v |= (uint64_t) r->v[i * 8 + k] << (8 * k);
		cr_assert_eq(v, b.last - b.first + 1, "block %" PRIu64, i);
	}
}

/* Open a store over @f with "ipb" registered, a reader over it, and get
 * "ipb" (GetOrCreate); the caller closes both. */
static const struct ipb_res *get_ipb(struct htr_file *f, struct ipb *ipb,
				     int no_sidecar, struct htr_store **s,
				     struct htr_analysis **a)
{
	struct htr_store_opts so;
	struct htr_analysis_opts ao;
	struct htr_analyzer d;
	const void *res = NULL;

	htr_store_opts_init(&so);
	so.no_sidecar = no_sidecar;
	*s = NULL;
	*a = NULL;
	cr_assert_eq(htr_store_open(s, f, &so), 0, "%s",
		     htr_store_last_error(*s));
	ipb_descriptor(&d, ipb);
	cr_assert_eq(htr_store_register(*s, &d), 0);
	htr_analysis_opts_init(&ao);
	ao.analyzers = HTR_ANALYZE_TSC;
	cr_assert_eq(htr_analysis_open_store(a, *s, &ao), 0, "%s",
		     htr_analysis_last_error(*a));
	cr_assert_eq(htr_store_get(*s, "ipb", *a, &res), 0, "%s",
		     htr_analysis_last_error(*a));
	cr_assert_not_null(res);
	return res;
}

/* A compute() that stores its values itself when the sidecar is
 * written (htr_analyzer_storing()), and keeps them when it is not. */
Test(analyze, registry_storing_compute, .timeout = 300)
{
	struct truth t;
	struct htr_file *f;
	struct htr_store *s;
	struct htr_analysis *a;
	struct ipb ipb = { 0, 1, 1, -1 };
	const struct ipb_res *r;
	char side[300];

	make_mixed("ipbs", NULL, 37, 40000, &t);
	snprintf(side, sizeof(side), "%s/ipbs.htr.lmdb", dir);
	f = open_file("ipbs.htr");
	/* In memory: not storing, the result is read as computed. */
	r = get_ipb(f, &ipb, 1, &s, &a);
	cr_assert_eq(ipb.storing, 0);
	check_ipb(f, r);
	htr_analysis_close(a);
	htr_store_close(s);
	/* Sidecar: stored during compute(), decoded from there. */
	r = get_ipb(f, &ipb, 0, &s, &a);
	cr_assert_eq(ipb.storing, 1);
	cr_assert_eq(ipb.computes, 2);
	check_ipb(f, r);
	htr_analysis_close(a);
	htr_store_close(s);
	r = get_ipb(f, &ipb, 0, &s, &a);
	cr_assert_eq(ipb.computes, 2);
	cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_RELOADED);
	check_ipb(f, r);
	htr_analysis_close(a);
	htr_store_close(s);
	cr_assert_eq(counter(side, "count.ipb"), 1);
	htr_file_close(f);
	truth_free(&t);
}

Test(analyze, registry_third_analyzer, .timeout = 300)
{
	struct truth t;
	struct htr_file *f;
	struct htr_store *s;
	struct htr_analysis *a;
	struct htr_analyzer d;
	struct ipb ipb = { 0, 1, 0, 0 };
	const struct ipb_res *r;
	const void *again = NULL;
	char side[300];

	make_mixed("ipb", NULL, 31, 40000, &t);
	snprintf(side, sizeof(side), "%s/ipb.htr.lmdb", dir);
	f = open_file("ipb.htr");

	/* First open: computed once, stored; a second get is the same. */
	r = get_ipb(f, &ipb, 0, &s, &a);
	check_ipb(f, r);
	cr_assert_eq(ipb.computes, 1);
	cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_COMPUTED);
	cr_assert_eq(htr_store_get(s, "ipb", a, &again), 0);
	cr_assert_eq(again, (const void *) r);
	cr_assert_eq(ipb.computes, 1);
	/* Registration is checked; unknown names are not found. */
	ipb_descriptor(&d, &ipb);
	cr_assert_eq(htr_store_register(s, &d), HTR_ERR_INVALID);
	d.name = "Bad-Name";
	cr_assert_eq(htr_store_register(s, &d), HTR_ERR_INVALID);
	d.name = "nodecode";
	d.decode = NULL;
	cr_assert_eq(htr_store_register(s, &d), HTR_ERR_INVALID);
	cr_assert_eq(htr_store_get(s, "nosuch", a, &again), HTR_ERR_NOTFOUND);
	cr_assert_neq(htr_analysis_last_error(a)[0], 0);
	htr_analysis_close(a);
	htr_store_close(s);
	cr_assert_eq(counter(side, "count.ipb"), 1);
	cr_assert_eq(counter(side, "count.tsc"), 1);

	/* Second open (a new store, as another process would): reloaded. */
	r = get_ipb(f, &ipb, 0, &s, &a);
	check_ipb(f, r);
	cr_assert_eq(ipb.computes, 1);
	cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_RELOADED);
	cr_assert_not(htr_analysis_flags(a) & HTR_ANALYSIS_COMPUTED);
	htr_analysis_close(a);
	htr_store_close(s);

	/* The built-in analyzers are untouched by it. */
	a = open_an(f, NULL, 0);
	cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_COMPUTED);
	htr_analysis_close(a);
	cr_assert_eq(counter(side, "count.tsc"), 1);
	cr_assert_eq(counter(side, "count.sym"), 1);

	/* A new version of it: recomputed once, then reloaded. */
	ipb.version = 2;
	r = get_ipb(f, &ipb, 0, &s, &a);
	check_ipb(f, r);
	cr_assert_eq(ipb.computes, 2);
	htr_analysis_close(a);
	htr_store_close(s);
	r = get_ipb(f, &ipb, 0, &s, &a);
	cr_assert_eq(ipb.computes, 2);
	htr_analysis_close(a);
	htr_store_close(s);
	cr_assert_eq(counter(side, "count.ipb"), 2);

	/* Without a sidecar: computed in memory, never encoded. */
	r = get_ipb(f, &ipb, 1, &s, &a);
	check_ipb(f, r);
	cr_assert_eq(ipb.computes, 3);
	cr_assert(htr_analysis_flags(a) & HTR_ANALYSIS_IN_MEMORY);
	htr_analysis_close(a);
	htr_store_close(s);

	htr_file_close(f);
	truth_free(&t);
}

/*
 * The callback contract (htr/common.h, "Callbacks") through the public API
 * only: a progress callback cancels a build (positive: HTR_ERR_CANCELED;
 * the caller's own negative code comes back unchanged; a value in libhtr's
 * range becomes HTR_ERR_CALLBACK), and nothing is left behind; visitors of
 * the tree and of the analyses stop with their positive value, return the
 * caller's codes unchanged and never pass off a callback's value as one of
 * libhtr's errors.
 */
#include "build_truth.h"
#include "htr/htr.h"
#include "synth.h"
#include "truth.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/htr-test-callbacks-XXXXXX";
static char sample_htr[512];

static void setup(void)
{
	const char *root = getenv("HTR_SOURCE_ROOT");

	cr_assert_not_null(root);
	snprintf(sample_htr, sizeof(sample_htr), "%s/tests/data/sample.htr",
		 root);
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(callbacks, .init = setup, .fini = teardown);

/* Files in DIR (the directory itself excluded). */
static int count_files(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

struct stopper {
	int after;      /* reports to let pass */
	int value;      /* then return this */
	int calls;
};

static int on_progress(const struct htr_build_progress *p, void *payload)
{
	struct stopper *s = payload;

	cr_assert_leq(p->offset, p->trace_size);
	return s->calls++ < s->after ? 0 : s->value;
}

static int build(const struct truth *t, struct stopper *s, const char *out,
		 unsigned threads)
{
	struct htr_build_opts bo;
	struct htr_builder *b = NULL;
	char elf[300], pt[300];
	int rc;

	snprintf(elf, sizeof(elf), "%s/long.elf", dir);
	snprintf(pt, sizeof(pt), "%s/long.pt", dir);
	htr_build_opts_init(&bo);
	bo.cpuid_0x15_eax = t->cpuid_eax;
	bo.cpuid_0x15_ebx = t->cpuid_ebx;
	bo.mtc_freq = (uint8_t) t->mtc_freq;
	bo.nom_freq = (uint8_t) t->nom_freq;
	bo.progress = on_progress;
	bo.payload = s;
	bo.threads = threads;
	cr_assert_eq(htr_builder_alloc(&b, &bo), 0);
	cr_assert_eq(htr_builder_add_elf(b, elf), 0, "%s",
		     htr_builder_last_error(b));
	rc = htr_builder_run(b, pt, out, NULL, 0);
	if (rc < 0)
		cr_assert_neq(htr_builder_last_error(b)[0], 0);
	htr_builder_free(b);
	return rc;
}

Test(callbacks, progress_cancels_a_build, .timeout = 300)
{
	struct synth_opts o;
	struct truth t;
	char prefix[300], path[320], err[512], out[300];
	struct stat sb;
	struct stopper s;
	unsigned threads;
	int files;

	synth_opts_init(&o);
	o.seed = 3;
	o.insns = 2500000;
	snprintf(prefix, sizeof(prefix), "%s/long", dir);
	cr_assert_eq(synth_run(&o, prefix, NULL, err, sizeof(err)), 0, "%s",
		     err);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(&t, path, err, sizeof(err)), 0, "%s", err);
	snprintf(out, sizeof(out), "%s/long.htr", dir);
	files = count_files();

	/* On one thread, two and three (the calling thread builds the tree,
	 * decodes chunks too and reports progress). */
	for (threads = 1; threads <= 3; threads++) {
		/* Positive: canceled, nothing written, no temporary left. */
		memset(&s, 0, sizeof(s));
		s.after = 1;
		s.value = 1;
		cr_assert_eq(build(&t, &s, out, threads), HTR_ERR_CANCELED);
		cr_assert_eq(s.calls, 2, "the build went on after the stop");
		cr_assert_neq(stat(out, &sb), 0,
			      "a canceled build left its output");
		cr_assert_eq(count_files(), files, "a canceled build left a file");

		/* The caller's own code comes back unchanged. */
		memset(&s, 0, sizeof(s));
		s.value = HTR_ERR_USER - 34;
		cr_assert_eq(build(&t, &s, out, threads), HTR_ERR_USER - 34);
		cr_assert_eq(count_files(), files);

		/* A value in libhtr's range would read as HTR_ERR_CORRUPT. */
		memset(&s, 0, sizeof(s));
		s.value = HTR_ERR_CORRUPT;
		cr_assert_eq(build(&t, &s, out, threads), HTR_ERR_CALLBACK);
		cr_assert_eq(count_files(), files);

		/* Going on: a complete build. */
		memset(&s, 0, sizeof(s));
		s.after = 1 << 30;
		cr_assert_eq(build(&t, &s, out, threads), 0);
		cr_assert_geq(s.calls, 2);
		cr_assert_eq(stat(out, &sb), 0);
		cr_assert_eq(unlink(out), 0);
	}
	truth_free(&t);
}

struct visit_stop {
	int after, value, calls;
};

static int visitor(const struct htr_file *f, uint32_t block, uint32_t parent,
		   uint32_t level, void *payload)
{
	struct visit_stop *v = payload;

	(void) f;
	(void) block;
	(void) parent;
	(void) level;
	return v->calls++ < v->after ? 0 : v->value;
}

static int func_cb(const struct htr_func_stats *st, void *payload)
{
	struct visit_stop *v = payload;

	cr_assert_geq(st->size, sizeof(size_t));
	return v->calls++ < v->after ? 0 : v->value;
}

static int sym_cb(const char *name, uint32_t block, void *payload)
{
	struct visit_stop *v = payload;

	(void) name;
	(void) block;
	return v->calls++ < v->after ? 0 : v->value;
}

enum { TREE, FUNCS, SYMS };

static int walk(int kind, struct htr_file *f, struct htr_analysis *a,
		int after, int value, int *calls)
{
	struct visit_stop v = { after, value, 0 };
	int rc;

	if (kind == TREE)
		rc = htr_tree_visit(f, HTR_NONE, HTR_PREORDER, visitor, &v);
	else if (kind == FUNCS)
		rc = htr_func_visit(a, NULL, HTR_MATCH_GLOB, func_cb, &v);
	else
		rc = htr_symidx_find(a, "*", HTR_MATCH_GLOB, sym_cb, &v);
	*calls = v.calls;
	return rc;
}

Test(callbacks, visitors_stop_and_keep_their_codes)
{
	struct htr_analysis_opts ao;
	struct htr_analysis *a = NULL;
	struct htr_file *f = NULL;
	int kind, calls, all;

	cr_assert_eq(htr_file_open(&f, sample_htr, NULL), 0);
	htr_analysis_opts_init(&ao);
	ao.no_sidecar = 1;
	cr_assert_eq(htr_analysis_open(&a, f, &ao), 0, "%s",
		     htr_analysis_last_error(a));
	for (kind = TREE; kind <= SYMS; kind++) {
		/* Completed: 0, never a count. */
		cr_assert_eq(walk(kind, f, a, 1 << 30, 1, &all), 0);
		cr_assert_gt(all, 3);
		/* Positive values stop at once and come back. */
		cr_assert_eq(walk(kind, f, a, 2, 1, &calls), 1);
		cr_assert_eq(calls, 3);
		cr_assert_eq(walk(kind, f, a, 0, 77, &calls), 77);
		cr_assert_eq(calls, 1);
		/* The caller's own negative codes too. */
		cr_assert_eq(walk(kind, f, a, 1, HTR_ERR_USER, &calls),
			     HTR_ERR_USER);
		cr_assert_eq(walk(kind, f, a, 1, -123456, &calls), -123456);
		cr_assert_eq(calls, 2);
		/* Values in libhtr's range never pass for its errors. */
		cr_assert_eq(walk(kind, f, a, 1, HTR_ERR_CORRUPT, &calls),
			     HTR_ERR_CALLBACK, "kind %d", kind);
		cr_assert_eq(walk(kind, f, a, 1, -1, &calls),
			     HTR_ERR_CALLBACK);
		cr_assert_eq(calls, 2);
	}
	htr_analysis_close(a);
	htr_file_close(f);
}

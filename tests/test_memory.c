/*
 * Builds from memory and to memory, through the public API only: a trace
 * in a buffer gives the same tree as the file (and the buffer is left
 * untouched), code bytes in memory the same as the raw file, an ELF path
 * with '@' loads at a numeric base, no_fsync/no_sweep, and an .htr held in
 * memory opens, reads and analyses like the file, with every truncation
 * refused.  Expected trees come from the file builds (themselves checked
 * against the truth by the build suite) and from the truth's counts.
 */
#include "build_truth.h"
#include "htr/htr.h"
#include "synth.h"
#include "truth.h"
#include "tmpdir.h"
#include "slurp.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

HTR_TEST_TMPDIR(memory);

#define BASE 0x555555554000ull

/* Synthesize DIR/@tag.{elf,pt,truth} at BASE; fills @t. */
static void synth(const char *tag, uint64_t insns, struct truth *t)
{
	struct synth_opts o;
	char prefix[300], path[320], err[512];

	synth_opts_init(&o);
	o.scenario = SYNTH_MIXED;
	o.seed = 11;
	o.insns = insns;
	o.base = BASE;
	snprintf(prefix, sizeof(prefix), "%s/%s", dir, tag);
	cr_assert_eq(synth_run(&o, prefix, NULL, err, sizeof(err)), 0, "%s",
		     err);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(t, path, err, sizeof(err)), 0, "%s", err);
}

static struct htr_builder *builder(const struct truth *t,
				   struct htr_build_opts *bo)
{
	struct htr_build_opts d;
	struct htr_builder *b = NULL;

	if (!bo) {
		htr_build_opts_init(&d);
		bo = &d;
	}
	bo->cpuid_0x15_eax = t->cpuid_eax;
	bo->cpuid_0x15_ebx = t->cpuid_ebx;
	bo->mtc_freq = (uint8_t) t->mtc_freq;
	bo->nom_freq = (uint8_t) t->nom_freq;
	cr_assert_eq(htr_builder_alloc(&b, bo), 0);
	return b;
}

static struct htr_file *open_path(const char *path)
{
	struct htr_file *f = NULL;

	cr_assert_eq(htr_file_open(&f, path, NULL), 0, "%s: %s", path,
		     htr_file_last_error(f));
	return f;
}

/* Same tree: counts, every block, the gaps. */
static void same_tree(const struct htr_file *x, const struct htr_file *y)
{
	uint32_t i;

	cr_assert_eq(htr_block_count(x), htr_block_count(y));
	cr_assert_eq(htr_gap_count(x), htr_gap_count(y));
	for (i = 0; i < htr_block_count(x); i++) {
		struct htr_block_info a, b;

		cr_assert_eq(htr_block_get(x, i, &a, sizeof(a)), 0);
		cr_assert_eq(htr_block_get(y, i, &b, sizeof(b)), 0);
		cr_assert(a.first == b.first && a.last == b.last &&
			  a.parent == b.parent && a.flags == b.flags &&
			  a.nchildren == b.nchildren, "block %u differs", i);
	}
}

static int progress_calls(const struct htr_build_progress *p, void *payload)
{
	struct htr_build_progress *last = payload;

	cr_assert_leq(p->offset, p->trace_size);
	*last = *p;
	return 0;
}

Test(memory, run_buffer_is_run, .timeout = 300)
{
	struct truth t;
	struct htr_build_opts bo;
	struct htr_build_progress last;
	struct htr_build_stats st;
	struct htr_builder *b;
	struct htr_file_info fa, fb;
	struct htr_file *fx, *fy;
	char elf[300], pt[300], a[300], bb[300];
	uint8_t *trace, *copy;
	size_t size;

	synth("run", 1500000, &t);
	snprintf(elf, sizeof(elf), "%s/run.elf@0x%llx", dir,
		 (unsigned long long) BASE);
	snprintf(pt, sizeof(pt), "%s/run.pt", dir);
	snprintf(a, sizeof(a), "%s/file.htr", dir);
	snprintf(bb, sizeof(bb), "%s/buffer.htr", dir);
	build_with_truth(&t, elf, pt, a, NULL);

	trace = htr_test_slurp(pt, &size);
	cr_assert_not_null(trace, "%s", pt);
	copy = malloc(size);
	memcpy(copy, trace, size);
	htr_build_opts_init(&bo);
	memset(&last, 0, sizeof(last));
	bo.progress = progress_calls;
	bo.payload = &last;
	b = builder(&t, &bo);
	cr_assert_eq(htr_builder_add_elf(b, elf), 0);
	memset(&st, 0, sizeof(st));
	cr_assert_eq(htr_builder_run_buffer(b, trace, size, bb, &st,
					    sizeof(st)), 0, "%s",
		     htr_builder_last_error(b));
	cr_assert_eq(st.trace_size, size);
	cr_assert_eq(st.insns, t.insns);
	cr_assert_eq(last.trace_size, size, "progress saw the buffer's size");
	cr_assert_eq(memcmp(trace, copy, size), 0, "the buffer was changed");
	/* Bad arguments. */
	cr_assert_eq(htr_builder_run_buffer(b, NULL, size, bb, NULL, 0),
		     HTR_ERR_INVALID);
	cr_assert_eq(htr_builder_run_buffer(b, trace, 0, bb, NULL, 0),
		     HTR_ERR_DECODE);
	cr_assert_str_eq(htr_builder_last_error(b), "(memory): empty trace");
	htr_builder_free(b);

	fx = open_path(a);
	fy = open_path(bb);
	same_tree(fx, fy);
	cr_assert_eq(htr_file_info(fx, &fa, sizeof(fa)), 0);
	cr_assert_eq(htr_file_info(fy, &fb, sizeof(fb)), 0);
	cr_assert_eq(fa.trace_hash, fb.trace_hash);
	cr_assert_eq(fa.body_hash, fb.body_hash);
	htr_file_close(fx);
	htr_file_close(fy);
	free(trace);
	free(copy);
	truth_free(&t);
}

/* Code bytes from memory give the tree the same bytes from the file give
 * as raw dumps; an ELF path containing '@' loads at a numeric base. */
Test(memory, images_from_bytes_and_odd_paths, .timeout = 300)
{
	struct truth t;
	struct htr_builder *b;
	struct htr_file *f, *fr, *fm;
	struct htr_image_info im;
	char elf[300], odd[300], pt[300], ref[300], raw[300], mem[300];
	char spec[400], cmd[700];
	uint8_t *bytes;
	size_t size;
	uint64_t base = BASE, i, n;

	synth("img", 100000, &t);
	snprintf(elf, sizeof(elf), "%s/img.elf", dir);
	snprintf(odd, sizeof(odd), "%s/odd@name.elf", dir);
	snprintf(pt, sizeof(pt), "%s/img.pt", dir);
	snprintf(ref, sizeof(ref), "%s/ref.htr", dir);
	snprintf(raw, sizeof(raw), "%s/raw.htr", dir);
	snprintf(mem, sizeof(mem), "%s/mem.htr", dir);
	snprintf(spec, sizeof(spec), "%s@0x%llx", elf, (unsigned long long) BASE);
	build_with_truth(&t, spec, pt, ref, NULL);
	snprintf(cmd, sizeof(cmd), "cp %s '%s'", elf, odd);
	cr_assert_eq(system(cmd), 0);

	/* "odd@name.elf" cannot be given as a spec... */
	b = builder(&t, NULL);
	cr_assert_lt(htr_builder_add_elf(b, odd), 0);
	/* ...but as a path and a base it loads. */
	cr_assert_eq(htr_builder_add_elf_at(b, odd, &base), 0, "%s",
		     htr_builder_last_error(b));
	snprintf(spec, sizeof(spec), "%s/odd.htr", dir);
	cr_assert_eq(htr_builder_run(b, pt, spec, NULL, 0), 0, "%s",
		     htr_builder_last_error(b));
	htr_builder_free(b);
	f = open_path(ref);
	fr = open_path(spec);
	same_tree(f, fr);
	cr_assert_eq(htr_image_get(fr, 0, &im, sizeof(im)), 0);
	cr_assert(im.path_len >= 12 &&
		  !memcmp(im.path + im.path_len - 12, "odd@name.elf", 12));
	htr_file_close(fr);

	/* The reference's code pieces as raw files, then as bytes. */
	bytes = htr_test_slurp(elf, &size);
	cr_assert_not_null(bytes, "%s", elf);
	n = htr_image_count(f);
	cr_assert_gt(n, 0);
	b = builder(&t, NULL);
	for (i = 0; i < n; i++) {
		cr_assert_eq(htr_image_get(f, i, &im, sizeof(im)), 0);
		snprintf(spec, sizeof(spec), "%s:0x%llx:0x%llx@0x%llx", elf,
			 (unsigned long long) im.offset,
			 (unsigned long long) im.bytes,
			 (unsigned long long) im.vaddr);
		cr_assert_eq(htr_builder_add_raw(b, spec), 0, "%s",
			     htr_builder_last_error(b));
	}
	cr_assert_eq(htr_builder_run(b, pt, raw, NULL, 0), 0);
	htr_builder_free(b);
	b = builder(&t, NULL);
	for (i = 0; i < n; i++) {
		cr_assert_eq(htr_image_get(f, i, &im, sizeof(im)), 0);
		cr_assert_leq(im.offset + im.bytes, size);
		cr_assert_eq(htr_builder_add_bytes(b, bytes + im.offset,
						   im.bytes, im.vaddr,
						   "text"), 0, "%s",
			     htr_builder_last_error(b));
	}
	cr_assert_eq(htr_builder_add_bytes(b, NULL, 1, 0, NULL),
		     HTR_ERR_INVALID);
	cr_assert_eq(htr_builder_add_bytes(b, bytes, 16, UINT64_MAX - 4, NULL),
		     HTR_ERR_INVALID);
	free(bytes);            /* copied: the build must not need them */
	cr_assert_eq(htr_builder_run(b, pt, mem, NULL, 0), 0, "%s",
		     htr_builder_last_error(b));
	htr_builder_free(b);
	fr = open_path(raw);
	fm = open_path(mem);
	same_tree(fr, fm);
	cr_assert_eq(htr_image_get(fm, 0, &im, sizeof(im)), 0);
	cr_assert(im.path_len == 4 && !memcmp(im.path, "text", 4));
	{
		struct htr_file_info fi;

		cr_assert_eq(htr_file_info(fm, &fi, sizeof(fi)), 0);
		cr_assert_eq(fi.ninsns, t.insns);
	}
	htr_file_close(fr);
	htr_file_close(fm);
	htr_file_close(f);
	truth_free(&t);
}

/* A pid that no process has (the sweep removes only those). */
static long dead_pid(void)
{
	long pid;

	for (pid = 4000000; pid > 1000; pid -= 997)
		if (kill((pid_t) pid, 0) < 0 && errno == ESRCH)
			return pid;
	cr_assert_fail("no free pid");
	return 0;
}

/* fsync(2) as the library calls it, counted: the test's definition comes
 * before libc's for libhtr's calls too. */
static unsigned fsyncs;

int fsync(int fd)
{
	fsyncs++;
	return (int) syscall(SYS_fsync, fd);
}

Test(memory, no_fsync_no_sweep, .timeout = 300)
{
	struct truth t;
	struct htr_build_opts bo;
	struct htr_builder *b;
	struct htr_file *f;
	char elf[300], pt[300], out[300], left[340];
	struct stat sb;
	FILE *fp;

	synth("sw", 50000, &t);
	snprintf(elf, sizeof(elf), "%s/sw.elf@0x%llx", dir,
		 (unsigned long long) BASE);
	snprintf(pt, sizeof(pt), "%s/sw.pt", dir);
	snprintf(out, sizeof(out), "%s/sw.htr", dir);
	snprintf(left, sizeof(left), "%s.tmp%ld", out, dead_pid());
	fp = fopen(left, "w");
	cr_assert_not_null(fp);
	fclose(fp);

	htr_build_opts_init(&bo);
	bo.no_fsync = 1;
	bo.no_sweep = 1;
	b = builder(&t, &bo);
	cr_assert_eq(htr_builder_add_elf(b, elf), 0);
	fsyncs = 0;
	cr_assert_eq(htr_builder_run(b, pt, out, NULL, 0), 0);
	cr_assert_eq(fsyncs, 0, "no_fsync: %u fsync calls", fsyncs);
	htr_builder_free(b);
	cr_assert_eq(stat(left, &sb), 0, "no_sweep removed a leftover");
	f = open_path(out);
	cr_assert_eq(htr_block_count(f), t.nblocks);
	htr_file_close(f);

	/* The default syncs the file (and its directory) and sweeps it. */
	b = builder(&t, NULL);
	cr_assert_eq(htr_builder_add_elf(b, elf), 0);
	cr_assert_eq(htr_builder_run(b, pt, out, NULL, 0), 0);
	cr_assert_geq(fsyncs, 1, "the default made no fsync call");
	htr_builder_free(b);
	cr_assert_neq(stat(left, &sb), 0, "the leftover stayed");
	truth_free(&t);
}

/* An .htr in memory reads and analyses like the file; every truncation
 * and a misaligned buffer are refused. */
Test(memory, open_buffer, .timeout = 300)
{
	struct truth t;
	struct htr_file *ff, *fm = NULL;
	struct htr_open_opts oo;
	struct htr_analysis *af = NULL, *am = NULL;
	char elf[300], pt[300], out[300];
	uint8_t *buf, *odd;
	size_t size, n;
	uint32_t i;
	int refused = 0, tries = 0;

	synth("ob", 50000, &t);
	snprintf(elf, sizeof(elf), "%s/ob.elf@0x%llx", dir,
		 (unsigned long long) BASE);
	snprintf(pt, sizeof(pt), "%s/ob.pt", dir);
	snprintf(out, sizeof(out), "%s/ob.htr", dir);
	build_with_truth(&t, elf, pt, out, NULL);
	ff = open_path(out);
	buf = htr_test_slurp(out, &size);
	cr_assert_not_null(buf, "%s", out);
	htr_open_opts_init(&oo);
	oo.verify_body = 1;
	cr_assert_eq(htr_file_open_buffer(&fm, buf, size, &oo), 0, "%s",
		     htr_file_last_error(fm));
	cr_assert_null(htr_file_path(fm));
	same_tree(ff, fm);
	cr_assert_eq(htr_block_count(fm), t.nblocks);

	/* Analyses: no sidecar for a file without a path; same figures. */
	cr_assert_eq(htr_analysis_open(&af, ff, NULL), 0);
	cr_assert_eq(htr_analysis_open(&am, fm, NULL), 0, "%s",
		     htr_analysis_last_error(am));
	cr_assert(htr_analysis_flags(am) & HTR_ANALYSIS_IN_MEMORY);
	for (i = 0; i < htr_block_count(fm); i++) {
		uint64_t x, y;
		const char *nx, *ny;

		cr_assert_eq(htr_tsc_get(af, i, &x, NULL, NULL), 0);
		cr_assert_eq(htr_tsc_get(am, i, &y, NULL, NULL), 0);
		cr_assert_eq(x, y);
		cr_assert_eq(htr_block_name(af, i, &nx), 0);
		cr_assert_eq(htr_block_name(am, i, &ny), 0);
		cr_assert_str_eq(nx, ny);
	}
	htr_analysis_close(am);
	htr_analysis_close(af);
	htr_file_close(fm);

	/* Every proper prefix is refused with a message, never read past. */
	for (n = 0; n < size; n += n < 4096 ? 1 : 509) {
		uint8_t *p = malloc(n ? n : 1);

		memcpy(p, buf, n);
		fm = NULL;
		tries++;
		if (htr_file_open_buffer(&fm, p, n, NULL) < 0) {
			cr_assert_neq(htr_file_last_error(fm)[0], 0);
			refused++;
		}
		htr_file_close(fm);
		free(p);
	}
	cr_assert_eq(refused, tries, "a truncated buffer opened");
	/* Misaligned, NULL. */
	odd = malloc(size + 1);
	memcpy(odd + 1, buf, size);
	fm = NULL;
	cr_assert_eq(htr_file_open_buffer(&fm, odd + 1, size, NULL),
		     HTR_ERR_INVALID);
	htr_file_close(fm);
	fm = NULL;
	cr_assert_eq(htr_file_open_buffer(&fm, NULL, size, NULL),
		     HTR_ERR_INVALID);
	htr_file_close(fm);
	free(odd);
	free(buf);
	htr_file_close(ff);
	truth_free(&t);
}

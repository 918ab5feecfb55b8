/*
 * The size rule (htr/common.h, "Structs with a size") at every public
 * function that takes a struct with a size: a size below the first
 * version's end is refused and nothing is written; the first version's
 * size, the current sizeof and a grown size (a newer caller) are
 * accepted; facts are written up to min(size, sizeof) and never past it;
 * options the caller did not pass read as zero.
 */
#include <htr/htr.h>

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE0(type, last) (offsetof(type, last) + sizeof(((type *) 0)->last))
#define GROW 64

static char sample_htr[512], sample_pt[512], sample_elf[512];
static char dir[] = "/tmp/htr-test-abi-XXXXXX";

static void setup(void)
{
	const char *root = getenv("HTR_SOURCE_ROOT");

	cr_assert_not_null(root, "HTR_SOURCE_ROOT is not set");
	snprintf(sample_htr, sizeof(sample_htr), "%s/tests/data/sample.htr", root);
	snprintf(sample_pt, sizeof(sample_pt), "%s/tests/data/sample.pt", root);
	snprintf(sample_elf, sizeof(sample_elf), "%s/tests/data/sample.elf", root);
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(abi, .init = setup, .fini = teardown);

/* A caller's struct of @size bytes, filled with a sentinel. */
static unsigned char *buf_of(size_t size)
{
	unsigned char *b = malloc(size + GROW);

	cr_assert_not_null(b);
	memset(b, 0xa5, size + GROW);
	return b;
}

static size_t size_in(const void *p)
{
	size_t n;

	memcpy(&n, p, sizeof(n));
	return n;
}

/* Bytes [@from, @to) still hold the sentinel. */
static void untouched(const unsigned char *b, size_t from, size_t to,
		      const char *what)
{
	size_t i;

	for (i = from; i < to; i++)
		cr_assert_eq(b[i], 0xa5, "%s: byte %zu was written", what, i);
}

static struct htr_file *open_sample(void)
{
	struct htr_file *f = NULL;

	cr_assert_eq(htr_file_open(&f, sample_htr, NULL), 0, "%s",
		     htr_file_last_error(f));
	return f;
}

/*
 * An "out" function called with sizes size0 - 1, size0, sizeof and
 * sizeof + GROW.  @call fills the caller's struct at @p of @size bytes.
 */
typedef int (*out_fn)(void *ctx, void *p, size_t size);

static void check_out(const char *what, size_t size0, size_t lib_size,
		      out_fn call, void *ctx)
{
	size_t sizes[4] = { size0 - 1, size0, lib_size, lib_size + GROW };
	size_t k;

	for (k = 0; k < 4; k++) {
		unsigned char *b = buf_of(sizes[k]);
		int rc = call(ctx, b, sizes[k]);
		size_t filled = sizes[k] < lib_size ? sizes[k] : lib_size;

		if (k == 0) {
			cr_assert_eq(rc, HTR_ERR_INVALID, "%s: size %zu: %d",
				     what, sizes[k], rc);
			untouched(b, 0, sizes[k] + GROW, what);
		} else {
			cr_assert_eq(rc, 0, "%s: size %zu: %d", what,
				     sizes[k], rc);
			cr_assert_eq(size_in(b), filled, "%s: size field",
				     what);
			untouched(b, filled, sizes[k] + GROW, what);
		}
		free(b);
	}
}

static int call_file_info(void *ctx, void *p, size_t size)
{
	return htr_file_info(ctx, p, size);
}

static int call_block_get(void *ctx, void *p, size_t size)
{
	return htr_block_get(ctx, 0, p, size);
}

static int call_gap_get(void *ctx, void *p, size_t size)
{
	return htr_gap_get(ctx, 0, p, size);
}

static int call_image_get(void *ctx, void *p, size_t size)
{
	return htr_image_get(ctx, 0, p, size);
}

static int call_sync_get(void *ctx, void *p, size_t size)
{
	return htr_sync_get(ctx, 0, p, size);
}

Test(abi, tree_facts)
{
	struct htr_file *f = open_sample();

	cr_assert_gt(htr_gap_count(f), 0);
	check_out("htr_file_info", SIZE0(struct htr_file_info, build_time),
		  sizeof(struct htr_file_info), call_file_info, f);
	check_out("htr_block_get", SIZE0(struct htr_block_info, flags),
		  sizeof(struct htr_block_info), call_block_get, f);
	check_out("htr_gap_get", SIZE0(struct htr_gap_info, code),
		  sizeof(struct htr_gap_info), call_gap_get, f);
	cr_assert_gt(htr_image_count(f), 0);
	cr_assert_gt(htr_sync_count(f), 0);
	check_out("htr_image_get", SIZE0(struct htr_image_info, kind),
		  sizeof(struct htr_image_info), call_image_get, f);
	check_out("htr_sync_get", SIZE0(struct htr_sync_info, id),
		  sizeof(struct htr_sync_info), call_sync_get, f);
	htr_file_close(f);
}

/* An "in" struct: init it at @size, let @fix set fields, then @call. */
static void check_init(const char *what, size_t size,
		       void (*init)(void *p, size_t size))
{
	unsigned char *b = buf_of(size);
	size_t i;

	init(b, size);
	cr_assert_eq(size_in(b), size, "%s: size field", what);
	for (i = sizeof(size_t); i < size; i++)
		cr_assert_eq(b[i], 0, "%s: byte %zu is not a zero default",
			     what, i);
	untouched(b, size, size + GROW, what);
	free(b);
}

static void init_open(void *p, size_t size)
{
	htr_open_opts_init_size(p, size);
}

static void init_build(void *p, size_t size)
{
	htr_build_opts_init_size(p, size);
}

static void init_analysis(void *p, size_t size)
{
	htr_analysis_opts_init_size(p, size);
}

Test(abi, opts_init)
{
	size_t s;

	for (s = sizeof(size_t); s <= sizeof(struct htr_open_opts) + 8; s++)
		check_init("htr_open_opts_init_size", s, init_open);
	for (s = sizeof(size_t); s <= sizeof(struct htr_build_opts) + 8; s++)
		check_init("htr_build_opts_init_size", s, init_build);
	for (s = sizeof(size_t); s <= sizeof(struct htr_analysis_opts) + 8; s++)
		check_init("htr_analysis_opts_init_size", s, init_analysis);
	/* NULL and sizes that cannot hold the size field are no-ops. */
	htr_open_opts_init_size(NULL, 100);
	htr_build_opts_init_size(NULL, 100);
	htr_analysis_opts_init_size(NULL, 100);
}

Test(abi, open_opts)
{
	size_t size0 = SIZE0(struct htr_open_opts, verify_body);
	size_t sizes[4] = { size0 - 1, size0, sizeof(struct htr_open_opts),
			    sizeof(struct htr_open_opts) + GROW };
	size_t k;

	for (k = 0; k < 4; k++) {
		unsigned char *b = buf_of(sizes[k]);
		struct htr_open_opts o;
		struct htr_file *f = NULL;
		int rc;

		htr_open_opts_init_size((struct htr_open_opts *) b, sizes[k]);
		memcpy(&o, b, sizeof(size_t));
		o.verify_body = 1;
		memcpy(b + offsetof(struct htr_open_opts, verify_body),
		       &o.verify_body, sizeof(o.verify_body) <= sizes[k] -
		       offsetof(struct htr_open_opts, verify_body) ?
		       sizeof(o.verify_body) : 0);
		rc = htr_file_open(&f, sample_htr, (void *) b);
		cr_assert_eq(rc, k ? 0 : HTR_ERR_INVALID, "size %zu: %d %s",
			     sizes[k], rc, htr_file_last_error(f));
		htr_file_close(f);
		/* The same options opening the file from memory. */
		{
			FILE *fp = fopen(sample_htr, "rb");
			static uint64_t mem[1 << 16];
			size_t n;

			cr_assert_not_null(fp);
			n = fread(mem, 1, sizeof(mem), fp);
			fclose(fp);
			cr_assert_lt(n, sizeof(mem));
			f = NULL;
			rc = htr_file_open_buffer(&f, mem, n, (void *) b);
			cr_assert_eq(rc, k ? 0 : HTR_ERR_INVALID, "buffer, "
				     "size %zu: %d %s", sizes[k], rc,
				     htr_file_last_error(f));
			htr_file_close(f);
		}
		free(b);
	}
}

Test(abi, build_opts_and_stats)
{
	size_t size0 = SIZE0(struct htr_build_opts, payload);
	size_t ssize0 = SIZE0(struct htr_build_stats, timing_unusable);
	size_t osizes[4] = { size0 - 1, size0, sizeof(struct htr_build_opts),
			     sizeof(struct htr_build_opts) + GROW };
	size_t ssizes[4] = { ssize0 - 1, ssize0, sizeof(struct htr_build_stats),
			     sizeof(struct htr_build_stats) + GROW };
	struct htr_builder *b = NULL;
	char out[300];
	size_t k;
	int rc;

	for (k = 0; k < 4; k++) {
		unsigned char *ob = buf_of(osizes[k]);

		htr_build_opts_init_size((void *) ob, osizes[k]);
		rc = htr_builder_alloc(&b, (void *) ob);
		cr_assert_eq(rc, k ? 0 : HTR_ERR_INVALID, "opts size %zu: %d",
			     osizes[k], rc);
		if (k)
			htr_builder_free(b);
		b = NULL;
		free(ob);
	}
	/* IP filters: an empty range, an unknown kind, one too many. */
	for (k = 0; k < 4; k++) {
		struct htr_build_opts o;

		htr_build_opts_init(&o);
		o.nfilters = 1;
		o.filters[0].start = 0x1000;
		o.filters[0].end = k == 0 ? 0x1000 : 0x2000;
		o.filters[0].kind = k == 1 ? 3 : HTR_FILTER_STOP;
		if (k == 2)
			o.nfilters = HTR_ADDR_FILTERS_MAX + 1;
		rc = htr_builder_alloc(&b, &o);
		cr_assert_eq(rc, k < 3 ? HTR_ERR_INVALID : 0, "filters %zu: %d",
			     k, rc);
		htr_builder_free(b);
		b = NULL;
	}
	snprintf(out, sizeof(out), "%s/s.htr", dir);
	for (k = 0; k < 4; k++) {
		unsigned char *sb = buf_of(ssizes[k]);
		size_t filled = ssizes[k] < sizeof(struct htr_build_stats) ?
				ssizes[k] : sizeof(struct htr_build_stats);
		struct htr_build_stats st;

		cr_assert_eq(htr_builder_alloc(&b, NULL), 0);
		cr_assert_eq(htr_builder_add_elf(b, sample_elf), 0, "%s",
			     htr_builder_last_error(b));
		rc = htr_builder_run(b, sample_pt, out, (void *) sb, ssizes[k]);
		if (!k) {
			cr_assert_eq(rc, HTR_ERR_INVALID);
			untouched(sb, 0, ssizes[k] + GROW, "stats");
		} else {
			cr_assert_eq(rc, 0, "%s", htr_builder_last_error(b));
			cr_assert_eq(size_in(sb), filled);
			untouched(sb, filled, ssizes[k] + GROW, "stats");
			memcpy(&st, sb, filled);
			cr_assert_gt(st.insns, 0);
			cr_assert_gt(st.blocks, 0);
			/* The commit fsyncs and renames: it takes time. */
			if (filled == sizeof(st))
				cr_assert_gt(st.commit_ns, 0);
		}
		htr_builder_free(b);
		b = NULL;
		free(sb);
	}
}

Test(abi, analysis_opts)
{
	size_t size0 = SIZE0(struct htr_analysis_opts, no_sidecar);
	size_t sizes[4] = { size0 - 1, size0, sizeof(struct htr_analysis_opts),
			    sizeof(struct htr_analysis_opts) + GROW };
	struct htr_file *f = open_sample();
	size_t k;

	for (k = 0; k < 4; k++) {
		unsigned char *b = buf_of(sizes[k]);
		struct htr_analysis_opts o;
		struct htr_analysis *a = NULL;
		int rc;

		htr_analysis_opts_init_size((void *) b, sizes[k]);
		if (k) {
			/* Compute in memory: never write next to the
			 * shipped sample. */
			memcpy(&o, b, size0);
			o.no_sidecar = 1;
			memcpy(b, &o, size0);
		}
		rc = htr_analysis_open(&a, f, (void *) b);
		cr_assert_eq(rc, k ? 0 : HTR_ERR_INVALID, "size %zu: %d %s",
			     sizes[k], rc, htr_analysis_last_error(a));
		if (k)
			cr_assert(htr_analysis_flags(a) &
				  HTR_ANALYSIS_IN_MEMORY);
		htr_analysis_close(a);
		free(b);
	}
	htr_file_close(f);
}

static void init_store(void *p, size_t size)
{
	htr_store_opts_init_size(p, size);
}

static int call_store_info(void *ctx, void *p, size_t size)
{
	return htr_store_info(ctx, p, size);
}

Test(abi, store_opts_and_info)
{
	size_t size0 = SIZE0(struct htr_store_opts, no_sidecar);
	size_t sizes[4] = { size0 - 1, size0, sizeof(struct htr_store_opts),
			    sizeof(struct htr_store_opts) + GROW };
	struct htr_file *f = open_sample();
	char side[300];
	size_t k, s;

	for (s = sizeof(size_t); s <= sizeof(struct htr_store_opts) + 8; s++)
		check_init("htr_store_opts_init_size", s, init_store);
	snprintf(side, sizeof(side), "%s/sample.lmdb", dir);
	for (k = 0; k < 4; k++) {
		unsigned char *b = buf_of(sizes[k]);
		struct htr_store_opts o;
		struct htr_store *st = NULL;
		int rc;

		htr_store_opts_init_size((void *) b, sizes[k]);
		if (k) {
			memcpy(&o, b, size0);
			o.sidecar = side;
			memcpy(b, &o, size0);
		}
		rc = htr_store_open(&st, f, (void *) b);
		cr_assert_eq(rc, k ? 0 : HTR_ERR_INVALID, "size %zu: %d %s",
			     sizes[k], rc, htr_store_last_error(st));
		if (k) {
			cr_assert_eq(htr_store_flags(st), 0, "%s",
				     htr_store_note(st));
			check_out("htr_store_info",
				  SIZE0(struct htr_store_info, process_readers),
				  sizeof(struct htr_store_info),
				  call_store_info, st);
		}
		htr_store_close(st);
		free(b);
	}
	htr_file_close(f);
}

/* The reader API the analyzers use agrees with the plain lookups. */
Test(abi, reader_api)
{
	struct htr_file *f = open_sample();
	struct htr_file_info fi;
	struct htr_image_info im;
	struct htr_sync_info sy;
	uint64_t id, hint = HTR_TSC_HINT_INIT, a, b, i, prev = 0;
	int ra, rb;

	cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
	cr_assert_eq(htr_image_count(f), fi.nimages);
	cr_assert_eq(htr_sync_count(f), fi.nsync);
	cr_assert_eq(htr_func_count(f), fi.nfuncs);
	cr_assert_str_eq(htr_file_path(f), sample_htr);
	for (id = 0; id < fi.ninsns; id += 7) {
		ra = htr_tsc_lookup(f, id, &hint, &a);
		rb = htr_tsc_for_insn(f, id, &b);
		cr_assert_eq(ra, rb, "id %llu", (unsigned long long) id);
		if (!ra)
			cr_assert_eq(a, b);
	}
	/* Backwards and any hint value still give the right answer. */
	hint = 12345678;
	cr_assert_eq(htr_tsc_lookup(f, 0, &hint, &a),
		     htr_tsc_for_insn(f, 0, &b));
	cr_assert_eq(htr_tsc_lookup(f, fi.ninsns, &hint, &a), HTR_ERR_RANGE);
	for (i = 0; i < fi.nimages; i++) {
		cr_assert_eq(htr_image_get(f, i, &im, sizeof(im)), 0);
		cr_assert_gt(im.path_len, 0);
		cr_assert(im.kind == HTR_IMAGE_ELF || im.kind == HTR_IMAGE_RAW);
	}
	cr_assert_eq(htr_image_get(f, i, &im, sizeof(im)), HTR_ERR_RANGE);
	for (i = 0; i < fi.nsync; i++) {
		cr_assert_eq(htr_sync_get(f, i, &sy, sizeof(sy)), 0);
		cr_assert_geq(sy.offset, prev);
		prev = sy.offset;
	}
	for (i = 0; i < fi.nfuncs; i++)
		cr_assert_eq(htr_func_entry(f, i, &a), 0);
	cr_assert_eq(htr_func_entry(f, i, &a), HTR_ERR_RANGE);
	htr_file_close(f);
}

/* CPU-wide builds from memory (htr/cpuwide.h): the switch at every size,
 * a thread's stats and the run's info as "out" structs. */
struct cw_ctx {
	struct htr_cpuwide *cw;
	uint32_t tid;
};

static int call_cw_stats(void *ctx, void *p, size_t size)
{
	struct cw_ctx *c = ctx;

	return htr_cpuwide_thread_stats(c->cw, c->tid, p, size);
}

static int call_cw_info(void *ctx, void *p, size_t size)
{
	return htr_cpuwide_info(((struct cw_ctx *) ctx)->cw, p, size);
}

Test(abi, cpuwide)
{
	size_t size0 = SIZE0(struct htr_switch, next_tid);
	size_t sizes[4] = { size0 - 1, size0, sizeof(struct htr_switch),
			    sizeof(struct htr_switch) + GROW };
	struct htr_build_stats st;
	struct htr_thread_info ti;
	struct htr_builder *b = NULL;
	struct cw_ctx c = { NULL, 7 };
	char out[300];
	FILE *fp;
	static uint8_t pt[1 << 20];
	size_t n, k;
	int rc;

	fp = fopen(sample_pt, "rb");
	cr_assert_not_null(fp);
	n = fread(pt, 1, sizeof(pt), fp);
	fclose(fp);
	cr_assert_lt(n, sizeof(pt));
	cr_assert_eq(htr_builder_alloc(&b, NULL), 0);
	cr_assert_eq(htr_builder_add_elf(b, sample_elf), 0);
	cr_assert_eq(htr_cpuwide_alloc(&c.cw, b), 0);
	cr_assert_eq(htr_cpuwide_thread_stats(c.cw, 7, &st, sizeof(st)),
		     HTR_ERR_NOTFOUND);
	/* Thread 7 runs on CPU 3 from TSC 0 on (as each size says). */
	for (k = 0; k < 4; k++) {
		unsigned char *sb = buf_of(sizes[k]);
		struct htr_switch sw;

		memset(&sw, 0, sizeof(sw));
		sw.size = sizes[k];
		sw.cpu = 3;
		sw.flags = HTR_SWITCH_TSC;
		sw.pid = sw.tid = 7;
		memcpy(sb, &sw, sizes[k] < sizeof(sw) ? sizes[k] : sizeof(sw));
		rc = htr_cpuwide_add_switch(c.cw, (void *) sb);
		cr_assert_eq(rc, k ? 0 : HTR_ERR_INVALID, "switch size %zu: %d",
			     sizes[k], rc);
		free(sb);
	}
	cr_assert_eq(htr_cpuwide_add_trace(c.cw, 3, pt, n), 0);
	memset(&ti, 0, sizeof(ti));
	ti.size = sizeof(ti);
	ti.pid = ti.tid = 7;
	snprintf(out, sizeof(out), "%s/cw.htr", dir);
	cr_assert_eq(htr_cpuwide_add_thread(c.cw, &ti, out), 0);
	cr_assert_eq(htr_cpuwide_add_thread(c.cw, &ti, out), HTR_ERR_INVALID);
	cr_assert_eq(htr_cpuwide_run(c.cw), 0, "%s",
		     htr_builder_last_error(b));
	check_out("htr_cpuwide_thread_stats",
		  SIZE0(struct htr_build_stats, timing_unusable),
		  sizeof(struct htr_build_stats), call_cw_stats, &c);
	check_out("htr_cpuwide_info",
		  SIZE0(struct htr_cpuwide_info, insns_unknown),
		  sizeof(struct htr_cpuwide_info), call_cw_info, &c);
	cr_assert_eq(htr_cpuwide_thread_stats(c.cw, 7, &st, sizeof(st)), 0);
	cr_assert_gt(st.insns, 0);
	cr_assert_eq(htr_cpuwide_thread_stats(c.cw, 8, &st, sizeof(st)),
		     HTR_ERR_NOTFOUND);
	htr_cpuwide_free(c.cw);
	htr_builder_free(b);
}

/* A CPU-wide run with no switch at all (a fuzzed input found it: qsort
 * was handed NULL, which UBSan reports): nothing to attribute, no crash,
 * no undefined behaviour. */
Test(abi, cpuwide_without_switches)
{
	struct htr_thread_info ti;
	struct htr_builder *b = NULL;
	struct htr_cpuwide *cw = NULL;
	struct htr_cpuwide_info info;
	static uint8_t pt[1 << 20];
	char out[300];
	FILE *fp;
	size_t n;
	int rc;

	fp = fopen(sample_pt, "rb");
	cr_assert_not_null(fp);
	n = fread(pt, 1, sizeof(pt), fp);
	fclose(fp);
	cr_assert_eq(htr_builder_alloc(&b, NULL), 0);
	cr_assert_eq(htr_builder_add_elf(b, sample_elf), 0);
	cr_assert_eq(htr_cpuwide_alloc(&cw, b), 0);
	cr_assert_eq(htr_cpuwide_add_trace(cw, 0, pt, n), 0);
	memset(&ti, 0, sizeof(ti));
	ti.size = sizeof(ti);
	ti.pid = ti.tid = 1;
	snprintf(out, sizeof(out), "%s/none.htr", dir);
	cr_assert_eq(htr_cpuwide_add_thread(cw, &ti, out), 0);
	rc = htr_cpuwide_run(cw);
	cr_assert_eq(rc, 0, "%s", htr_builder_last_error(b));
	/* No switch puts thread 1 on CPU 0: all the code is no one's. */
	info.size = sizeof(info);
	cr_assert_eq(htr_cpuwide_info(cw, &info, sizeof(info)), 0);
	cr_assert_gt(info.insns_unknown, 0);
	htr_cpuwide_free(cw);
	htr_builder_free(b);
}

/*
 * The .htr container: writer errors and limits, crash safety of the
 * temporary-name-then-rename rule, and htr_file_open() against truncated,
 * bit-flipped, foreign and hand-mutated files.  Corrupt input must give an
 * error (or, for block bytes that open does not read, consistent answers
 * from the checked accessors), never a crash; run under ASan/UBSan too.
 */
#include "file.h"
#include "writer.h"
#include "slurp.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static char dir[256];
static char path[300];

static void setup_dir(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/htr-file-XXXXXX", t ? t : "/tmp");
	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/t.htr", dir);
}

/* Number of entries left in the directory. */
static int dir_entries(void)
{
	char cmd[400];
	FILE *p;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	p = popen(cmd, "r");
	cr_assert(p);
	cr_assert_eq(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

static void teardown_dir(void)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "chmod -R u+w '%s'; rm -rf '%s'", dir, dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(file, .init = setup_dir, .fini = teardown_dir);

static void put_block(struct htr_writer *w, uint64_t first, uint64_t last,
		      uint32_t first_child, uint32_t nchildren, uint32_t ff)
{
	struct htr_disk_block b;

	memset(&b, 0, sizeof(b));
	htr_disk__put48(b.first, first);
	htr_disk__put48(b.last, last);
	b.first_child = first_child;
	b.nchildren = nchildren;
	b.func_flags = ff;
	cr_assert_eq(htr_writer__block(w, &b, NULL), 0, "%s",
		     htr_writer__err(w)->msg);
}

/*
 * About @n random blocks into @w, from a call/return simulation up to 60
 * deep, in completion order; the first from index @bad on that @how can
 * make wrong is made wrong in a way the writer takes and only the linking
 * can tell: 0, a child count one off; 1, a first child one early; 2, a
 * first ID one early (@bad UINT32_MAX: none).  Returns the instructions.
 */
static uint64_t put_random(struct htr_writer *w, uint32_t n, uint32_t bad,
			   uint32_t how)
{
	struct { uint32_t first_child, nchildren; uint64_t first; } st[64];
	uint32_t depth = 0, count = 0;
	uint64_t id = 0;

	while (count < n || depth) {
		if (below(3) == 0)
			id++;
		if (count < n && depth < 60 && below(2)) {
			st[depth].first = id;
			st[depth].first_child = HTR_NONE;
			st[depth].nchildren = 0;
			depth++;
			count++;
		} else if (depth) {
			uint32_t idx = htr_writer__nblocks(w);
			uint32_t fc = st[depth - 1].first_child;
			uint32_t nc = st[depth - 1].nchildren;
			uint64_t first = st[depth - 1].first;

			depth--;
			if (idx >= bad && nc > 1 && how == 0) {
				nc += below(2) ? 1 : -1;
				bad = UINT32_MAX;
			} else if (idx >= bad && nc && fc && how == 1) {
				fc--;
				bad = UINT32_MAX;
			} else if (idx >= bad && first && how == 2) {
				first--;
				bad = UINT32_MAX;
			}
			put_block(w, first, id, fc, nc,
				  (uint32_t) (below(6) == 5 ? HTR_FUNC_NONE :
					      below(5)) |
				  (uint32_t) below(16) << 24);
			id++;
			if (depth) {
				if (!st[depth - 1].nchildren)
					st[depth - 1].first_child = idx;
				st[depth - 1].nchildren++;
			}
		}
	}
	return id;
}

/*
 * A random well-formed file of about @n blocks (put_random()), plus every
 * small section.
 */
static uint64_t write_random(const char *p, uint32_t n, uint64_t seed)
{
	struct htr_writer_meta m;
	struct htr_writer *w;
	struct htr_err err;
	uint64_t id, k;
	uint32_t i;

	rng_state = seed;
	cr_assert_eq(htr_writer__open(&w, p, &err), 0, "%s", err.msg);
	for (i = 0; i < 5; i++)
		cr_assert_eq(htr_writer__func(w, 0x1000 + i), 0);
	id = put_random(w, n, UINT32_MAX, 0);
	id += 2;
	for (k = 0; k < 7; k++)
		cr_assert_eq(htr_writer__gap(w, k * id / 8, k * 100,
					     1 + (int) (k % 3), -(int) k), 0);
	for (k = 0; k < 20; k++)
		cr_assert_eq(htr_writer__tsc(w, k * id / 20, 1000 + k * 7), 0);
	for (k = 0; k < 9; k++)
		cr_assert_eq(htr_writer__sync(w, k * 4096, k * id / 9), 0);
	cr_assert_eq(htr_writer__image(w, 1, 0x400000, 0, 0x1000,
				       "/usr/bin/prog"), 0);
	cr_assert_eq(htr_writer__image(w, 2, 0x7f0000, 64, 100,
				       "/lib/x86_64-linux-gnu/libc.so.6!"), 0);
	if (seed % 2) {
		struct htr_disk_thread t = { .pid = 7, .tid = 8,
					     .flags = HTR_THREAD_NS,
					     .time_shift = 3, .time_mult = 5 };

		cr_assert_eq(htr_writer__thread(w, &t), 0);
	}
	memset(&m, 0, sizeof(m));
	m.ninsns = id;
	m.trace_size = 777;
	m.trace_hash = 0x1234;
	m.libipt_version[0] = 2;
	cr_assert_eq(htr_writer__commit(w, &m), 0, "%s",
		     htr_writer__err(w)->msg);
	htr_writer__free(w);
	return id;
}

static void spit(const char *p, const void *buf, size_t size)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, buf, size), (ssize_t) size);
	close(fd);
}

static int open_rc(const char *p, int verify, char *msg, size_t msgsize)
{
	struct htr_open_opts o;
	struct htr_file *f = NULL;
	int rc;

	htr_open_opts_init(&o);
	o.verify_body = verify;
	rc = htr_file_open(&f, p, &o);
	cr_assert(f, "a failed open still returns a handle");
	if (msg)
		snprintf(msg, msgsize, "%s", htr_file_last_error(f));
	if (rc)
		cr_assert_eq(htr_block_count(f), 0);
	htr_file_close(f);
	return rc;
}

/* Use every accessor on every block; answers may be wrong for a corrupt
 * file but nothing may crash or loop. */
static void exercise(const struct htr_file *f);

static int count_visit(const struct htr_file *f, uint32_t b, uint32_t p,
		       uint32_t level, void *payload)
{
	(void) f;
	(void) b;
	(void) p;
	(void) level;
	++*(uint64_t *) payload;
	return 0;
}

static void exercise(const struct htr_file *f)
{
	struct htr_file_info fi;
	struct htr_block_info bi;
	struct htr_gap_info gi;
	struct htr_file_image im;
	uint64_t id, pos = 0, n, tsc, visits;
	uint32_t b, i, nb = htr_block_count(f);

	cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
	for (i = 0; i < nb; i++) {
		(void) htr_block_get(f, i, &bi, sizeof(bi));
		(void) htr_block_parent(f, i);
		(void) htr_block_first_child(f, i);
		(void) htr_block_next_sibling(f, i);
		(void) htr_block_child_count(f, i);
		(void) htr_block_depth(f, i);
	}
	for (i = 0; i < nb; i += 1 + nb / 16) {
		visits = 0;
		(void) htr_tree_visit(f, i, HTR_PREORDER, count_visit, &visits);
		cr_assert_leq(visits, 2ull * nb + 3);
		visits = 0;
		(void) htr_tree_visit(f, i, HTR_POSTORDER, count_visit,
				      &visits);
		cr_assert_leq(visits, 2ull * nb + 3);
	}
	visits = 0;
	(void) htr_tree_visit(f, HTR_NONE, HTR_PREORDER, count_visit, &visits);
	cr_assert_leq(visits, 2ull * nb + 3);
	visits = 0;
	(void) htr_tree_visit(f, HTR_NONE, HTR_POSTORDER, count_visit, &visits);
	cr_assert_leq(visits, 2ull * nb + 3);
	for (id = 0; id < fi.ninsns && id < 100000; id++) {
		if (htr_block_for_insn(f, id, &b) == 0) {
			cr_assert_lt(b, nb);
			cr_assert_eq(htr_block_get(f, b, &bi, sizeof(bi)) == 0 ?
				     (bi.first <= id && id <= bi.last) : 1, 1);
		}
		(void) htr_tsc_for_insn(f, id, &tsc);
	}
	for (n = 0; n < htr_gap_count(f); n++)
		cr_assert_eq(htr_gap_get(f, n, &gi, sizeof(gi)), 0);
	n = 0;
	while (htr_file__image_next(f, &pos, &im) == 0)
		n++;
	cr_assert_eq(n, fi.nimages);
}

Test(file, roundtrip_header_and_sections)
{
	struct htr_file_info fi;
	struct htr_file_image im;
	struct htr_file *f;
	uint64_t ninsns, pos = 0;

	ninsns = write_random(path, 200, 1);
	cr_assert_eq(htr_file_open(&f, path, NULL), 0, "%s", htr_file_last_error(f));
	cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
	cr_assert_eq(fi.size, sizeof(fi));
	cr_assert_eq(fi.version, HTR_FORMAT_VERSION);
	cr_assert_eq(fi.ninsns, ninsns);
	cr_assert_eq(fi.nblocks, 200);
	cr_assert_eq(fi.nfuncs, 5);
	cr_assert_eq(fi.ngaps, 7);
	cr_assert_eq(fi.ntsc, 20);
	cr_assert_eq(fi.nsync, 9);
	cr_assert_eq(fi.nimages, 2);
	cr_assert_eq(fi.trace_size, 777);
	cr_assert_eq(fi.trace_hash, 0x1234);
	cr_assert_eq(fi.libipt_version[0], 2);
	cr_assert_neq(fi.build_time, 0);
	cr_assert_eq(f->sync[3].offset, 3 * 4096);
	cr_assert_eq(f->sync[3].id, 3 * ninsns / 9);
	cr_assert_eq(htr_file__image_next(f, &pos, &im), 0);
	cr_assert_eq(im.rec->vaddr, 0x400000);
	cr_assert_eq(im.rec->kind, 1);
	cr_assert_eq(im.path_len, strlen("/usr/bin/prog"));
	cr_assert_eq(memcmp(im.path, "/usr/bin/prog", im.path_len), 0);
	cr_assert_eq(htr_file__image_next(f, &pos, &im), 0);
	cr_assert_eq(im.rec->offset, 64);
	cr_assert_eq(memcmp(im.path, "/lib/x86_64-linux-gnu/libc.so.6!",
			    im.path_len), 0);
	cr_assert_eq(htr_file__image_next(f, &pos, &im), HTR_ERR_ITEROVER);
	cr_assert_eq(htr_file_info(f, &fi, 8), HTR_ERR_INVALID);
	exercise(f);
	htr_file_close(f);
	cr_assert_eq(open_rc(path, 1, NULL, 0), 0);
	/* Nothing but the output is left behind. */
	cr_assert_eq(dir_entries(), 1);
}

Test(file, open_bad_arguments)
{
	struct htr_open_opts o;
	struct htr_file *f;

	cr_assert_eq(htr_file_open(NULL, path, NULL), HTR_ERR_INVALID);
	cr_assert_eq(htr_file_open(&f, NULL, NULL), HTR_ERR_INVALID);
	cr_assert_str_neq(htr_file_last_error(f), "");
	/* the old name is the same function */
	cr_assert_str_eq(htr_last_error(f), htr_file_last_error(f));
	htr_file_close(f);
	write_random(path, 3, 2);
	o.size = 0;
	o.verify_body = 0;
	cr_assert_eq(htr_file_open(&f, path, &o), HTR_ERR_INVALID);
	htr_file_close(f);
	/* The size rule (tests/test_abi.c): shorter than the first
	 * version (which has verify_body) is refused, longer is fine. */
	o.size = sizeof(size_t);
	o.verify_body = 12345;
	cr_assert_eq(htr_file_open(&f, path, &o), HTR_ERR_INVALID);
	htr_file_close(f);
	o.size = sizeof(o);
	o.verify_body = 0;
	cr_assert_eq(htr_file_open(&f, path, &o), 0);
	htr_file_close(f);
}

Test(file, truncated_at_every_length)
{
	size_t size, len;
	uint8_t *buf;
	char msg[600], tpath[400];

	write_random(path, 40, 3);
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf, "%s", path);
	snprintf(tpath, sizeof(tpath), "%s/cut.htr", dir);
	for (len = 0; len < size; len++) {
		int rc;

		spit(tpath, buf, len);
		rc = open_rc(tpath, 0, msg, sizeof(msg));
		cr_assert_neq(rc, 0, "length %zu opened", len);
		if (len >= 8)
			cr_assert_eq(rc, HTR_ERR_CORRUPT, "length %zu: %s", len,
				     msg);
		else
			cr_assert(rc == HTR_ERR_CORRUPT || rc == HTR_ERR_FORMAT);
		cr_assert_eq(strncmp(msg, tpath, strlen(tpath)), 0, "%s", msg);
		if (len >= 256)
			cr_assert(strstr(msg, "truncated"), "%s", msg);
	}
	free(buf);
}

/* FORMAT.md's hash, written from its text. */
static uint64_t doc_hash(const uint8_t *p, uint64_t n)
{
	const uint64_t k = 0x9e3779b97f4a7c15ull;
	uint64_t h = 0x6a09e667f3bcc909ull, i = 0, w, b;

	for (; i < n; i += 8) {
		uint64_t len = n - i < 8 ? n - i : 8;

		for (w = 0, b = 0; b < len; b++)
			w |= (uint64_t) p[i + b] << (8 * b);
		h = (h ^ w ^ (len < 8 ? len << 56 : 0)) * k;
		h ^= h >> 29;
	}
	return h;
}

/* Version 3: the body hash is the hash of the hashes of the body's 1 MiB
 * pieces (cut at file offsets that are multiples of 2^20). */
Test(file, body_hash_in_pieces)
{
	char path[sizeof(dir) + 8];
	struct htr_disk_header h;
	uint8_t *buf, le[64 * 8];
	size_t size, n = 0;
	uint64_t a, e;

	snprintf(path, sizeof(path), "%s/p.htr", dir);
	write_random(path, 120000, 7);
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf, "%s", path);
	memcpy(&h, buf, sizeof(h));
	cr_assert_eq(h.version, 3);
	cr_assert_gt(h.file_size, 3u << 20, "%llu", (unsigned long long) h.file_size);
	for (a = h.body_start; a < h.file_size; a = e) {
		uint64_t ph;
		unsigned b;

		e = ((a >> 20) + 1) << 20;
		if (e > h.file_size)
			e = h.file_size;
		ph = doc_hash(buf + a, e - a);
		cr_assert_lt(n + 8, sizeof(le));
		for (b = 0; b < 8; b++)
			le[n++] = (uint8_t) (ph >> (8 * b));
	}
	cr_assert_eq(doc_hash(le, n), h.body_hash);
	cr_assert_eq(open_rc(path, 1, NULL, 0), 0);
	/* A byte of the last piece: only a verifying open sees it. */
	buf[h.file_size - 3] ^= 1;
	spit(path, buf, size);
	cr_assert_eq(open_rc(path, 0, NULL, 0), 0);
	cr_assert_eq(open_rc(path, 1, NULL, 0), HTR_ERR_CORRUPT);
	free(buf);
}

/* The hash a writer feeds piece by piece, in pieces of any length and the
 * pieces in any order, is the one a reader takes of the bytes. */
Test(file, body_hash_streamed)
{
	const uint64_t start = 424, end = (3u << 20) + 1237;
	struct htr_body_hash bh;
	uint8_t *map = malloc(end);
	uint64_t h, piece, off, n;

	cr_assert_not_null(map);
	rng_state = 11;
	for (off = 0; off < end; off++)
		map[off] = (uint8_t) below(256);
	cr_assert_eq(htr_body_hash__init(&bh, start, end), 0);
	/* Last piece first, each in uneven bites. */
	for (piece = 4; piece-- > 0;) {
		uint64_t a = piece ? piece << 20 : start;
		uint64_t e = (piece + 1) << 20 < end ? (piece + 1) << 20 : end;

		for (off = a; off < e; off += n) {
			n = 1 + below(99999);
			if (n > e - off)
				n = e - off;
			htr_body_hash__feed(&bh, off, map + off, n);
		}
	}
	cr_assert_eq(htr_body_hash__final(&bh, &h), 0);
	cr_assert_eq(h, htr_hash__body(map, start, end, 3, NULL, NULL));
	htr_body_hash__free(&bh);
	/* A byte missed is an error, not a wrong hash. */
	cr_assert_eq(htr_body_hash__init(&bh, start, end), 0);
	htr_body_hash__feed(&bh, start, map + start, end - start - 1);
	cr_assert_eq(htr_body_hash__final(&bh, &h), -1);
	htr_body_hash__free(&bh);
	free(map);
}

/* Spans of several whole pieces (hashed four or two at a time) give the same
 * hash, whatever the spans' bounds, and in any order when they are cut at
 * piece boundaries. */
Test(file, body_hash_whole_pieces)
{
	const uint64_t start = 424, end = (11u << 20) + 1237;
	static const uint64_t cuts[][3] = {     /* a, b, last first */
		{ 424, 424, 0 },                /* one call */
		{ 4u << 20, 9u << 20, 1 },
		{ (2u << 20) + 8, (9u << 20) + 77, 0 },
	};
	uint8_t *map = malloc(end);
	uint64_t h, off;
	size_t c;

	cr_assert_not_null(map);
	rng_state = 12;
	for (off = 0; off < end; off++)
		map[off] = (uint8_t) below(256);
	for (c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		uint64_t at[4] = { start, cuts[c][0], cuts[c][1], end };
		struct htr_body_hash bh;
		int k;

		cr_assert_eq(htr_body_hash__init(&bh, start, end), 0);
		for (k = 0; k < 3; k++) {
			int j = cuts[c][2] ? 2 - k : k;

			htr_body_hash__feed(&bh, at[j], map + at[j],
					    at[j + 1] - at[j]);
		}
		cr_assert_eq(htr_body_hash__final(&bh, &h), 0, "cuts %zu", c);
		cr_assert_eq(h, htr_hash__body(map, start, end, 3, NULL, NULL),
			     "cuts %zu", c);
		htr_body_hash__free(&bh);
	}
	free(map);
}

Test(file, every_header_byte_flipped)
{
	struct htr_disk_header h;
	size_t size, i;
	uint8_t *buf;
	char msg[600];
	int bit;

	write_random(path, 10, 4);
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf, "%s", path);
	memcpy(&h, buf, sizeof(h));
	for (i = 0; i < h.body_start; i++)
		for (bit = 0; bit < 8; bit += 7) {
			int rc, want = HTR_ERR_CORRUPT;

			buf[i] ^= (uint8_t) (1u << bit);
			spit(path, buf, size);
			buf[i] ^= (uint8_t) (1u << bit);
			if (i < 8)
				want = HTR_ERR_FORMAT;
			else if (i < 12) {
				/* Another version this libhtr reads only
				 * fails the header checksum. */
				uint32_t v = h.version ^ (i == 8 ? 1u << bit
							   : 0);

				if (i > 8 || v < HTR_FORMAT_VERSION_MIN ||
				    v > HTR_FORMAT_VERSION)
					want = HTR_ERR_VERSION;
			}
			rc = open_rc(path, 0, msg, sizeof(msg));
			cr_assert_eq(rc, want, "byte %zu bit %d: %d %s", i, bit,
				     rc, msg);
		}
	free(buf);
}

Test(file, every_body_byte_flipped_is_caught_by_verify)
{
	struct htr_disk_header h;
	struct htr_file *f;
	size_t size, i;
	uint8_t *buf;

	write_random(path, 30, 5);
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf, "%s", path);
	memcpy(&h, buf, sizeof(h));
	for (i = h.body_start; i < size; i++) {
		buf[i] ^= 0x10;
		spit(path, buf, size);
		buf[i] ^= 0x10;
		cr_assert_eq(open_rc(path, 1, NULL, 0), HTR_ERR_CORRUPT,
			     "byte %zu", i);
		/* Without verification it may open; then nothing crashes. */
		if (htr_file_open(&f, path, NULL) == 0)
			exercise(f);
		htr_file_close(f);
	}
	free(buf);
}

Test(file, random_byte_flips_never_crash, .timeout = 300)
{
	struct htr_file *f;
	size_t size, i;
	uint8_t *buf, *mut;
	int round, opened = 0;

	write_random(path, 300, 6);
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf, "%s", path);
	mut = malloc(size);
	rng_state = 66;
	for (round = 0; round < 3000; round++) {
		int nflips = 1 + (int) below(8);

		memcpy(mut, buf, size);
		while (nflips--) {
			/* Half the flips land in the blocks, which open does
			 * not check: they reach the lazy per-access checks. */
			i = below(2) ? 4096 + below(300 * 32) : below(size);
			mut[i] = (uint8_t) rnd();
		}
		spit(path, mut, size);
		if (htr_file_open(&f, path, NULL) == 0) {
			opened++;
			exercise(f);
		}
		htr_file_close(f);
	}
	cr_assert_gt(opened, 100);
	free(mut);
	free(buf);
}

/* Header and table mutated, then re-hashed so that open goes past the
 * checksum and has to catch the inconsistency itself. */
Test(file, rehashed_header_mutations_never_crash, .timeout = 300)
{
	struct htr_disk_header h;
	struct htr_file *f;
	size_t size, i;
	uint8_t *buf, *mut;
	int round, opened = 0;

	write_random(path, 50, 7);
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf, "%s", path);
	mut = malloc(size);
	memcpy(&h, buf, sizeof(h));
	rng_state = 77;
	for (round = 0; round < 5000; round++) {
		struct htr_disk_header *m = (struct htr_disk_header *) mut;
		uint64_t v;

		memcpy(mut, buf, size);
		/* One word of the header or table (after magic, version
		 * and endian tag): a random value, a small delta or an
		 * extreme. */
		i = 16 + 8 * below((h.body_start - 16) / 8);
		memcpy(&v, mut + i, 8);
		switch (below(4)) {
		case 0: v = rnd(); break;
		case 1: v += below(64) - 32; break;
		case 2: v = below(2) ? UINT64_MAX : 0; break;
		default: v ^= 1ull << below(64); break;
		}
		memcpy(mut + i, &v, 8);
		m->header_hash = 0;
		m->header_hash = htr_hash__bytes(
			htr_hash__bytes(HTR_HASH_SEED, m, sizeof(*m)),
			mut + m->section_table * (m->section_table < size &&
			m->nsections <= 64 && m->section_table +
			24ull * m->nsections <= size),
			m->section_table < size && m->nsections <= 64 &&
			m->section_table + 24ull * m->nsections <= size ?
			24ull * m->nsections : 0);
		spit(path, mut, size);
		if (htr_file_open(&f, path, NULL) == 0) {
			opened++;
			exercise(f);
		}
		htr_file_close(f);
	}
	/* Some words are free (identity, build time): those still open. */
	cr_assert_gt(opened, 0);
	free(mut);
	free(buf);
}

Test(file, wrong_magic_endianness_version)
{
	struct htr_disk_header *h;
	size_t size;
	uint8_t *buf;
	char msg[600];

	write_random(path, 5, 8);
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf, "%s", path);
	h = (struct htr_disk_header *) buf;

	h->endian = 0x04030201u;
	spit(path, buf, size);
	cr_assert_eq(open_rc(path, 0, msg, sizeof(msg)), HTR_ERR_FORMAT);
	cr_assert(strstr(msg, "other endianness"), "%s", msg);
	h->endian = HTR_ENDIAN_TAG;

	h->version = HTR_FORMAT_VERSION + 1;
	spit(path, buf, size);
	cr_assert_eq(open_rc(path, 0, msg, sizeof(msg)), HTR_ERR_VERSION);
	{
		char want[32];

		snprintf(want, sizeof(want), "version %u",
			 HTR_FORMAT_VERSION + 1);
		cr_assert(strstr(msg, want), "%s", msg);
	}
	h->version = HTR_FORMAT_VERSION;

	memcpy(h->magic, "HTRTREX", 8);
	spit(path, buf, size);
	cr_assert_eq(open_rc(path, 0, msg, sizeof(msg)), HTR_ERR_FORMAT);
	cr_assert(strstr(msg, "magic"), "%s", msg);
	free(buf);
}

/* floor(tsc * mult / 2^shift), the conversion perf documents, by one
 * 128-bit division (the library splits it to stay within 128 bits). */
__extension__ typedef unsigned __int128 u128;

static uint64_t perf_ns(uint64_t tsc, uint32_t shift, uint64_t mult)
{
	u128 v = ((u128) tsc * mult) >> shift;

	return v > UINT64_MAX ? UINT64_MAX : (uint64_t) v;
}

Test(file, thread_record_and_clock)
{
	static const uint64_t tscs[] = { 0, 1, 1023, 1024, 123456789,
					 1ull << 40, (1ull << 62) + 12345 };
	struct htr_disk_thread t = {
		.pid = 4242, .tid = 4243, .flags = HTR_THREAD_NS,
		.time_shift = 31, .time_mult = 858993459, .time_zero = 5000,
		.comm = "worker",
	};
	struct htr_thread_info ti;
	struct htr_writer_meta m;
	struct htr_writer *w;
	struct htr_file *f;
	struct htr_err err;
	uint8_t *buf;
	size_t i, size, at;
	uint64_t ns;
	char msg[512];

	cr_assert_eq(htr_writer__open(&w, path, &err), 0, "%s", err.msg);
	cr_assert_eq(htr_writer__thread(w, &t), 0);
	cr_assert_eq(htr_writer__thread(w, &t), HTR_ERR_INVALID);
	memset(&m, 0, sizeof(m));
	cr_assert_eq(htr_writer__commit(w, &m), 0, "%s",
		     htr_writer__err(w)->msg);
	htr_writer__free(w);

	cr_assert_eq(htr_file_open(&f, path, NULL), 0, "%s", htr_file_last_error(f));
	cr_assert_eq(htr_file_thread(f, &ti, sizeof(ti)), 0);
	cr_assert_eq(ti.size, sizeof(ti));
	cr_assert_eq(ti.pid, 4242);
	cr_assert_eq(ti.tid, 4243);
	cr_assert_str_eq(ti.comm, "worker");
	cr_assert_eq(ti.flags, HTR_THREAD_NS);
	cr_assert_eq(ti.time_shift, 31);
	cr_assert_eq(ti.time_mult, 858993459);
	for (i = 0; i < sizeof(tscs) / sizeof(tscs[0]); i++) {
		cr_assert_eq(htr_ticks_to_ns(f, tscs[i], &ns), 0);
		cr_assert_eq(ns, perf_ns(tscs[i], 31, 858993459), "%zu", i);
		cr_assert_eq(htr_tsc_to_ns(f, tscs[i], &ns), 0);
		cr_assert_eq(ns, 5000 + perf_ns(tscs[i], 31, 858993459));
	}
	cr_assert_eq(htr_file_thread(f, &ti, 8), HTR_ERR_INVALID);
	cr_assert_eq(htr_tsc_to_ns(f, 1, NULL), HTR_ERR_INVALID);
	at = (size_t) ((const uint8_t *) f->thread - f->map);
	htr_file_close(f);

	/* Damaged records are refused at open. */
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf, "%s", path);
	buf[at + 8] = 0x80;       /* an unknown flag */
	spit(path, buf, size);
	cr_assert_eq(open_rc(path, 0, msg, sizeof(msg)), HTR_ERR_CORRUPT);
	cr_assert(strstr(msg, "thread record"), "%s", msg);
	buf[at + 8] = HTR_THREAD_NS;
	memset(buf + at + 48, 'x', 32);   /* comm without its NUL */
	spit(path, buf, size);
	cr_assert_eq(open_rc(path, 0, msg, sizeof(msg)), HTR_ERR_CORRUPT);
	free(buf);

	/* Saturation instead of a wrapped time; no conversion, no ns. */
	cr_assert_eq(htr_writer__open(&w, path, &err), 0, "%s", err.msg);
	t.time_shift = 0;
	t.time_mult = UINT64_MAX;
	cr_assert_eq(htr_writer__thread(w, &t), 0);
	cr_assert_eq(htr_writer__commit(w, &m), 0);
	htr_writer__free(w);
	cr_assert_eq(htr_file_open(&f, path, NULL), 0, "%s", htr_file_last_error(f));
	cr_assert_eq(htr_tsc_to_ns(f, 3, &ns), 0);
	cr_assert_eq(ns, UINT64_MAX);
	htr_file_close(f);
	cr_assert_eq(htr_writer__open(&w, path, &err), 0, "%s", err.msg);
	t.flags = 0;
	cr_assert_eq(htr_writer__thread(w, &t), 0);
	cr_assert_eq(htr_writer__commit(w, &m), 0);
	htr_writer__free(w);
	cr_assert_eq(htr_file_open(&f, path, NULL), 0, "%s", htr_file_last_error(f));
	cr_assert_eq(htr_file_thread(f, &ti, sizeof(ti)), 0);
	cr_assert_eq(htr_tsc_to_ns(f, 3, &ns), HTR_ERR_NOTFOUND);
	cr_assert_eq(htr_ticks_to_ns(f, 3, &ns), HTR_ERR_NOTFOUND);
	htr_file_close(f);

	/* A file without a thread (a raw trace's) says so. */
	write_random(path, 10, 2);
	cr_assert_eq(htr_file_open(&f, path, NULL), 0, "%s", htr_file_last_error(f));
	cr_assert_eq(htr_file_thread(f, &ti, sizeof(ti)), HTR_ERR_NOTFOUND);
	htr_file_close(f);
}

Test(file, foreign_files)
{
	char msg[600], p[400];
	size_t size;
	uint8_t *elf;

	/* An ELF executable. */
	elf = htr_test_slurp("/proc/self/exe", &size);
	cr_assert_not_null(elf, "%s", "/proc/self/exe");
	snprintf(p, sizeof(p), "%s/prog", dir);
	spit(p, elf, size);
	free(elf);
	cr_assert_eq(open_rc(p, 0, msg, sizeof(msg)), HTR_ERR_FORMAT);
	cr_assert(strstr(msg, "not an htr file"), "%s", msg);
	/* An empty file. */
	snprintf(p, sizeof(p), "%s/empty", dir);
	spit(p, "", 0);
	cr_assert_eq(open_rc(p, 0, msg, sizeof(msg)), HTR_ERR_FORMAT);
	cr_assert(strstr(msg, "empty"), "%s", msg);
	/* Text. */
	snprintf(p, sizeof(p), "%s/text", dir);
	spit(p, "hello, world\n", 13);
	cr_assert_eq(open_rc(p, 0, NULL, 0), HTR_ERR_FORMAT);
	/* A directory. */
	cr_assert_eq(open_rc(dir, 0, msg, sizeof(msg)), HTR_ERR_IO);
	cr_assert(strstr(msg, strerror(EISDIR)), "%s", msg);
	/* Nothing there. */
	snprintf(p, sizeof(p), "%s/missing.htr", dir);
	cr_assert_eq(open_rc(p, 0, msg, sizeof(msg)), HTR_ERR_IO);
	cr_assert(strstr(msg, strerror(ENOENT)), "%s", msg);
	cr_assert_eq(strncmp(msg, p, strlen(p)), 0, "%s", msg);
	/* Not a regular file. */
	cr_assert_eq(open_rc("/dev/null", 0, msg, sizeof(msg)),
		     HTR_ERR_FORMAT);
}

Test(file, killed_writer_leaves_nothing_that_opens)
{
	char tmp[400];
	pid_t pid;
	int status;

	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct htr_writer *w;
		struct htr_err err;
		uint32_t i;

		if (htr_writer__open(&w, path, &err))
			_exit(2);
		for (i = 0; i < 100000; i++) {
			struct htr_disk_block b;

			memset(&b, 0, sizeof(b));
			htr_disk__put48(b.first, i);
			htr_disk__put48(b.last, i);
			b.first_child = HTR_NONE;
			b.func_flags = HTR_FUNC_NONE;
			if (htr_writer__block(w, &b, NULL))
				_exit(3);
		}
		for (i = 0; i < 100000; i++)
			if (htr_writer__tsc(w, i, i))
				_exit(4);
		_exit(0);       /* killed before commit */
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cr_assert_eq(access(path, F_OK), -1);
	cr_assert_eq(open_rc(path, 0, NULL, 0), HTR_ERR_IO);
	/* The temporary output is there but does not look valid. */
	snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long) pid);
	cr_assert_eq(access(tmp, F_OK), 0);
	cr_assert_neq(open_rc(tmp, 0, NULL, 0), 0);
	/* The spool files were unlinked at once. */
	cr_assert_eq(dir_entries(), 1);
}

Test(file, free_without_commit_removes_everything)
{
	struct htr_writer *w;
	struct htr_err err;
	uint64_t i;

	/* An older file at the path survives a failed rewrite. */
	write_random(path, 20, 9);
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	put_block(w, 0, 5, HTR_NONE, 0, HTR_FUNC_NONE);
	for (i = 0; i < 50000; i++)     /* past the spool buffer */
		cr_assert_eq(htr_writer__tsc(w, i, i), 0);
	cr_assert_eq(dir_entries(), 2);
	htr_writer__free(w);
	cr_assert_eq(dir_entries(), 1);
	cr_assert_eq(open_rc(path, 1, NULL, 0), 0);
	htr_writer__free(NULL);
}

Test(file, read_only_directory)
{
	pid_t pid;
	int status;

	cr_assert_eq(chmod(dir, 0555), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct htr_writer *w = (void *) 1;
		struct htr_err err;
		int rc;

		/* root ignores permissions: drop to nobody first. */
		if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
			_exit(9);
		rc = htr_writer__open(&w, path, &err);
		if (rc != HTR_ERR_IO || w)
			_exit(1);
		if (!strstr(err.msg, path) || !strstr(err.msg, strerror(EACCES)))
			_exit(2);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "child status %d",
		     WEXITSTATUS(status));
}

Test(file, missing_directory)
{
	struct htr_writer *w;
	struct htr_err err;
	char p[400];

	snprintf(p, sizeof(p), "%s/no/such/dir/t.htr", dir);
	cr_assert_eq(htr_writer__open(&w, p, &err), HTR_ERR_IO);
	cr_assert_null(w);
	cr_assert(strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
}

Test(file, writer_rejects_bad_input)
{
	struct htr_writer_meta m;
	struct htr_writer *w;
	struct htr_err err;
	struct htr_disk_block b;

	memset(&m, 0, sizeof(m));
	m.ninsns = 100;

	/* Out-of-order time, and the error sticks. */
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	cr_assert_eq(htr_writer__tsc(w, 10, 1), 0);
	cr_assert_eq(htr_writer__tsc(w, 9, 2), HTR_ERR_INVALID);
	cr_assert(strstr(htr_writer__err(w)->msg, path));
	cr_assert_eq(htr_writer__commit(w, &m), HTR_ERR_INVALID);
	htr_writer__free(w);
	cr_assert_eq(access(path, F_OK), -1);

	/* Gaps and syncs out of order, unknown gap kind. */
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	cr_assert_eq(htr_writer__gap(w, 5, 0, HTR_GAP_ERROR, -3), 0);
	cr_assert_eq(htr_writer__gap(w, 4, 0, HTR_GAP_ERROR, -3),
		     HTR_ERR_INVALID);
	htr_writer__free(w);
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	cr_assert_eq(htr_writer__gap(w, 5, 0, 9, 0), HTR_ERR_INVALID);
	htr_writer__free(w);
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	cr_assert_eq(htr_writer__sync(w, 100, 0), 0);
	cr_assert_eq(htr_writer__sync(w, 99, 0), HTR_ERR_INVALID);
	htr_writer__free(w);

	/* IDs past 48 bits. */
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	cr_assert_eq(htr_writer__tsc(w, HTR_MAX_ID + 2, 0), HTR_ERR_LIMIT);
	htr_writer__free(w);
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	m.ninsns = HTR_MAX_ID + 2;
	cr_assert_eq(htr_writer__commit(w, &m), HTR_ERR_LIMIT);
	htr_writer__free(w);
	m.ninsns = 100;

	/* first > last; last going backward (not post-order). */
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	memset(&b, 0, sizeof(b));
	htr_disk__put48(b.first, 5);
	htr_disk__put48(b.last, 4);
	b.first_child = HTR_NONE;
	cr_assert_eq(htr_writer__block(w, &b, NULL), HTR_ERR_INVALID);
	htr_writer__free(w);
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	put_block(w, 5, 9, HTR_NONE, 0, 0);
	htr_disk__put48(b.first, 1);
	htr_disk__put48(b.last, 8);
	cr_assert_eq(htr_writer__block(w, &b, NULL), HTR_ERR_INVALID);
	htr_writer__free(w);

	/* Children claims that do not match the blocks. */
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	put_block(w, 1, 1, HTR_NONE, 0, 0);
	put_block(w, 2, 2, HTR_NONE, 0, 0);
	put_block(w, 0, 3, 0, 1, 0);     /* its only child is block 1 */
	cr_assert_eq(htr_writer__commit(w, &m), HTR_ERR_CORRUPT);
	cr_assert(strstr(htr_writer__err(w)->msg, "first_child"), "%s",
		  htr_writer__err(w)->msg);
	htr_writer__free(w);
	cr_assert_eq(access(path, F_OK), -1);

	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	put_block(w, 1, 1, HTR_NONE, 0, 0);
	put_block(w, 0, 3, 0, 1, 0);
	put_block(w, 0, 4, 0, 1, 0);     /* block 0 cannot be its child */
	cr_assert_eq(htr_writer__commit(w, &m), HTR_ERR_CORRUPT);
	htr_writer__free(w);

	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	put_block(w, 1, 3, HTR_NONE, 0, 0);
	put_block(w, 3, 4, HTR_NONE, 0, 0);  /* overlaps the previous */
	cr_assert_eq(htr_writer__commit(w, &m), HTR_ERR_CORRUPT);
	htr_writer__free(w);

	/* A block past ninsns. */
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	put_block(w, 1, 100, HTR_NONE, 0, 0);
	cr_assert_eq(htr_writer__commit(w, &m), HTR_ERR_INVALID);
	htr_writer__free(w);

	/* Nothing left over by any of it. */
	cr_assert_eq(dir_entries(), 0);
}

/*
 * @n leaf roots, each one instruction, but for the ones at @bad (HTR_NONE:
 * none), which run into the next root; or, with @parent, all of them
 * children of one last block whose first_child is off by one.  Committed
 * on @threads: returns the error and its message in @msg, and the ranges
 * linked at once in *@ranges (if not NULL).
 */
static int commit_roots(uint32_t n, const uint32_t *bad, int parent,
			unsigned threads, char *msg, size_t size,
			unsigned *ranges)
{
	struct htr_writer_meta m;
	struct htr_writer *w;
	struct htr_err err;
	uint32_t i, k = 0;
	int rc;

	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	htr_writer__threads(w, threads);
	for (i = 0; i < n; i++) {
		int over = bad && bad[k] == i;

		k += over;
		put_block(w, 2 * i + 1, 2 * i + 1 + 2 * over, HTR_NONE, 0, 0);
	}
	if (parent)
		put_block(w, 0, 2 * n + 1, 1, n, 0);
	memset(&m, 0, sizeof(m));
	m.ninsns = 2 * n + 2;
	rc = htr_writer__commit(w, &m);
	snprintf(msg, size, "%s", htr_writer__err(w)->msg);
	if (ranges)
		*ranges = htr_writer__link_ranges(w);
	htr_writer__free(w);
	return rc;
}

/* A commit in ranges finds what one pass finds: the highest block's error,
 * whichever range has it, and the same one when two ranges have one. */
Test(file, writer_cut_errors)
{
	static const uint32_t lower[] = { 20000, HTR_NONE };
	static const uint32_t both[] = { 20000, 90000, HTR_NONE };
	static const struct {
		const uint32_t *bad;
		int parent;
		const char *want;
	} cases[] = {
		{ lower, 0, "block 20000: overlaps the next root" },
		{ both, 0, "block 90000: overlaps the next root" },
		/* found at block 0, in the lowest range, of the parent that
		 * the cut's state brought down */
		{ NULL, 1, "block 100000: first_child does not match" },
	};
	char one[512], cut[512];
	unsigned c, t, ranges;

	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		cr_assert_eq(commit_roots(100000, cases[c].bad, cases[c].parent,
					  1, one, sizeof(one), NULL),
			     HTR_ERR_CORRUPT);
		cr_assert(strstr(one, cases[c].want), "%s", one);
		for (t = 2; t <= 4; t++) {
			cr_assert_eq(commit_roots(100000, cases[c].bad,
						  cases[c].parent, t, cut,
						  sizeof(cut), NULL),
				     HTR_ERR_CORRUPT);
			cr_assert_str_eq(cut, one);
		}
	}
	cr_assert_eq(dir_entries(), 0);
	/* Those blocks, well formed, are cut (the errors above came from
	 * ranges). */
	for (t = 2; t <= 4; t++) {
		cr_assert_eq(commit_roots(100000, NULL, 0, t, cut, sizeof(cut),
					  &ranges), 0, "%s", cut);
		cr_assert_eq(ranges, t);
	}
}

/*
 * About @n random blocks (put_random()), with, if @alter, one record made
 * wrong, committed to @p on @threads: returns the error, its message in
 * @msg.
 */
static int commit_random_flags(const char *p, uint32_t n, uint64_t seed,
			       int alter, unsigned threads, unsigned flags,
			       char *msg, size_t size)
{
	struct htr_writer_meta m;
	struct htr_writer *w;
	struct htr_err err;
	uint32_t bad, how, i;
	int rc;

	rng_state = seed;
	bad = alter ? (uint32_t) below(n) : UINT32_MAX;
	how = (uint32_t) below(3);
	cr_assert_eq(htr_writer__open_flags(&w, p, flags, &err), 0, "%s",
		     err.msg);
	htr_writer__threads(w, threads);
	for (i = 0; i < 5; i++)       /* the functions put_random() names */
		cr_assert_eq(htr_writer__func(w, 0x1000 + i), 0);
	memset(&m, 0, sizeof(m));
	m.ninsns = put_random(w, n, bad, how) + 1;
	rc = htr_writer__commit(w, &m);
	snprintf(msg, size, "%s", htr_writer__err(w)->msg);
	htr_writer__free(w);
	return rc;
}

static int commit_random(const char *p, uint32_t n, uint64_t seed,
			 int alter, unsigned threads, char *msg, size_t size)
{
	return commit_random_flags(p, n, seed, alter, threads, 0, msg, size);
}

/* Two files the same but for their build time (and so the header's
 * hash). */
static void assert_same_but_time(const char *a, const char *b)
{
	size_t na, nb;
	uint8_t *x = htr_test_slurp(a, &na), *y = htr_test_slurp(b, &nb);
	struct htr_disk_header *hx = (struct htr_disk_header *) x;
	struct htr_disk_header *hy = (struct htr_disk_header *) y;

	cr_assert(x && y && na == nb && na >= sizeof(*hx));
	hx->build_time = hy->build_time = 0;
	hx->header_hash = hy->header_hash = 0;
	cr_assert_eq(memcmp(x, y, na), 0);
	free(x);
	free(y);
}

/* The commit into @path that returned @rc2 (message @msg2) did what the
 * one into @p1 did (@rc1, @msg1): the same error, or the same file. */
static void same_outcome(uint64_t seed, int rc1, const char *p1,
			 const char *msg1, int rc2, const char *msg2)
{
	cr_assert_eq(rc2, rc1, "seed %llu: %s / %s",
		     (unsigned long long) seed, msg1, msg2);
	if (rc1)        /* but for the file's name */
		cr_assert_str_eq(strstr(msg2, ": "), strstr(msg1, ": "));
	else
		assert_same_but_time(p1, path);
}

/* The tree linked in ranges is the one-pass tree, error for error. */
Test(file, writer_cut_same_as_one_pass, .timeout = 300)
{
	char one[512], cut[512], p1[320];
	uint64_t seed;
	unsigned t;
	int rc;

	snprintf(p1, sizeof(p1), "%s/one.htr", dir);
	for (seed = 1; seed <= 24; seed++) {
		int alter = seed % 4 != 0;

		rc = commit_random(p1, 100000, seed, alter, 1, one,
				   sizeof(one));
		cr_assert(alter || rc == 0, "%s", one);
		for (t = 2; t <= 4; t++)
			same_outcome(seed, rc, p1, one,
				     commit_random(path, 100000, seed, alter,
						   t, cut, sizeof(cut)), cut);
	}
}

/* Linked through mapped windows (several: 400000 blocks are 12.8 MB) or
 * through pread and pwrite, as where the file system cannot map: the
 * same tree, error for error. */
Test(file, writer_mapped_same_as_unmapped, .timeout = 300)
{
	char un[512], mapped[512], p1[320];
	uint64_t seed;
	unsigned t;
	int rc;

	snprintf(p1, sizeof(p1), "%s/unmapped.htr", dir);
	for (seed = 1; seed <= 6; seed++) {
		int alter = seed % 3 != 0;

		for (t = 1; t <= 2; t++) {
			rc = commit_random_flags(p1, 400000, seed, alter, t,
						 HTR_WRITER_NO_MAP, un,
						 sizeof(un));
			cr_assert(alter || rc == 0, "%s", un);
			same_outcome(seed, rc, p1, un,
				     commit_random(path, 400000, seed, alter,
						   t, mapped, sizeof(mapped)),
				     mapped);
		}
	}
}

Test(file, large_spooled_sections)
{
	struct htr_writer_meta m;
	struct htr_writer *w;
	struct htr_err err;
	struct htr_file *f;
	struct htr_open_opts o;
	struct htr_file_info fi;
	char name[64];
	uint64_t i, tsc;

	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	for (i = 0; i < 100000; i++)
		cr_assert_eq(htr_writer__func(w, i * 3), 0);
	for (i = 0; i < 300000; i++)
		cr_assert_eq(htr_writer__tsc(w, 2 * i, i * 11), 0);
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "/lib/module-%llu.so",
			 (unsigned long long) i);
		cr_assert_eq(htr_writer__image(w, 1, i << 20, 0, 100, name), 0);
	}
	put_block(w, 0, 599999, HTR_NONE, 0, 99999);
	memset(&m, 0, sizeof(m));
	m.ninsns = 600000;
	cr_assert_eq(htr_writer__commit(w, &m), 0, "%s",
		     htr_writer__err(w)->msg);
	htr_writer__free(w);
	htr_open_opts_init(&o);
	o.verify_body = 1;
	cr_assert_eq(htr_file_open(&f, path, &o), 0, "%s", htr_file_last_error(f));
	cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
	cr_assert_eq(fi.nfuncs, 100000);
	cr_assert_eq(fi.ntsc, 300000);
	cr_assert_eq(fi.nimages, 5000);
	for (i = 0; i < 600000; i += 997) {
		cr_assert_eq(htr_tsc_for_insn(f, i, &tsc), 0);
		cr_assert_eq(tsc, i / 2 * 11);
	}
	cr_assert_eq(f->funcs[77777], 77777 * 3);
	{
		struct htr_block_info bi;

		cr_assert_eq(htr_block_get(f, 0, &bi, sizeof(bi)), 0);
		cr_assert_eq(bi.entry, 99999 * 3);
	}
	htr_file_close(f);
}

/* Peak RSS must not grow with the number of blocks: 4 million blocks
 * (128 MiB of records) may cost only the writer's fixed buffers. */
Test(file, writer_memory_is_bounded, .timeout = 300)
{
	struct htr_writer_meta m;
	struct htr_writer *w;
	struct htr_err err;
	struct rusage ru;
	long before;
	uint32_t i, n = 4000000;

	getrusage(RUSAGE_SELF, &ru);
	before = ru.ru_maxrss;
	cr_assert_eq(htr_writer__open(&w, path, &err), 0);
	/* Triples: two leaves and their parent, under one root. */
	for (i = 0; i + 1 < n; i += 3) {
		uint64_t id = (uint64_t) i * 4 + 1;

		put_block(w, id + 1, id + 1, HTR_NONE, 0, 0);
		put_block(w, id + 2, id + 2, HTR_NONE, 0, 0);
		put_block(w, id, id + 3, i, 2, 0);
		if (i % 30000 == 0)
			cr_assert_eq(htr_writer__tsc(w, id, i), 0);
	}
	put_block(w, 0, (uint64_t) n * 4 + 10, 2, (n - 1) / 3, 0);
	memset(&m, 0, sizeof(m));
	m.ninsns = (uint64_t) n * 4 + 11;
	cr_assert_eq(htr_writer__commit(w, &m), 0, "%s",
		     htr_writer__err(w)->msg);
	cr_assert_eq(htr_writer__max_depth(w), 3);
	htr_writer__free(w);
	getrusage(RUSAGE_SELF, &ru);
	cr_assert_lt(ru.ru_maxrss - before, 16 * 1024,
		     "peak RSS grew by %ld KiB", ru.ru_maxrss - before);
	cr_assert_eq(open_rc(path, 0, NULL, 0), 0);
}

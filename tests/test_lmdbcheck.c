/*
 * The LMDB file check against LMDB itself: a sidecar-shaped environment
 * (named databases, values big enough for overflow pages, enough keys for
 * branch pages, a free list) passes; every damaged copy that passes must
 * then open, read back and take a write in LMDB without crashing - the
 * check's whole promise - and pages overwritten with 0xff (the fuzzing
 * report's single-page crash) never pass.
 */
#include "lmdbcheck.h"
#include "tmpdir.h"
#include "slurp.h"

#include <criterion/criterion.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

HTR_TEST_TMPDIR(lmdbcheck);

static const char *const dbs[] = { "meta", "tsc", "names", "blocks" };

/* An environment in @path with something in every database, values of
 * every size class, and deleted records (a free list). */
static void make_env(const char *path)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi[4];
	uint8_t val[20000];
	char key[64];
	unsigned i, k, round;

	cr_assert_eq(mkdir(path, 0777), 0);
	cr_assert_eq(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 8);
	mdb_env_set_mapsize(env, 64u << 20);
	cr_assert_eq(mdb_env_open(env, path, 0, 0644), 0);
	for (round = 0; round < 3; round++) {
		cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
		for (k = 0; k < 4; k++) {
			cr_assert_eq(mdb_dbi_open(txn, dbs[k], MDB_CREATE,
						  &dbi[k]), 0);
			for (i = 0; i < 300; i++) {
				MDB_val kv, dv;
				size_t len = i % 50 == 7 ? 9000 + i : 8 + i % 200;

				memset(val, (int) (i + k), len);
				snprintf(key, sizeof(key), "%s-%05u", dbs[k], i);
				kv.mv_data = key;
				kv.mv_size = strlen(key);
				dv.mv_data = val;
				dv.mv_size = len;
				if (round == 2 && i % 3 == 0)
					(void) mdb_del(txn, dbi[k], &kv, NULL);
				else
					cr_assert_eq(mdb_put(txn, dbi[k], &kv,
							     &dv, 0), 0);
			}
		}
		cr_assert_eq(mdb_txn_commit(txn), 0);
	}
	mdb_env_close(env);
}

static void spill(const char *path, const uint8_t *buf, size_t size)
{
	FILE *fp = fopen(path, "wb");

	cr_assert_not_null(fp);
	cr_assert_eq(fwrite(buf, 1, size, fp), size);
	fclose(fp);
}

/* What htr does after a passing check: open, read everything, write. */
static void use_env(const char *path)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_cursor *cur;
	MDB_val k, v;
	unsigned i;
	uint64_t sum = 0;

	if (mdb_env_create(&env))
		return;
	mdb_env_set_maxdbs(env, 8);
	mdb_env_set_mapsize(env, 64u << 20);
	if (mdb_env_open(env, path, 0, 0644) ||
	    mdb_txn_begin(env, NULL, 0, &txn)) {
		mdb_env_close(env);
		return;
	}
	for (i = 0; i < 4; i++) {
		if (mdb_dbi_open(txn, dbs[i], 0, &dbi))
			continue;
		if (mdb_cursor_open(txn, dbi, &cur))
			continue;
		while (!mdb_cursor_get(cur, &k, &v, MDB_NEXT))
			sum += v.mv_size ? ((uint8_t *) v.mv_data)[v.mv_size - 1]
					 : 0;
		mdb_cursor_close(cur);
		k.mv_data = "written-after-check";
		k.mv_size = 19;
		v.mv_data = &sum;
		v.mv_size = sizeof(sum);
		(void) mdb_put(txn, dbi, &k, &v, 0);
	}
	(void) mdb_txn_commit(txn);
	mdb_env_close(env);
}

Test(lmdbcheck, valid_environment_passes)
{
	char env[300], data[320];
	struct htr_err e = { 0, "" };

	snprintf(env, sizeof(env), "%s/ok", dir);
	make_env(env);
	snprintf(data, sizeof(data), "%s/data.mdb", env);
	cr_assert_eq(htr_lmdb__check(data, &e), 0, "%s", e.msg);
	snprintf(data, sizeof(data), "%s/missing.mdb", env);
	cr_assert_eq(htr_lmdb__check(data, &e), 0);
}

/* A page overwritten with 0xff anywhere is caught. */
Test(lmdbcheck, ff_pages_fail, .timeout = 120)
{
	char env[300], data[320];
	struct htr_err e;
	uint8_t *orig, *buf;
	size_t size, pg;

	snprintf(env, sizeof(env), "%s/ff", dir);
	make_env(env);
	snprintf(data, sizeof(data), "%s/data.mdb", env);
	orig = htr_test_slurp(data, &size);
	cr_assert_not_null(orig, "%s", data);
	buf = malloc(size);
	cr_assert_not_null(buf);
	for (pg = 0; pg * 4096 < size; pg++) {
		int rc;

		memcpy(buf, orig, size);
		memset(buf + pg * 4096, 0xff, 4096);
		spill(data, buf, size);
		e.code = 0;
		rc = htr_lmdb__check(data, &e);
		if (rc == 0)
			use_env(env);   /* a free page: LMDB must cope */
		else
			cr_assert(strstr(e.msg, data), "%s", e.msg);
	}
	free(buf);
	free(orig);
}

/* Random damage: whatever passes the check, LMDB survives. */
Test(lmdbcheck, random_damage, .timeout = 300)
{
	char env[300], data[320];
	struct htr_err e;
	uint8_t *orig, *buf;
	size_t size;
	unsigned i, passed = 0, caught = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	snprintf(env, sizeof(env), "%s/rnd", dir);
	make_env(env);
	snprintf(data, sizeof(data), "%s/data.mdb", env);
	orig = htr_test_slurp(data, &size);
	cr_assert_not_null(orig, "%s", data);
	buf = malloc(size);
	cr_assert_not_null(buf);
	for (i = 0; i < 1500; i++) {
		size_t n, j, cut = size;

		memcpy(buf, orig, size);
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		n = 1 + (rng >> 60);
		for (j = 0; j < n; j++) {
			rng = rng * 6364136223846793005ull + 1;
			buf[(rng >> 20) % size] ^= (uint8_t) (1 + (rng >> 56));
		}
		if (i % 10 == 9)
			cut = (size_t) ((rng >> 8) % size);
		spill(data, buf, cut);
		e.code = 0;
		if (htr_lmdb__check(data, &e) == 0) {
			passed++;
			use_env(env);
		} else {
			caught++;
		}
	}
	cr_log_info("random damage: %u caught, %u passed (LMDB survived)",
		    caught, passed);
	cr_assert_gt(caught, 0);
	free(buf);
	free(orig);
}

/*
 * What fuzz_sidecar found, kept as reproducers (tests/data/fuzz/):
 * - the newer meta is sound but the older one's trees lie past the end of
 *   the file; LMDB read them (it takes the meta the lock file's
 *   transaction ID names) and died of SIGBUS in mdb_dbi_open;
 * - nodes of a page overlap; deleting one made LMDB's mdb_node_del move
 *   memory past the page (heap-buffer-overflow in mdb_cursor_del).
 * Each must be refused with a message saying what is wrong.
 */
static void reproducer(const char *name, const char *why)
{
	char src[600], env[300], data[320], cmd[1300];
	const char *root = getenv("HTR_SOURCE_ROOT");
	struct htr_err e = { 0, "" };

	cr_assert_not_null(root, "run through meson test");
	snprintf(src, sizeof(src), "%s/tests/data/fuzz/%s", root, name);
	snprintf(env, sizeof(env), "%s/%s.d", dir, name);
	cr_assert_eq(mkdir(env, 0777), 0);
	snprintf(data, sizeof(data), "%s/data.mdb", env);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, data);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(htr_lmdb__check(data, &e), HTR_ERR_CORRUPT, "%s", name);
	cr_assert(strstr(e.msg, why), "%s: %s", name, e.msg);
}

Test(lmdbcheck, fuzzer_reproducers)
{
	reproducer("sidecar-older-meta.mdb", "past the end");
	reproducer("sidecar-overlapping-nodes.mdb", "overlap");
}

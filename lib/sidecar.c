/*
 * The store: one LMDB environment FILE.htr.lmdb/ per sidecar per process
 * (include/htr/store.h; layout in FORMAT.md, "Sidecar").  Opening,
 * trusting, sizing and counting transactions live here; what the
 * analyzers store, keyed by their names, is lib/results.c.
 */
/* F_OFD_SETLK: a lock owned by our own file description, so taking and
 * dropping it never touches locks LMDB holds in this process. */
#define _GNU_SOURCE
#include "analyze.h"
#include "abi.h"
#include "le.h"
#include "lmdbcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static const char *const db_names[HTR_DB_N] = {
	"meta", "values",
	/* layout 1 */
	"tsc", "names", "blocks",
};

static int is_corrupt(int mrc)
{
	return mrc == MDB_CORRUPTED || mrc == MDB_PAGE_NOTFOUND ||
	       mrc == MDB_INVALID || mrc == MDB_VERSION_MISMATCH ||
	       mrc == MDB_BAD_TXN || mrc == MDB_INCOMPATIBLE;
}

/* Errors that mean "this sidecar cannot be written": fall back to memory. */
static int is_unwritable(int mrc)
{
	/* EIO: LMDB's word for a short write, a full disk too. */
	return mrc == EACCES || mrc == EROFS || mrc == ENOSPC ||
	       mrc == EPERM || mrc == EDQUOT || mrc == EFBIG || mrc == EIO;
}

/*
 * LMDB returns EIO for a write that wrote less than it asked
 * (mdb_page_flush: "short write, filesystem full?") and so loses the
 * ENOSPC behind it.  A short write with less than a few pages left on
 * the file system is a full disk; anything else stays an I/O error.
 * Root may write into the blocks reserved for it, hence f_bfree.
 */
static int fs_full(const char *dir)
{
	struct statvfs vs;
	uint64_t left;

	if (statvfs(dir, &vs) < 0)
		return 0;
	left = (uint64_t) (geteuid() == 0 ? vs.f_bfree : vs.f_bavail) *
	       vs.f_frsize;
	return left < 1024 * 1024;
}

const char *htr_sidecar__strerror(const struct htr_store *st, int mrc)
{
	if ((mrc == EIO || mrc == ENOSPC) && st->sidecar &&
	    fs_full(st->sidecar))
		return strerror(ENOSPC);
	return mdb_strerror(mrc);
}

/*
 * Begin a transaction on the store's environment, counted in st->active
 * (txn_done() uncounts it).  When another process grew the map, LMDB
 * wants the new size adopted while this process has no transaction open;
 * with other handles reading that must wait (the error is returned).
 */
static int txn_begin(struct htr_store *st, unsigned flags, MDB_txn **txn)
{
	int mrc;

	pthread_mutex_lock(&st->lock);
	mrc = mdb_txn_begin(st->env, NULL, flags, txn);
	if (mrc == MDB_MAP_RESIZED && !st->active) {
		mdb_env_set_mapsize(st->env, 0);
		mrc = mdb_txn_begin(st->env, NULL, flags, txn);
	}
	if (!mrc)
		st->active++;
	pthread_mutex_unlock(&st->lock);
	return mrc;
}

static void txn_done(struct htr_store *st)
{
	pthread_mutex_lock(&st->lock);
	st->active--;
	pthread_mutex_unlock(&st->lock);
}

/* --- the store: one environment per sidecar per process --- */

void htr_store_opts_init_size(struct htr_store_opts *opts, size_t size)
{
	htr_abi__init(opts, size);
}

static int store_fail(struct htr_store *st, int mrc, const char *what)
{
	if (mrc == ENOMEM)
		return htr_err__set(&st->err, HTR_ERR_NOMEM, "out of memory");
	if (is_corrupt(mrc))
		return htr_err__set(&st->err, HTR_ERR_CORRUPT, "%s: %s: corrupt "
				    "sidecar (%s); remove it to recompute",
				    st->sidecar, what, mdb_strerror(mrc));
	return htr_err__set(&st->err, HTR_ERR_IO, "%s: %s: %s", st->sidecar,
			    what, htr_sidecar__strerror(st, mrc));
}

/* Open or create the named databases once: LMDB wants dbi handles opened
 * by one transaction at a time per process, so readers never open them.
 * 1: they are missing in a read-only sidecar (it is out of date). */
static int open_dbs(struct htr_store *st)
{
	MDB_txn *txn = NULL;
	int mrc, i;

	mrc = txn_begin(st, st->readonly ? MDB_RDONLY : 0, &txn);
	if (mrc) {
		if (is_unwritable(mrc))
			goto unwritable;
		return store_fail(st, mrc, "starting a transaction");
	}
	for (i = 0; i < HTR_DB_USED; i++) {
		mrc = mdb_dbi_open(txn, db_names[i],
				   st->readonly ? 0 : MDB_CREATE, &st->dbi[i]);
		if (mrc)
			break;
	}
	if (!mrc)
		mrc = mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
	txn_done(st);
	if (mrc == MDB_NOTFOUND && st->readonly) {
		snprintf(st->note, sizeof(st->note), "%s: read-only and out "
			 "of date", st->sidecar);
		return 1;
	}
	if (is_unwritable(mrc))
		goto unwritable;
	return mrc ? store_fail(st, mrc, "opening its databases") : 0;
unwritable:
	snprintf(st->note, sizeof(st->note), "%s: cannot write: %s",
		 st->sidecar, htr_sidecar__strerror(st, mrc));
	return 1;
}

/* Whether the sidecar directory and its files are the caller's own and
 * not writable by others (git's safe.directory rule): LMDB believes
 * whatever its files say, so someone else's are not opened.  Sets the
 * note when not. */
static int trusted(struct htr_store *st)
{
	static const char *const names[] = { "", "/data.mdb", "/lock.mdb" };
	char path[4200];
	struct stat sb;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", st->sidecar, names[i]);
		if (lstat(path, &sb) < 0)
			continue;
		if (sb.st_uid != geteuid() || (sb.st_mode & S_IWOTH) ||
		    (i && !S_ISREG(sb.st_mode))) {
			snprintf(st->note, sizeof(st->note), "%.400s: not trusted "
				 "(%s by another user, writable by others or "
				 "not a plain file)", path, i ? "owned" :
				 "a directory owned");
			return 0;
		}
	}
	return 1;
}

/* Whether another process may have the environment open, and so be
 * writing to data.mdb as we check it: LMDB holds a lock on lock.mdb for
 * as long as an environment is open. */
static int maybe_in_use(const struct htr_store *st)
{
#ifdef F_OFD_SETLK
	struct flock fl;
	char path[4200];
	int fd, busy;

	snprintf(path, sizeof(path), "%s/lock.mdb", st->sidecar);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno != ENOENT;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	busy = fcntl(fd, F_OFD_SETLK, &fl) < 0;
	close(fd);             /* drops our lock, and only ours */
	return busy;
#else
	(void) st;
	return 1;
#endif
}

/*
 * Give lock.mdb its blocks before LMDB maps it.  LMDB sizes a new lock
 * file with ftruncate() and writes it through the map: on a full file
 * system the first store into a page without a block is SIGBUS, not an
 * error.  LMDB keeps a lock file at least as large as it needs (it
 * counts its reader slots from the size), so allocating its size here,
 * 128 + 64 bytes per reader (LMDB 0.9's layout: cache-line slots), leaves
 * it nothing to extend.  0, or an errno: ENOSPC where there is no room
 * (other failures, a read-only directory or a file system without
 * fallocate, are left to LMDB).
 */
static int lock_room(struct htr_store *st)
{
	char path[4200];
	unsigned readers = 126;
	int fd, rc = 0;

	if (st->env)
		mdb_env_get_maxreaders(st->env, &readers);
	snprintf(path, sizeof(path), "%s/lock.mdb", st->sidecar);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return 0;
	if (fallocate(fd, 0, 0, (off_t) readers * 64 + 128) < 0 &&
	    (errno == ENOSPC || errno == EDQUOT))
		rc = errno;
	close(fd);
	return rc;
}

/* Opening the environment; 1: unusable (note set), 0, or negative. */
static int open_env(struct htr_store *st, uint64_t nblocks)
{
	static const unsigned modes[] = { 0, MDB_RDONLY,
					  MDB_RDONLY | MDB_NOLOCK };
	char data[4200];
	struct stat sb;
	MDB_envinfo info;
	MDB_stat ms;
	size_t m;
	int mrc = 0, first = 0, had_data;

	if (mkdir(st->sidecar, 0777) == 0)
		st->created = true;
	else if (errno != EEXIST) {
		snprintf(st->note, sizeof(st->note), "%s: cannot create: %s",
			 st->sidecar, strerror(errno));
		return 1;
	}
	if (!trusted(st))
		return 1;
	/* LMDB trusts its file: check every page it could reach first.
	 * Another process may be creating it or committing to it as we read
	 * (a file shorter than its metas, a meta half written, pages reused
	 * under our walk): while another process has it open, damage that
	 * lasts is damage, so look again a few times before saying so. */
	snprintf(data, sizeof(data), "%s/data.mdb", st->sidecar);
	for (m = 0; ; m++) {
		mrc = htr_lmdb__check(data, &st->err);
		if (mrc != HTR_ERR_CORRUPT || m == 5 || !maybe_in_use(st))
			break;
		usleep(20000u << m);
	}
	if (mrc < 0) {
		char why[sizeof(st->err.msg)];

		memcpy(why, st->err.msg, sizeof(why));
		return htr_err__set(&st->err, mrc, "%s; remove %s to "
				    "recompute", why, st->sidecar);
	}
	/* Room for the results.  The map is address space, not memory or
	 * disk, and growing it later needs every other transaction of the
	 * process closed, which a shared store cannot promise: be
	 * generous once. */
	st->mapsize = (size_t) 1 << 32;
	if ((size_t) nblocks * 64 > st->mapsize)
		st->mapsize = (size_t) nblocks * 64;
	had_data = stat(data, &sb) == 0 && sb.st_size > 0;
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		mrc = mdb_env_create(&st->env);
		if (mrc)
			return store_fail(st, mrc, "creating the environment");
		mdb_env_set_maxdbs(st->env, HTR_DB_N);
		mdb_env_set_mapsize(st->env, st->mapsize);
		if (!(modes[m] & MDB_RDONLY))
			mrc = lock_room(st);
		/* MDB_NOTLS: read transactions belong to handles, not to
		 * threads, so one thread may hold several and a handle may
		 * move between threads. */
		if (!mrc)
			mrc = mdb_env_open(st->env, st->sidecar,
					   MDB_NOTLS | modes[m], 0666);
		if (!mrc)
			break;
		mdb_env_close(st->env);
		st->env = NULL;
		/* The writable open's error says why; the read-only ones
		 * after it are only fallbacks (on a full disk they fail
		 * with EBADF or ENOENT on the file the first left empty). */
		if (!first)
			first = mrc;
		if (is_corrupt(mrc) && had_data)
			return store_fail(st, mrc, "opening");
		/* A data file this open began has nothing to read: what
		 * it wrote of it (a meta page of two) would only read as
		 * damage next time. */
		if (!had_data) {
			unlink(data);
			break;
		}
		if (!is_unwritable(mrc) && mrc != ENOENT)
			break;
	}
	if (!st->env) {
		snprintf(st->note, sizeof(st->note), "%s: cannot %s: %s",
			 st->sidecar, is_unwritable(first) ? "write" : "open",
			 htr_sidecar__strerror(st, first));
		return 1;
	}
	st->readonly = modes[m] & MDB_RDONLY;
	/* A truncated data file would fault when its pages are touched:
	 * compare the last page in use with the file's size first. */
	snprintf(data, sizeof(data), "%s/data.mdb", st->sidecar);
	if (mdb_env_info(st->env, &info) || mdb_env_stat(st->env, &ms) ||
	    stat(data, &sb) < 0)
		return htr_err__sys(&st->err, "%s: cannot inspect", st->sidecar);
	if (((uint64_t) info.me_last_pgno + 1) * ms.ms_psize >
	    (uint64_t) sb.st_size)
		return htr_err__set(&st->err, HTR_ERR_CORRUPT, "%s: data.mdb is "
				    "truncated (%llu bytes, %llu in use); "
				    "remove the sidecar to recompute",
				    st->sidecar, (unsigned long long) sb.st_size,
				    (unsigned long long) (info.me_last_pgno + 1) *
				    ms.ms_psize);
	if (info.me_mapsize > st->mapsize)
		st->mapsize = info.me_mapsize;
	return open_dbs(st);
}

int htr_store_open(struct htr_store **out, const struct htr_file *file,
		   const struct htr_store_opts *opts)
{
	struct htr_store_opts o;
	struct htr_file_info fi;
	struct htr_store *st;
	int rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return HTR_ERR_NOMEM;
	*out = st;
	if (pthread_mutex_init(&st->lock, NULL))
		return htr_err__set(&st->err, HTR_ERR_NOMEM, "cannot create "
				    "a mutex");
	if (pthread_mutex_init(&st->compute, NULL)) {
		pthread_mutex_destroy(&st->lock);
		return htr_err__set(&st->err, HTR_ERR_NOMEM, "cannot create "
				    "a mutex");
	}
	st->lock_ok = true;
	rc = htr_store__builtins(st);
	if (rc < 0)
		return htr_err__set(&st->err, rc, "registering the built-in "
				    "analyzers: %s", htr_errstr(rc));
	if (htr_abi__in(&o, sizeof(o), opts, htr_abi__size_of(opts),
			HTR_ABI_SIZE0(struct htr_store_opts, no_sidecar)) < 0)
		return htr_err__set(&st->err, HTR_ERR_INVALID, "bad options "
				    "size %zu", htr_abi__size_of(opts));
	memset(&fi, 0, sizeof(fi));
	if (htr_file_info(file, &fi, sizeof(fi)) < 0)
		return htr_err__set(&st->err, HTR_ERR_INVALID, "no open .htr "
				    "file");
	st->file = file;
	if (o.sidecar) {
		st->sidecar = strdup(o.sidecar);
	} else {
		const char *path = htr_file_path(file);
		size_t n;

		/* A file from memory has no place for a sidecar. */
		if (!path) {
			o.no_sidecar = 1;
			path = "";
		}
		n = strlen(path) + sizeof(".lmdb");

		st->sidecar = malloc(n);
		if (st->sidecar)
			snprintf(st->sidecar, n, "%s.lmdb", path);
	}
	if (!st->sidecar)
		return htr_err__set(&st->err, HTR_ERR_NOMEM, "out of memory");
	if (o.no_sidecar) {
		snprintf(st->note, sizeof(st->note), "no sidecar requested");
		rc = 1;
	} else {
		rc = open_env(st, fi.nblocks);
		if (rc < 0)
			return rc;
	}
	if (rc == 1) {
		if (st->env)
			mdb_env_close(st->env);
		st->env = NULL;
		st->flags |= HTR_STORE_IN_MEMORY;
	}
	htr_err__clear(&st->err);
	return 0;
}

void htr_store_close(struct htr_store *st)
{
	if (!st)
		return;
	if (st->env)
		mdb_env_close(st->env);
	if (st->created && st->discard) {
		static const char *const files[] = { "data.mdb", "lock.mdb" };
		char path[4200];
		size_t i;

		for (i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), "%s/%s", st->sidecar,
				 files[i]);
			unlink(path);
		}
		rmdir(st->sidecar);
	}
	if (st->lock_ok) {
		pthread_mutex_destroy(&st->lock);
		pthread_mutex_destroy(&st->compute);
	}
	free(st->sidecar);
	free(st);
}

const char *htr_store_last_error(const struct htr_store *st)
{
	return st ? st->err.msg : "";
}

unsigned htr_store_flags(const struct htr_store *st)
{
	return st ? st->flags : 0;
}

const char *htr_store_note(const struct htr_store *st)
{
	return st ? st->note : "";
}

const char *htr_store_sidecar(const struct htr_store *st)
{
	return st && st->sidecar ? st->sidecar : "";
}

struct reader_count {
	char pid[32];
	uint32_t all, mine;
};

/* One line per reader slot in use (after a header line). */
static int count_reader(const char *msg, void *ctx)
{
	struct reader_count *c = ctx;
	const char *p = msg;

	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return 0;
	c->all++;
	if (!strncmp(p, c->pid, strlen(c->pid)) &&
	    p[strlen(c->pid)] == ' ')
		c->mine++;
	return 0;
}

int htr_store_info(const struct htr_store *st, struct htr_store_info *info,
		   size_t size)
{
	struct htr_store_info si;
	struct reader_count c;
	unsigned maxr = 0;

	if (!st || !info)
		return HTR_ERR_INVALID;
	memset(&si, 0, sizeof(si));
	if (st->env) {
		memset(&c, 0, sizeof(c));
		snprintf(c.pid, sizeof(c.pid), "%ld", (long) getpid());
		if (mdb_reader_list(st->env, count_reader, &c) < 0 ||
		    mdb_env_get_maxreaders(st->env, &maxr))
			return HTR_ERR_IO;
		si.max_readers = maxr;
		si.readers = c.all;
		si.process_readers = c.mine;
	}
	return htr_abi__out(info, size, &si, sizeof(si),
			    HTR_ABI_SIZE0(struct htr_store_info,
					  process_readers));
}

int htr_sidecar__begin(struct htr_store *st, unsigned flags, MDB_txn **txn)
{
	return txn_begin(st, flags, txn);
}

void htr_sidecar__done(struct htr_store *st)
{
	txn_done(st);
}

int htr_sidecar__corrupt(int mrc)
{
	return is_corrupt(mrc);
}

int htr_sidecar__unwritable(int mrc)
{
	return is_unwritable(mrc);
}

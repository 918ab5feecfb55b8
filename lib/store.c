/*
 * The store (include/htr/store.h): one LMDB environment FILE.htr.lmdb/
 * per sidecar per process (layout in FORMAT.md, "Sidecar") and the
 * registry of analyzers.  Opening, trusting and sizing the environment
 * live here; transactions are counted in lib/env.c; what the analyzers
 * store, keyed by their names, is lib/records.c (file map: lib/env.h).
 */
/* F_OFD_SETLK: a lock owned by our own file description, so taking and
 * dropping it never touches locks LMDB holds in this process. */
#define _GNU_SOURCE
#include "store_int.h"
#include "abi.h"
#include "descriptors.h"
#include "lmdbcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const db_names[HTR_DB_N] = {
	"meta", "values",
	/* layout 1 */
	"tsc", "names", "blocks",
};

/* --- the registry --- */

int htr_store__find(struct htr_store *st, const char *name)
{
	unsigned i, n;

	pthread_mutex_lock(&st->lock);
	n = st->nreg;
	pthread_mutex_unlock(&st->lock);
	for (i = 0; i < n; i++)
		if (!strcmp(st->reg[i].name, name))
			return (int) i;
	return -1;
}

static int name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (!n || n > HTR_ANALYZER_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
			return 0;
	return 1;
}

/* Whoever computes hands a callback its dependencies' results by their
 * place in d->deps (analyzer.c), in arrays of HTR_AN_MAX. */
static int deps_ok(const struct htr_analyzer *d)
{
	size_t i;

	for (i = 0; d->deps && d->deps[i]; i++)
		if (i == HTR_AN_MAX - 1)
			return 0;
	return 1;
}

int htr_store_register(struct htr_store *st, const struct htr_analyzer *d)
{
	struct htr_analyzer c;
	unsigned i;
	int rc = 0;

	if (!st || !d || !st->lock_ok)
		return HTR_ERR_INVALID;
	if (htr_abi__in(&c, sizeof(c), d, htr_abi__size_of(d),
			HTR_ABI_SIZE0(struct htr_analyzer, payload)) < 0)
		return HTR_ERR_INVALID;
	if (!c.name || !name_ok(c.name) || !c.compute || !c.encode ||
	    !c.decode || !c.free || !deps_ok(&c))
		return HTR_ERR_INVALID;
	pthread_mutex_lock(&st->lock);
	for (i = 0; i < st->nreg; i++)
		if (!strcmp(st->reg[i].name, c.name))
			rc = HTR_ERR_INVALID;
	if (!rc && st->nreg == HTR_AN_MAX)
		rc = HTR_ERR_INVALID;
	if (!rc)
		st->reg[st->nreg++] = c;
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* The built-in analyzers, on every new store. */
static int builtins(struct htr_store *st)
{
	struct htr_analyzer d;
	int rc;

	htr_tsc__descriptor(&d);
	rc = htr_store_register(st, &d);
	if (rc == 0) {
		htr_sym__descriptor(&d);
		rc = htr_store_register(st, &d);
	}
	return rc;
}

/* --- the store: one environment per sidecar per process --- */

void htr_store_opts_init_size(struct htr_store_opts *opts, size_t size)
{
	htr_abi__init(opts, size);
}

static int store_fail(struct htr_store *st, int mrc, const char *what)
{
	return htr_env__fail(&st->env, &st->err, mrc, what);
}

/* Open or create the named databases once: LMDB wants dbi handles opened
 * by one transaction at a time per process, so readers never open them.
 * 1: they are missing in a read-only sidecar (it is out of date). */
static int open_dbs(struct htr_store *st)
{
	MDB_txn *txn = NULL;
	int mrc, i;

	mrc = htr_env__begin(&st->env, st->env.readonly ? MDB_RDONLY : 0, &txn);
	if (mrc) {
		if (htr_env__unwritable(mrc))
			goto unwritable;
		return store_fail(st, mrc, "starting a transaction");
	}
	for (i = 0; i < HTR_DB_USED; i++) {
		mrc = mdb_dbi_open(txn, db_names[i],
				   st->env.readonly ? 0 : MDB_CREATE, &st->env.dbi[i]);
		if (mrc)
			break;
	}
	if (!mrc)
		mrc = mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
	htr_env__done(&st->env);
	if (mrc == MDB_NOTFOUND && st->env.readonly) {
		snprintf(st->note, sizeof(st->note), "%s: read-only and out "
			 "of date", st->sidecar);
		return 1;
	}
	if (htr_env__unwritable(mrc))
		goto unwritable;
	return mrc ? store_fail(st, mrc, "opening its databases") : 0;
unwritable:
	snprintf(st->note, sizeof(st->note), "%s: cannot write: %s",
		 st->sidecar, htr_env__strerror(&st->env, mrc));
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

	if (st->env.mdb)
		mdb_env_get_maxreaders(st->env.mdb, &readers);
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
	st->env.mapsize = (size_t) 1 << 32;
	if ((size_t) nblocks * 64 > st->env.mapsize)
		st->env.mapsize = (size_t) nblocks * 64;
	had_data = stat(data, &sb) == 0 && sb.st_size > 0;
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		mrc = mdb_env_create(&st->env.mdb);
		if (mrc)
			return store_fail(st, mrc, "creating the environment");
		mdb_env_set_maxdbs(st->env.mdb, HTR_DB_N);
		mdb_env_set_mapsize(st->env.mdb, st->env.mapsize);
		if (!(modes[m] & MDB_RDONLY))
			mrc = lock_room(st);
		/* MDB_NOTLS: read transactions belong to handles, not to
		 * threads, so one thread may hold several and a handle may
		 * move between threads. */
		if (!mrc)
			mrc = mdb_env_open(st->env.mdb, st->sidecar,
					   MDB_NOTLS | modes[m], 0666);
		if (!mrc)
			break;
		mdb_env_close(st->env.mdb);
		st->env.mdb = NULL;
		/* The writable open's error says why; the read-only ones
		 * after it are only fallbacks (on a full disk they fail
		 * with EBADF or ENOENT on the file the first left empty). */
		if (!first)
			first = mrc;
		if (htr_env__corrupt(mrc) && had_data)
			return store_fail(st, mrc, "opening");
		/* A data file this open began has nothing to read: what
		 * it wrote of it (a meta page of two) would only read as
		 * damage next time. */
		if (!had_data) {
			unlink(data);
			break;
		}
		if (!htr_env__unwritable(mrc) && mrc != ENOENT)
			break;
	}
	if (!st->env.mdb) {
		snprintf(st->note, sizeof(st->note), "%s: cannot %s: %s",
			 st->sidecar, htr_env__unwritable(first) ? "write" : "open",
			 htr_env__strerror(&st->env, first));
		return 1;
	}
	st->env.readonly = modes[m] & MDB_RDONLY;
	/* A truncated data file would fault when its pages are touched:
	 * compare the last page in use with the file's size first. */
	snprintf(data, sizeof(data), "%s/data.mdb", st->sidecar);
	if (mdb_env_info(st->env.mdb, &info) || mdb_env_stat(st->env.mdb, &ms) ||
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
	if (info.me_mapsize > st->env.mapsize)
		st->env.mapsize = info.me_mapsize;
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
	st->lock_ok = true;
	if (htr_env__init(&st->env) < 0)
		return htr_err__set(&st->err, HTR_ERR_NOMEM, "cannot create "
				    "a mutex");
	rc = builtins(st);
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
	st->env.dir = st->sidecar;
	if (o.no_sidecar) {
		snprintf(st->note, sizeof(st->note), "no sidecar requested");
		rc = 1;
	} else {
		rc = open_env(st, fi.nblocks);
		if (rc < 0)
			return rc;
	}
	if (rc == 1) {
		if (st->env.mdb)
			mdb_env_close(st->env.mdb);
		st->env.mdb = NULL;
		st->flags |= HTR_STORE_IN_MEMORY;
	}
	htr_err__clear(&st->err);
	return 0;
}

void htr_store_close(struct htr_store *st)
{
	if (!st)
		return;
	htr_env__fini(&st->env);
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
	if (st->lock_ok)
		pthread_mutex_destroy(&st->lock);
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
	if (st->env.mdb) {
		memset(&c, 0, sizeof(c));
		snprintf(c.pid, sizeof(c.pid), "%ld", (long) getpid());
		if (mdb_reader_list(st->env.mdb, count_reader, &c) < 0 ||
		    mdb_env_get_maxreaders(st->env.mdb, &maxr))
			return HTR_ERR_IO;
		si.max_readers = maxr;
		si.readers = c.all;
		si.process_readers = c.mine;
	}
	return htr_abi__out(info, size, &si, sizeof(si),
			    HTR_ABI_SIZE0(struct htr_store_info,
					  process_readers));
}

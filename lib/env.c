/*
 * The sidecar's LMDB environment as the store and the records use it
 * (lib/env.h): counted transactions, what a code means, its message.
 * Opening it is the store's (lib/store.c).
 */
#include "env.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

int htr_env__init(struct htr_env *e)
{
	if (pthread_mutex_init(&e->lock, NULL))
		return HTR_ERR_NOMEM;
	if (pthread_mutex_init(&e->compute, NULL)) {
		pthread_mutex_destroy(&e->lock);
		return HTR_ERR_NOMEM;
	}
	e->locks_ok = true;
	return 0;
}

void htr_env__fini(struct htr_env *e)
{
	if (!e)
		return;
	if (e->mdb)
		mdb_env_close(e->mdb);
	e->mdb = NULL;
	if (e->locks_ok) {
		pthread_mutex_destroy(&e->lock);
		pthread_mutex_destroy(&e->compute);
		e->locks_ok = false;
	}
}

int htr_env__corrupt(int mrc)
{
	return mrc == MDB_CORRUPTED || mrc == MDB_PAGE_NOTFOUND ||
	       mrc == MDB_INVALID || mrc == MDB_VERSION_MISMATCH ||
	       mrc == MDB_BAD_TXN || mrc == MDB_INCOMPATIBLE;
}

/* Errors that mean "this sidecar cannot be written": fall back to memory. */
int htr_env__unwritable(int mrc)
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

const char *htr_env__strerror(const struct htr_env *e, int mrc)
{
	if ((mrc == EIO || mrc == ENOSPC) && e->dir && fs_full(e->dir))
		return strerror(ENOSPC);
	return mdb_strerror(mrc);
}

int htr_env__fail(const struct htr_env *e, struct htr_err *err, int mrc,
		  const char *what)
{
	if (mrc == ENOMEM)
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	if (mrc == MDB_READERS_FULL)
		return htr_err__set(err, HTR_ERR_LIMIT, "%s: %s: every reader "
				    "the sidecar holds is taken (htr_store_info"
				    "()); close reader handles", e->dir, what);
	if (htr_env__corrupt(mrc))
		return htr_err__set(err, HTR_ERR_CORRUPT, "%s: %s: corrupt "
				    "sidecar (%s); remove it to recompute",
				    e->dir, what, mdb_strerror(mrc));
	return htr_err__set(err, HTR_ERR_IO, "%s: %s: %s", e->dir, what,
			    htr_env__strerror(e, mrc));
}

/*
 * When another process grew the map, LMDB wants the new size adopted
 * while this process has no transaction open; with other handles reading
 * that must wait (the error is returned).
 */
int htr_env__begin(struct htr_env *e, unsigned flags, MDB_txn **txn)
{
	int mrc;

	pthread_mutex_lock(&e->lock);
	mrc = mdb_txn_begin(e->mdb, NULL, flags, txn);
	if (mrc == MDB_MAP_RESIZED && !e->active) {
		mdb_env_set_mapsize(e->mdb, 0);
		mrc = mdb_txn_begin(e->mdb, NULL, flags, txn);
	}
	if (!mrc)
		e->active++;
	pthread_mutex_unlock(&e->lock);
	return mrc;
}

void htr_env__done(struct htr_env *e)
{
	pthread_mutex_lock(&e->lock);
	e->active--;
	pthread_mutex_unlock(&e->lock);
}

int htr_env__grow(struct htr_env *e)
{
	int mrc;

	pthread_mutex_lock(&e->lock);
	mrc = e->active ? MDB_MAP_FULL :
	      mdb_env_set_mapsize(e->mdb, e->mapsize * 2);
	if (!mrc)
		e->mapsize *= 2;
	pthread_mutex_unlock(&e->lock);
	return mrc;
}

void htr_env__compute_lock(struct htr_env *e, bool on)
{
	int fd;

	if (!e->mdb || mdb_env_get_fd(e->mdb, &fd) || fd < 0)
		return;
	while (flock(fd, on ? LOCK_EX : LOCK_UN) < 0 && errno == EINTR)
		;
}

int htr_env__next(struct htr_env *e, MDB_txn *txn, MDB_txn **next)
{
	int mrc = mdb_txn_commit(txn);

	htr_env__done(e);
	*next = NULL;
	return mrc ? mrc : htr_env__begin(e, 0, next);
}

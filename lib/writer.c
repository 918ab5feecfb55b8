/*
 * Streaming writer of .htr files (see writer.h and FORMAT.md).
 *
 * Layout while writing: "OUT.tmpPID" holds a reserved area for the header
 * and the section table (HTR_WRITER_RESERVE bytes), then the blocks as they
 * arrive.  The small sections go to per-section buffers that spill into
 * unlinked temporary files in the output's directory.  Commit links the
 * tree in one backward pass over the blocks, in place through windows of
 * a shared mapping of the file (cut into ranges linked on threads at
 * once, when it may use several: struct mark), and appends the spooled
 * sections (beside it, on a thread of their own, when they are large),
 * hashing each 1 MiB piece of the body as it becomes final (the file is
 * not read back; in one range, the blocks' windows on a third thread when
 * there are several) and starting its writeback, then writes the table
 * and the header, fsyncs and renames.  Memory is O(max depth) plus fixed
 * buffers, two mapped windows, 8 bytes per MiB of output for the pieces'
 * hashes, and the marks' frames (16 of at most 1024).
 */
#define _GNU_SOURCE     /* sync_file_range */
#include "writer.h"

#include "file.h"
#include "tmpfile.h"
#include "htr/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define HTR_WRITER_RESERVE 4096u        /* header + section table */
#define HTR_WRITER_BUF (1u << 20)       /* block buffer, commit chunks */
#define HTR_SPOOL_BUF (64u << 10)       /* per small section */
/* Buffers start small and double up to the sizes above: a small build
 * (a debugger's, a fuzzer's) need not pay for a large one's. */
#define HTR_BUF_MIN (16u << 10)

enum { SP_FUNCS, SP_GAPS, SP_TSC, SP_SYNC, SP_IMAGES, SP_THREAD, SP_COUNT };

/* Spool i is section htr_file__sections[1 + i]: the blocks come first,
 * written in place, then the spools in id order. */
_Static_assert(SP_COUNT + 1 == HTR_NSECTIONS, "a spool per section");
_Static_assert((HTR_BUF_MIN & (HTR_BUF_MIN - 1)) == 0 &&
	       HTR_WRITER_BUF % HTR_BUF_MIN == 0 &&
	       HTR_SPOOL_BUF % HTR_BUF_MIN == 0 &&
	       HTR_BUF_MIN >= HTR_WRITER_RESERVE, "buffers double to their size");
/* Link and hash a body piece at a time, in the block buffer; the blocks
 * section starts at a multiple of the record size. */
_Static_assert(HTR_BODY_PIECE <= HTR_WRITER_BUF &&
	       HTR_WRITER_RESERVE % sizeof(struct htr_disk_block) == 0 &&
	       HTR_BODY_PIECE % sizeof(struct htr_disk_block) == 0,
	       "body pieces are whole blocks");
_Static_assert(HTR_SEC_FUNCS == 2 + SP_FUNCS && HTR_SEC_GAPS == 2 + SP_GAPS &&
	       HTR_SEC_TSC == 2 + SP_TSC && HTR_SEC_SYNC == 2 + SP_SYNC &&
	       HTR_SEC_IMAGES == 2 + SP_IMAGES &&
	       HTR_SEC_THREAD == 2 + SP_THREAD, "spools in section id order");

/* A section being collected: a buffer that spills into an unlinked file. */
struct spool {
	int fd;                 /* -1 until the buffer first fills */
	uint8_t *buf;
	size_t len, cap;        /* bytes in buf, its size */
	uint64_t size;          /* bytes in total (file + buf) */
	uint64_t count;         /* records */
};

struct frame {
	uint32_t block;
	uint32_t remaining;     /* children not yet seen */
	uint32_t last_seen;     /* the child seen last (next sibling) */
	uint32_t first_child;   /* what the block's record says */
	uint32_t level;         /* the block's depth (root = 1) */
	uint32_t pad;
	uint64_t first;         /* the block's first ID */
	uint64_t seen_first;    /* first ID of last_seen */
};

/*
 * Where the linking pass may be cut.  The pass links backward from the last
 * block; blocks [lo, M) can be linked on a thread of their own, beside
 * those above M, given the state the pass has on reaching M: a frame for
 * each ancestor of block M - 1 (in post-order all come after it) that has
 * children before M, with their number, its first child from M on and its
 * level.  A mark gathers that state as the blocks arrive, in O(1) a block:
 * `pending` counts the subtrees no block has adopted yet (a block with n
 * children adopts the last n), and a block that adopts some of those
 * before M is such an ancestor.
 * Marks sit on body-hash piece boundaries (a piece is linked and hashed by
 * one thread), every mark_every pieces; when there are MARKS_MAX, every
 * other one goes and mark_every doubles, so they stay spread over the
 * blocks however many come.
 */
#define MARKS_MAX 16
#define MARK_FRAMES_MAX 1024    /* a deeper cut is not worth its memory */
#define PIECE_BLOCKS (HTR_BODY_PIECE / sizeof(struct htr_disk_block))
#define RESERVE_BLOCKS (HTR_WRITER_RESERVE / sizeof(struct htr_disk_block))

struct mark {
	uint64_t at;            /* the cut: blocks [0, at) lie below it */
	uint64_t below;         /* subtrees before `at` not yet adopted */
	uint32_t bottom;        /* the first subtree from `at` on not yet
				 * adopted (if pending > below) */
	uint64_t bottom_first;  /* its first ID */
	struct frame *frames;   /* ancestors of block at - 1 with children
				 * before `at`, deepest first, as they
				 * arrived; level: how many ancestors had
				 * arrived with it */
	size_t nframes, cap;
	uint32_t nanc;          /* ancestors of block at - 1 so far */
};

struct htr_writer {
	struct htr_err err;
	char *path;
	char *tmp;
	char *dir;
	int fd;
	unsigned flags;         /* HTR_WRITER_* */
	bool committed;
	bool failed;

	uint8_t *buf;           /* blocks not yet written */
	size_t buflen, bufcap;
	uint64_t nblocks;
	uint64_t last_last;     /* `last` of the previous block */
	uint64_t max_id;        /* largest ID any record names */

	struct spool sp[SP_COUNT];
	uint64_t last_gap, last_tsc, last_sync;
	uint64_t image_hash;
	uint32_t max_depth;     /* found by commit */
	unsigned link_ranges;   /* ditto: ranges linked at once */
	unsigned threads;       /* htr_writer__threads() */

	uint64_t pending;       /* see struct mark */
	struct mark mark[MARKS_MAX];
	unsigned nmarks;
	uint64_t mark_every;    /* pieces between marks */
	uint64_t next_mark;     /* the block count the next mark is for */
	uint64_t prealloc;      /* file bytes fallocate()d; UINT64_MAX:
				 * none (it failed) */
	bool no_marks;          /* one thread, or the blocks do not nest:
				 * one range */
	bool map_ok;            /* the link pass may map windows: see
				 * maps_in_place() */
};

static int fail(struct htr_writer *w, int rc)
{
	w->failed = true;
	return rc;
}

static int fail_nomem(struct htr_writer *w)
{
	return fail(w, htr_err__set(&w->err, HTR_ERR_NOMEM,
				    "%s: out of memory", w->path));
}

static int write_all(struct htr_writer *w, int fd, const void *p, size_t n,
		     const char *what)
{
	const uint8_t *s = p;

	while (n) {
		ssize_t k = write(fd, s, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return fail(w, htr_err__sys(&w->err, "%s: %s", w->path,
						    what));
		}
		s += k;
		n -= (size_t) k;
	}
	return 0;
}

/* htr_tmp__io_at()'s value @e as the writer's error. */
static int io_fail(struct htr_writer *w, int e, const char *what)
{
	if (!e)
		return 0;
	if (e < 0) {
		errno = EIO;
		return fail(w, htr_err__sys(&w->err, "%s: %s: short read",
					    w->path, what));
	}
	errno = e;
	return fail(w, htr_err__sys(&w->err, "%s: %s", w->path, what));
}

static int pwrite_all(struct htr_writer *w, const void *p, size_t n,
		      uint64_t off, const char *what)
{
	return io_fail(w, htr_tmp__io_at(w->fd, (void *) p, n, off, true),
		       what);
}

/* A build that was killed left "PATH.tmpPID" behind; remove those whose
 * process is gone (best effort: nothing else depends on it). */
static void remove_stale(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t blen = strlen(base);
	char *dir = slash ? strndup(path, (size_t) (slash - path + 1)) :
			    strdup("./");
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char *end, full[4096];
		long pid;

		if (strncmp(de->d_name, base, blen) ||
		    strncmp(de->d_name + blen, ".tmp", 4))
			continue;
		pid = strtol(de->d_name + blen + 4, &end, 10);
		if (*end || pid <= 0 || pid == (long) getpid() ||
		    kill((pid_t) pid, 0) == 0 || errno != ESRCH)
			continue;
		if (snprintf(full, sizeof(full), "%s%s", dir, de->d_name) <
		    (int) sizeof(full))
			unlink(full);
	}
	if (d)
		closedir(d);
	free(dir);
}

int htr_writer__open(struct htr_writer **out, const char *path,
		     struct htr_err *err)
{
	return htr_writer__open_flags(out, path, 0, err);
}

/* Whether writing into a mapped page of @fd, once MADV_POPULATE_WRITE
 * made it writable, cannot fail for want of space: file systems that
 * write over the blocks a write() reserved (ext2-4, XFS) or hold the
 * file in memory (tmpfs).  Elsewhere (btrfs and other copy-on-write
 * file systems, network file systems) a page written back meanwhile may
 * need new space when next written, and a full disk would then be a
 * SIGBUS, not an error: the link pass reads and writes there instead. */
static bool maps_in_place(int fd)
{
	struct statfs st;

	if (fstatfs(fd, &st) < 0)
		return false;
	switch ((unsigned long) st.f_type) {
	case 0xef53ul:          /* EXT2/3/4_SUPER_MAGIC */
	case 0x58465342ul:      /* XFS_SUPER_MAGIC */
	case 0x01021994ul:      /* TMPFS_MAGIC */
		return true;
	default:
		return false;
	}
}

int htr_writer__open_flags(struct htr_writer **out, const char *path,
			   unsigned flags, struct htr_err *err)
{
	struct htr_writer *w;
	const char *slash;
	size_t n;
	int i;

	if (!out || !path || !*path) {
		if (out)
			*out = NULL;
		return htr_err__set(err, HTR_ERR_INVALID,
				    "htr writer: no output path");
	}
	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return htr_err__set(err, HTR_ERR_NOMEM, "%s: out of memory",
				    path);
	w->fd = -1;
	w->flags = flags;
	for (i = 0; i < SP_COUNT; i++)
		w->sp[i].fd = -1;
	w->image_hash = HTR_HASH_SEED;
	w->threads = 1;
	w->no_marks = true;
	w->mark_every = 1;
	w->next_mark = PIECE_BLOCKS - RESERVE_BLOCKS;

	n = strlen(path);
	w->path = strdup(path);
	w->tmp = malloc(n + 32);
	slash = strrchr(path, '/');
	if (!slash)
		w->dir = strdup(".");
	else if (slash == path)
		w->dir = strdup("/");
	else
		w->dir = strndup(path, (size_t) (slash - path));
	w->buf = malloc(HTR_BUF_MIN);
	w->bufcap = HTR_BUF_MIN;
	if (!w->path || !w->tmp || !w->dir || !w->buf)
		goto nomem;
	snprintf(w->tmp, n + 32, "%s.tmp%ld", path, (long) getpid());
	if (!(flags & HTR_WRITER_NO_SWEEP))
		remove_stale(path);

	w->fd = open(w->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (w->fd < 0) {
		int rc = htr_err__sys(err, "%s: cannot create", w->path);

		htr_writer__free(w);
		return rc;
	}
	w->map_ok = !(flags & HTR_WRITER_NO_MAP) && maps_in_place(w->fd);
	/* Blocks start after the reserved area; reading it back as zeros
	 * (for the body hash) is what a sparse hole gives. */
	if (ftruncate(w->fd, HTR_WRITER_RESERVE) < 0 ||
	    lseek(w->fd, HTR_WRITER_RESERVE, SEEK_SET) < 0) {
		int rc = htr_err__sys(err, "%s: reserve header", path);

		htr_writer__free(w);
		return rc;
	}
	*out = w;
	return 0;

nomem:
	htr_writer__free(w);
	return htr_err__set(err, HTR_ERR_NOMEM, "%s: out of memory", path);
}

/* Double *@buf (*@cap bytes, powers of two) towards @need, up to @max.
 * Returns whether it holds @need now.  Out of memory it stays as it is:
 * the callers flush instead, a small buffer only costs more writes. */
static int grow(uint8_t **buf, size_t *cap, size_t need, size_t max)
{
	size_t n = *cap ? *cap : HTR_BUF_MIN;
	uint8_t *p;

	if (need <= *cap)
		return 1;               /* every block and record but a few */
	while (n < need && n < max)
		n *= 2;
	if (n > *cap && (p = realloc(*buf, n))) {
		*buf = p;
		*cap = n;
	}
	return need <= *cap;
}

/*
 * Reserve the file's blocks ahead of the writes and beyond its end (as
 * much again as has been written, at most HTR_PREALLOC; commit trims
 * what is left over): the file system then finds its extents allocated,
 * instead of reserving and mapping them a page at a time (a fifth of a one-thread build's system time at
 * 10^8 instructions).  Where fallocate fails (a file system without it,
 * a full disk) the writes allocate as before.
 */
#define HTR_PREALLOC (64u << 20)

static void prealloc(struct htr_writer *w, uint64_t end)
{
	/* As much again as there is, up to HTR_PREALLOC: a small build
	 * (a test's on tmpfs, where this is memory) reserves little. */
	uint64_t ahead = end < HTR_PREALLOC ? end : HTR_PREALLOC;

	if (end <= w->prealloc || w->prealloc == UINT64_MAX)
		return;
	if (fallocate(w->fd, FALLOC_FL_KEEP_SIZE, (off_t) w->prealloc,
		      (off_t) (end - w->prealloc + ahead)) == 0)
		w->prealloc = end + ahead;
	else
		w->prealloc = UINT64_MAX;
}

static int flush_blocks(struct htr_writer *w)
{
	int rc;

	if (!w->buflen)
		return 0;
	prealloc(w, HTR_WRITER_RESERVE +
		    w->nblocks * sizeof(struct htr_disk_block));
	rc = write_all(w, w->fd, w->buf, w->buflen, "write blocks");
	w->buflen = 0;
	return rc;
}

void htr_writer__threads(struct htr_writer *w, unsigned threads)
{
	if (!w)
		return;
	if (!w->nblocks)
		w->no_marks = threads < 2;
	if (!w->nblocks || threads < w->threads)
		w->threads = threads ? threads : 1;
}

static void drop_mark(struct htr_writer *w, unsigned k)
{
	free(w->mark[k].frames);
	memmove(&w->mark[k], &w->mark[k + 1],
		(w->nmarks - k - 1) * sizeof(w->mark[0]));
	w->nmarks--;
}

/* Block w->nblocks (@b, first ID @first) lands at position @pos of the
 * pending subtrees: each mark with that many or more before its cut
 * gets it as its bottom, and an ancestor's frame if it adopts some.  Once
 * a mark has a frame, its bottom holds block at - 1: a block that adopts
 * the bottom and nothing before the cut is an ancestor too, one that the
 * pass does not find open at the cut (no children below it) but that
 * counts for the levels. */
static void mark_adopt(struct htr_writer *w, const struct htr_disk_block *b,
		       uint64_t first, uint64_t pos)
{
	unsigned k;

	/* Marks further up have at least as many subtrees below their cut
	 * (those of a lower cut are below theirs too). */
	for (k = w->nmarks; k-- > 0 && w->mark[k].below >= pos;) {
		struct mark *m = &w->mark[k];

		if (pos < m->below) {
			bool seen = w->pending > m->below;
			struct frame *f;

			if (m->nframes == m->cap) {
				size_t cap = m->cap ? m->cap * 2 : 16;

				f = cap <= MARK_FRAMES_MAX ?
				    realloc(m->frames, cap * sizeof(*f)) : NULL;
				if (!f) {
					drop_mark(w, k);
					continue;
				}
				m->frames = f;
				m->cap = cap;
			}
			f = &m->frames[m->nframes++];
			memset(f, 0, sizeof(*f));
			f->block = (uint32_t) w->nblocks;
			f->remaining = (uint32_t) (m->below - pos);
			f->last_seen = seen ? m->bottom : HTR_NONE;
			f->seen_first = seen ? m->bottom_first : 0;
			f->first_child = b->first_child;
			f->first = first;
			f->level = ++m->nanc;
			m->below = pos;
		} else if (m->nframes && w->pending > m->below) {
			m->nanc++;
		}
		m->bottom = (uint32_t) w->nblocks;
		m->bottom_first = first;
	}
}

/* A mark at the cut after this block, w->nblocks + 1. */
static void add_mark(struct htr_writer *w)
{
	uint64_t at = w->nblocks + 1;
	uint64_t piece = (at + RESERVE_BLOCKS) / PIECE_BLOCKS;
	unsigned k, j;

	if (w->nmarks == MARKS_MAX) {
		w->mark_every *= 2;
		for (k = j = 0; k < w->nmarks; k++) {
			if ((w->mark[k].at + RESERVE_BLOCKS) / PIECE_BLOCKS %
			    w->mark_every)
				free(w->mark[k].frames);
			else
				w->mark[j++] = w->mark[k];
		}
		w->nmarks = j;
	}
	w->next_mark = (piece / w->mark_every + 1) * w->mark_every *
		       PIECE_BLOCKS - RESERVE_BLOCKS;
	if (piece % w->mark_every)
		return;
	memset(&w->mark[w->nmarks], 0, sizeof(w->mark[0]));
	w->mark[w->nmarks].at = at;
	w->mark[w->nmarks].below = w->pending;
	w->nmarks++;
}

/* Follow block w->nblocks for the marks: O(1) unless it lands at or below
 * the last mark's cut. */
static void follow_marks(struct htr_writer *w, const struct htr_disk_block *b,
			 uint64_t first)
{
	uint64_t pos;

	if (b->nchildren > w->pending) {
		/* More children than subtrees before it: commit reports it,
		 * from a pass in one range. */
		while (w->nmarks)
			drop_mark(w, w->nmarks - 1);
		w->no_marks = true;
		return;
	}
	pos = w->pending - b->nchildren;
	if (w->nmarks && pos <= w->mark[w->nmarks - 1].below)
		mark_adopt(w, b, first, pos);
	w->pending = pos + 1;
	if (w->nblocks + 1 == w->next_mark)
		add_mark(w);
}

int htr_writer__block(struct htr_writer *w, const struct htr_disk_block *b,
		      uint32_t *index)
{
	struct htr_disk_block *rec;
	uint64_t first, last;
	int rc;

	if (!w || !b)
		return HTR_ERR_INVALID;
	if (w->failed || w->committed)
		return w->failed ? w->err.code : HTR_ERR_INVALID;
	first = htr_disk__get48(b->first);
	last = htr_disk__get48(b->last);
	if (w->nblocks >= HTR_MAX_BLOCKS)
		return fail(w, htr_err__set(&w->err, HTR_ERR_LIMIT,
				"%s: more than %lu blocks", w->path,
				(unsigned long) HTR_MAX_BLOCKS));
	if (first > last)
		return fail(w, htr_err__set(&w->err, HTR_ERR_INVALID,
				"%s: block %lu: first ID %llu after last %llu",
				w->path, (unsigned long) w->nblocks,
				(unsigned long long) first,
				(unsigned long long) last));
	if (w->nblocks && last < w->last_last)
		return fail(w, htr_err__set(&w->err, HTR_ERR_INVALID,
				"%s: block %lu: last ID %llu before the previous "
				"block's %llu (blocks must come in post-order)",
				w->path, (unsigned long) w->nblocks,
				(unsigned long long) last,
				(unsigned long long) w->last_last));
	if ((b->nchildren == 0) != (b->first_child == HTR_NONE) ||
	    (b->nchildren && (b->first_child >= w->nblocks ||
			      b->nchildren > w->nblocks)))
		return fail(w, htr_err__set(&w->err, HTR_ERR_INVALID,
				"%s: block %lu: bad first child %lu for %lu "
				"children", w->path,
				(unsigned long) w->nblocks,
				(unsigned long) b->first_child,
				(unsigned long) b->nchildren));

	if (!grow(&w->buf, &w->bufcap, w->buflen + sizeof(*rec),
		  HTR_WRITER_BUF)) {
		rc = flush_blocks(w);
		if (rc)
			return rc;
	}
	/* Field by field into the buffer: a record assembled on the stack
	 * and copied as a whole was read back before its narrow stores had
	 * landed (a store-forwarding stall: a tenth of a one-thread build on
	 * call-dense code). */
	rec = (struct htr_disk_block *) (w->buf + w->buflen);
	memcpy(rec->first, b->first, 6);
	memcpy(rec->last, b->last, 6);
	rec->parent = HTR_NONE;
	rec->first_child = b->first_child;
	rec->next_sibling = HTR_NONE;
	rec->nchildren = b->nchildren;
	rec->func_flags = b->func_flags;
	w->buflen += sizeof(*rec);
	if (!w->no_marks)
		follow_marks(w, b, first);
	if (index)
		*index = (uint32_t) w->nblocks;
	w->nblocks++;
	w->last_last = last;
	if (last > w->max_id)
		w->max_id = last;
	return 0;
}

uint32_t htr_writer__nblocks(const struct htr_writer *w)
{
	return w ? (uint32_t) w->nblocks : 0;
}

static int spool_flush(struct htr_writer *w, struct spool *s)
{
	size_t n_;

	if (!s->len)
		return 0;
	if (s->fd < 0) {
		size_t n = strlen(w->dir) + 32;
		char *tmpl = malloc(n);

		if (!tmpl)
			return fail_nomem(w);
		snprintf(tmpl, n, "%s/.htr-spool-XXXXXX", w->dir);
		s->fd = mkstemp(tmpl);
		if (s->fd < 0) {
			int rc = htr_err__sys(&w->err, "%s: temporary file",
					      tmpl);

			free(tmpl);
			return fail(w, rc);
		}
		unlink(tmpl);
		free(tmpl);
	}
	n_ = s->len;
	s->len = 0;
	return write_all(w, s->fd, s->buf, n_, "write spool");
}

/* Append @n bytes to spool @k. */
static int spool_put(struct htr_writer *w, int k, const void *p, size_t n)
{
	struct spool *s = &w->sp[k];
	const uint8_t *src = p;

	while (n) {
		size_t take;
		int rc;

		if (!grow(&s->buf, &s->cap, s->len + n, HTR_SPOOL_BUF) &&
		    !s->cap)
			return fail_nomem(w);
		take = s->cap - s->len;
		if (take > n)
			take = n;
		memcpy(s->buf + s->len, src, take);
		s->len += take;
		s->size += take;
		src += take;
		n -= take;
		/* Full: grow before writing out.  Records fill the buffer
		 * exactly, so the grow above alone never gets past the
		 * first size (16 KiB writes, 4x as many). */
		if (s->len == s->cap &&
		    !grow(&s->buf, &s->cap, s->cap + 1, HTR_SPOOL_BUF)) {
			rc = spool_flush(w, s);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int check_state(struct htr_writer *w)
{
	if (!w)
		return HTR_ERR_INVALID;
	if (w->failed)
		return w->err.code;
	if (w->committed)
		return HTR_ERR_INVALID;
	return 0;
}

static int order_error(struct htr_writer *w, const char *what,
		       uint64_t v, uint64_t prev)
{
	return fail(w, htr_err__set(&w->err, HTR_ERR_INVALID,
			"%s: %s %llu after %llu (must not decrease)", w->path,
			what, (unsigned long long) v,
			(unsigned long long) prev));
}

int htr_writer__func(struct htr_writer *w, uint64_t entry)
{
	int rc = check_state(w);

	if (rc)
		return rc;
	if (w->sp[SP_FUNCS].count >= HTR_FUNC_NONE)
		return fail(w, htr_err__set(&w->err, HTR_ERR_LIMIT,
				"%s: more than %u functions", w->path,
				(unsigned) HTR_FUNC_NONE));
	rc = spool_put(w, SP_FUNCS, &entry, sizeof(entry));
	if (!rc)
		w->sp[SP_FUNCS].count++;
	return rc;
}

static int id_limit(struct htr_writer *w, const char *what, uint64_t id)
{
	if (id <= HTR_MAX_ID + 1)
		return 0;
	return fail(w, htr_err__set(&w->err, HTR_ERR_LIMIT,
			"%s: %s ID %llu exceeds 48 bits", w->path, what,
			(unsigned long long) id));
}

/* Append @rec to spool @k after the checks every sorted section shares:
 * the writer is usable, @id fits, and @key does not go below the
 * previous record's (@key_name says which field it is). */
static int put_sorted(struct htr_writer *w, int k, const char *what,
		      const char *key_name, uint64_t id, uint64_t key,
		      uint64_t *last, const void *rec, size_t size)
{
	char name[32];
	int rc = check_state(w);

	if (rc || (rc = id_limit(w, what, id)))
		return rc;
	if (w->sp[k].count && key < *last) {
		snprintf(name, sizeof(name), "%s %s", what, key_name);
		return order_error(w, name, key, *last);
	}
	if ((rc = spool_put(w, k, rec, size)))
		return rc;
	w->sp[k].count++;
	*last = key;
	return 0;
}

int htr_writer__gap(struct htr_writer *w, uint64_t id, uint64_t offset,
		    int kind, int code)
{
	struct htr_disk_gap g;
	int rc = check_state(w);

	if (rc)
		return rc;
	if (kind < HTR_GAP_DISABLED || kind > HTR_GAP_ERROR)
		return fail(w, htr_err__set(&w->err, HTR_ERR_INVALID,
				"%s: unknown gap kind %d", w->path, kind));
	memset(&g, 0, sizeof(g));
	g.id = id;
	g.offset = offset;
	g.kind = kind;
	g.code = code;
	return put_sorted(w, SP_GAPS, "gap", "ID", id, id, &w->last_gap, &g,
			  sizeof(g));
}

int htr_writer__tsc(struct htr_writer *w, uint64_t id, uint64_t tsc)
{
	struct htr_disk_tsc t = { id, tsc };

	return put_sorted(w, SP_TSC, "tsc", "ID", id, id,
			  w ? &w->last_tsc : NULL, &t, sizeof(t));
}

int htr_writer__sync(struct htr_writer *w, uint64_t offset, uint64_t id)
{
	struct htr_disk_sync s = { offset, id };

	return put_sorted(w, SP_SYNC, "sync", "offset", id, offset,
			  w ? &w->last_sync : NULL, &s, sizeof(s));
}

int htr_writer__image(struct htr_writer *w, uint32_t kind, uint64_t vaddr,
		      uint64_t offset, uint64_t size, const char *path)
{
	static const uint8_t zeros[8];
	struct htr_disk_image im;
	size_t len, pad;
	int rc = check_state(w);

	if (rc)
		return rc;
	if (!path)
		path = "";
	len = strlen(path);
	if (len > UINT32_MAX - 8)
		return fail(w, htr_err__set(&w->err, HTR_ERR_LIMIT,
				"%s: image path too long", w->path));
	pad = (8 - len % 8) % 8;
	memset(&im, 0, sizeof(im));
	im.vaddr = vaddr;
	im.offset = offset;
	im.size = size;
	im.kind = kind;
	im.path_len = (uint32_t) len;
	w->image_hash = htr_hash__bytes(w->image_hash, &im, sizeof(im));
	if (len - len % 8)
		w->image_hash = htr_hash__bytes(w->image_hash, path,
						len - len % 8);
	if (pad) {
		uint8_t tail[8] = { 0 };

		memcpy(tail, path + len - len % 8, len % 8);
		w->image_hash = htr_hash__bytes(w->image_hash, tail, 8);
	}
	if ((rc = spool_put(w, SP_IMAGES, &im, sizeof(im))) ||
	    (rc = spool_put(w, SP_IMAGES, path, len)) ||
	    (rc = spool_put(w, SP_IMAGES, zeros, pad)))
		return rc;
	w->sp[SP_IMAGES].count++;
	return 0;
}

int htr_writer__thread(struct htr_writer *w, const struct htr_disk_thread *t)
{
	int rc = check_state(w);

	if (rc)
		return rc;
	if (!t || w->sp[SP_THREAD].count)
		return htr_err__set(&w->err, HTR_ERR_INVALID,
				    "%s: %s thread record", w->path,
				    t ? "a second" : "no");
	if ((rc = spool_put(w, SP_THREAD, t, sizeof(*t))))
		return rc;
	w->sp[SP_THREAD].count++;
	return 0;
}

/*
 * The linking pass.  Blocks are in post-order, so walking them backward
 * visits a block, then the subtrees of its children from the last child to
 * the first.  A stack of open parents (one frame per level) assigns each
 * block its parent and the next sibling seen just before it.  The pass may
 * be cut into ranges linked at once (struct mark), each with a state of
 * its own; nothing in it is the writer's.
 */
struct link_state {
	const char *path;       /* for messages */
	uint64_t lo, hi;        /* blocks [lo, hi) are still to link */
	struct frame *stack;
	size_t depth, cap;
	uint32_t max_depth;
	uint32_t next_root;
	uint64_t next_root_first;
	uint64_t nroots;
	struct htr_err err;     /* link_one()'s failure */
	int io;                 /* htr_tmp__io_at()'s, for what */
	const char *what;
};

static int link_error(struct link_state *ls, uint64_t i, const char *what)
{
	return htr_err__set(&ls->err, HTR_ERR_CORRUPT, "%s: block %llu: %s",
			    ls->path, (unsigned long long) i, what);
}

static int link_one(struct link_state *ls, struct htr_disk_block *b,
		    uint32_t i)
{
	uint64_t first = htr_disk__get48(b->first);
	uint64_t last = htr_disk__get48(b->last);
	uint32_t depth = ls->depth ? ls->stack[ls->depth - 1].level + 1 : 1;

	if (depth > ls->max_depth)
		ls->max_depth = depth;
	if (!ls->depth) {
		if (ls->next_root != HTR_NONE && last >= ls->next_root_first)
			return link_error(ls, i, "overlaps the next root");
		b->parent = HTR_NONE;
		b->next_sibling = ls->next_root;
		ls->next_root = i;
		ls->next_root_first = first;
		ls->nroots++;
	} else {
		struct frame *f = &ls->stack[ls->depth - 1];

		if (first < f->first)
			return link_error(ls, i, "starts before its parent");
		if (f->last_seen != HTR_NONE && last >= f->seen_first)
			return link_error(ls, i, "overlaps its next sibling");
		b->parent = f->block;
		b->next_sibling = f->last_seen;
		f->last_seen = i;
		f->seen_first = first;
		if (--f->remaining == 0) {
			/* That was the parent's first child. */
			if (f->first_child != i)
				return link_error(ls, f->block,
						  "first_child does not match "
						  "its children");
			ls->depth--;
		}
	}
	if (b->nchildren) {
		struct frame *f;

		if (b->first_child >= i)
			return link_error(ls, i, "first_child after the block");
		if (ls->depth == ls->cap) {
			size_t cap = ls->cap ? ls->cap * 2 : 256;
			struct frame *s = realloc(ls->stack, cap * sizeof(*s));

			if (!s)
				return htr_err__set(&ls->err, HTR_ERR_NOMEM,
						    "%s: out of memory",
						    ls->path);
			ls->stack = s;
			ls->cap = cap;
		}
		f = &ls->stack[ls->depth++];
		f->block = i;
		f->remaining = b->nchildren;
		f->last_seen = HTR_NONE;
		f->first_child = b->first_child;
		f->level = depth;
		f->first = first;
		f->seen_first = 0;
	} else if (b->first_child != HTR_NONE) {
		return link_error(ls, i, "first_child without children");
	}
	return 0;
}

/*
 * Link blocks @hi - 1 down to @lo, block @lo at @blk[0]: link_one()'s
 * work, but the two turns that follow the tree's shape (is the block its
 * parent's first child, does it have children) are arithmetic, not
 * branches: they are taken at random in most trees, and their
 * mispredictions were two thirds of the pass.  A root, a full stack or
 * anything wrong goes to link_one(), which finds the same error.
 */
static int link_run(struct link_state *ls, struct htr_disk_block *blk,
		    uint64_t lo, uint64_t hi)
{
	struct frame *stack = ls->stack;
	size_t d = ls->depth;
	uint32_t max_depth = ls->max_depth;
	uint64_t i;
	int rc;

	for (i = hi; i > lo; i--) {
		struct htr_disk_block *b = &blk[i - 1 - lo];
		uint32_t id = (uint32_t) (i - 1);
		uint64_t first = htr_disk__get48(b->first);
		uint64_t last = htr_disk__get48(b->last);
		uint32_t nch = b->nchildren, fc = b->first_child;
		uint32_t level, pop, push, bad;
		struct frame *f, *g;

		if (d == 0 || d == ls->cap)
			goto slow;
		f = &stack[d - 1];
		pop = f->remaining == 1;
		push = nch != 0;
		bad = (first < f->first) |
		      ((f->last_seen != HTR_NONE) & (last >= f->seen_first)) |
		      (pop & (f->first_child != id)) |
		      (push & (fc >= id)) | (!push & (fc != HTR_NONE));
		if (bad)
			goto slow;
		level = f->level + 1;
		max_depth = level > max_depth ? level : max_depth;
		b->parent = f->block;
		b->next_sibling = f->last_seen;
		f->last_seen = id;
		f->seen_first = first;
		f->remaining--;
		/* Popped or not, the slot above the parent's frame takes the
		 * block's; it counts only if the block has children. */
		d -= pop;
		g = &stack[d];
		g->block = id;
		g->remaining = nch;
		g->last_seen = HTR_NONE;
		g->first_child = fc;
		g->level = level;
		g->first = first;
		g->seen_first = 0;
		d += push;
		continue;
slow:
		ls->depth = d;
		ls->max_depth = max_depth;
		if ((rc = link_one(ls, b, id)))
			return rc;
		stack = ls->stack;
		d = ls->depth;
		max_depth = ls->max_depth;
	}
	ls->depth = d;
	ls->max_depth = max_depth;
	return 0;
}

/* The frame at height @j of the stack at mark @m's cut. */
static struct frame mark_frame(const struct mark *m, size_t j)
{
	struct frame f = m->frames[m->nframes - 1 - j];

	/* The last ancestor to arrive is a root, at level 1. */
	f.level = m->nanc - f.level + 1;
	return f;
}

/* Set @ls (fresh, zeroed) to the state the pass has at @m's cut, given all
 * the blocks (what is still pending then are the roots). */
static int mark_state(const struct htr_writer *w, const struct mark *m,
		      struct link_state *ls)
{
	size_t j;

	ls->path = w->path;
	ls->hi = m->at;
	ls->next_root = HTR_NONE;
	if (w->pending > m->below) {
		ls->next_root = m->bottom;
		ls->next_root_first = m->bottom_first;
	}
	if (!m->nframes)
		return 0;
	/* Room above: link_run() takes the slow way while the stack is
	 * full. */
	if (!(ls->stack = malloc((m->nframes + 64) * sizeof(*ls->stack))))
		return htr_err__set(&ls->err, HTR_ERR_NOMEM,
				    "%s: out of memory", w->path);
	ls->cap = m->nframes + 64;
	ls->depth = m->nframes;
	for (j = 0; j < m->nframes; j++)
		ls->stack[j] = mark_frame(m, j);
	return 0;
}

/* Whether the pass reached @m's cut in the state mark_state() gave the
 * range below it. */
static bool at_mark(const struct htr_writer *w, const struct mark *m,
		    const struct link_state *ls)
{
	size_t j;

	if (ls->depth != m->nframes ||
	    ls->next_root != (w->pending > m->below ? m->bottom : HTR_NONE))
		return false;
	for (j = 0; j < ls->depth; j++) {
		struct frame f = mark_frame(m, j);
		const struct frame *g = &ls->stack[j];

		if (f.block != g->block || f.remaining != g->remaining ||
		    f.last_seen != g->last_seen || f.level != g->level ||
		    f.first_child != g->first_child)
			return false;
	}
	return true;
}

/* Start writing back [@off, @off + @n) (@n 0: to the end) now, so that
 * the fsync at the end of the commit finds little left to do. */
static void start_writeback(const struct htr_writer *w, uint64_t off,
			    uint64_t n)
{
#ifdef SYNC_FILE_RANGE_WRITE
	if (!(w->flags & HTR_WRITER_NO_FSYNC))
		(void) sync_file_range(w->fd, (off_t) off, (off_t) n,
				       SYNC_FILE_RANGE_WRITE);
#else
	(void) w; (void) off; (void) n;
#endif
}

/* Linked and hashed: @n bytes at @off, mapped at @map (or NULL) go.  The
 * mapping first: writing back pages still mapped would write-protect
 * them, page by page, with a TLB flush on every processor. */
static void done_window(const struct htr_writer *w, void *map, uint64_t off,
			size_t n)
{
	if (map)
		munmap(map, n);
	start_writeback(w, off, n);
}

/*
 * On a large build a thread hashes each linked window while the next one
 * is linked (spin, 64 MB of blocks: a fifth of the link pass) and starts
 * its writeback, off the linking's path.  A window is a shared mapping of
 * the file (map_window()), which the thread unmaps once hashed, or, where
 * the file cannot be mapped, a piece in the buffer the link pass does not
 * use: the two trade w->buf after every such piece.
 */
struct piece_hash {
	const struct htr_writer *w; /* its fd and flags only */
	struct htr_body_hash *bh;
	uint8_t *spare;           /* HTR_WRITER_BUF bytes, as w->buf */
	const uint8_t *p;         /* the bytes to hash; NULL: none */
	uint64_t off;
	size_t n;
	bool mapped;              /* p is a window, to unmap */
	bool quit;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
};

static void *hash_pieces(void *arg)
{
	struct piece_hash *ph = arg;

	pthread_mutex_lock(&ph->lock);
	for (;;) {
		while (!ph->p && !ph->quit)
			pthread_cond_wait(&ph->cond, &ph->lock);
		if (!ph->p)
			break;
		pthread_mutex_unlock(&ph->lock);
		htr_body_hash__feed(ph->bh, ph->off, ph->p, ph->n);
		done_window(ph->w, ph->mapped ? (void *) ph->p : NULL,
			    ph->off, ph->n);
		pthread_mutex_lock(&ph->lock);
		ph->p = NULL;
		pthread_cond_broadcast(&ph->cond);
	}
	pthread_mutex_unlock(&ph->lock);
	return NULL;
}

/* Wait until the bytes handed over are hashed (lock held). */
static void piece_hash_idle(struct piece_hash *ph)
{
	while (ph->p)
		pthread_cond_wait(&ph->cond, &ph->lock);
}

/* Start the thread (w->buf and the spare at HTR_WRITER_BUF bytes), or
 * return false: the link pass then hashes each piece itself. */
static bool piece_hash_start(struct piece_hash *ph, struct htr_writer *w,
			     struct htr_body_hash *bh)
{
	memset(ph, 0, sizeof(*ph));
	ph->w = w;
	ph->bh = bh;
	if (!grow(&w->buf, &w->bufcap, HTR_WRITER_BUF, HTR_WRITER_BUF) ||
	    !(ph->spare = malloc(HTR_WRITER_BUF)))
		return false;
	pthread_mutex_init(&ph->lock, NULL);
	pthread_cond_init(&ph->cond, NULL);
	if (pthread_create(&ph->thread, NULL, hash_pieces, ph) != 0) {
		pthread_cond_destroy(&ph->cond);
		pthread_mutex_destroy(&ph->lock);
		free(ph->spare);
		return false;
	}
	return true;
}

static void piece_hash_stop(struct piece_hash *ph)
{
	pthread_mutex_lock(&ph->lock);
	piece_hash_idle(ph);
	ph->quit = true;
	pthread_cond_broadcast(&ph->cond);
	pthread_mutex_unlock(&ph->lock);
	pthread_join(ph->thread, NULL);
	pthread_cond_destroy(&ph->cond);
	pthread_mutex_destroy(&ph->lock);
	free(ph->spare);
}

/* Hand @n bytes at @p (file offset @off; a window if @mapped) to @ph's
 * thread, once it is done with what it had. */
static void piece_hash_give(struct piece_hash *ph, const uint8_t *p,
			    uint64_t off, size_t n, bool mapped)
{
	pthread_mutex_lock(&ph->lock);
	piece_hash_idle(ph);
	ph->p = p;
	ph->off = off;
	ph->n = n;
	ph->mapped = mapped;
	pthread_cond_broadcast(&ph->cond);
	pthread_mutex_unlock(&ph->lock);
}

/*
 * The link pass reads and writes the blocks through a shared mapping of
 * the file, HTR_MAP_WINDOW bytes at a time: the pages are in the page
 * cache already, and pread and pwrite copied every block twice more.
 * Windows of four pieces let the hash run four chains at once; two
 * pieces were slower (10^8 instructions, one range: 0.076 s against
 * 0.054 s of commit).  MADV_POPULATE_WRITE maps a window before it is
 * touched, and where that fails (an I/O error, a full file system that
 * must allocate on write, an old kernel, a file system that cannot map)
 * it reports so instead of a SIGBUS: that window then goes through the
 * buffer with pread and pwrite, which report the error as before.  Only
 * on file systems where a page once made writable stays so
 * (maps_in_place()): elsewhere every window goes that way.  The
 * mapped pages are the page cache's: two windows at most are mapped (one
 * linked, one hashed), so the resident set stays bounded.
 */
#define HTR_MAP_WINDOW (4u << 20)
_Static_assert(HTR_MAP_WINDOW % HTR_BODY_PIECE == 0,
	       "windows are whole pieces");

/* Map @n bytes of @w's file at @off (a multiple of the page size, or
 * this fails) for writing, every page present and writable; NULL if it
 * cannot be. */
static uint8_t *map_window(const struct htr_writer *w, uint64_t off, size_t n)
{
#ifdef MADV_POPULATE_WRITE
	void *p;

	if (!w->map_ok)
		return NULL;
	p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd,
		 (off_t) off);
	if (p == MAP_FAILED)
		return NULL;
	if (madvise(p, n, MADV_POPULATE_WRITE)) {
		munmap(p, n);
		return NULL;
	}
	return p;
#else
	(void) w; (void) off; (void) n;
	return NULL;
#endif
}

/* Link blocks backward from ls->hi down to ls->lo (a body-hash piece
 * boundary; the pieces of the blocks section hold whole records: it
 * starts at a multiple of their size), a window of pieces at a time,
 * @max pieces at most, hashing each window once it is final: on @ph's
 * thread, if not NULL (piece_hash_stop() waits for the last), else here.
 * Where a window cannot be mapped, its pieces go one at a time through
 * *@buf, of HTR_BODY_PIECE bytes or more.  Only @w's file is touched.
 * Returns 0 or a negative htr_error, its message in ls->err (HTR_ERR_IO:
 * ls->io and ls->what). */
static int link_pieces(const struct htr_writer *w, struct link_state *ls,
		       uint8_t **buf, struct htr_body_hash *bh,
		       struct piece_hash *ph, uint64_t max)
{
	const uint64_t bsz = sizeof(struct htr_disk_block);
	int rc = 0;

	while (ls->hi > ls->lo && max > 0) {
		uint64_t hi = ls->hi;
		uint64_t piece = (HTR_WRITER_RESERVE + hi * bsz - 1) /
				 HTR_BODY_PIECE * HTR_BODY_PIECE;
		uint64_t floor = (HTR_WRITER_RESERVE + ls->lo * bsz) /
				 HTR_BODY_PIECE * HTR_BODY_PIECE;
		uint64_t k = HTR_MAP_WINDOW / HTR_BODY_PIECE;
		uint64_t lo, off;
		struct htr_disk_block *blk;
		uint8_t *map, *p;
		size_t n;

		/* k pieces from the one holding block hi - 1 down, not
		 * below ls->lo. */
		if (k > max)
			k = max;
		while (k > 1 && piece < floor + (k - 1) * HTR_BODY_PIECE)
			k--;
		piece -= (k - 1) * HTR_BODY_PIECE;
		lo = piece > HTR_WRITER_RESERVE ?
		     (piece - HTR_WRITER_RESERVE) / bsz : 0;
		off = HTR_WRITER_RESERVE + lo * bsz;
		n = (size_t) ((hi - lo) * bsz);
		map = map_window(w, off, n);
		if (!map) {
			/* One piece through the buffer. */
			k = 1;
			piece = (HTR_WRITER_RESERVE + hi * bsz - 1) /
				HTR_BODY_PIECE * HTR_BODY_PIECE;
			lo = piece > HTR_WRITER_RESERVE ?
			     (piece - HTR_WRITER_RESERVE) / bsz : 0;
			off = HTR_WRITER_RESERVE + lo * bsz;
			n = (size_t) ((hi - lo) * bsz);
			if ((ls->io = htr_tmp__io_at(w->fd, *buf, n, off,
						     false))) {
				ls->what = "read blocks";
				rc = HTR_ERR_IO;
				break;
			}
		}
		p = map ? map : *buf;
		blk = (struct htr_disk_block *) p;
		if ((rc = link_run(ls, blk, lo, hi))) {
			if (map)
				munmap(map, n);
			break;
		}
		if (!map &&
		    (ls->io = htr_tmp__io_at(w->fd, p, n, off, true))) {
			ls->what = "write links";
			rc = HTR_ERR_IO;
			break;
		}
		if (ph) {
			piece_hash_give(ph, p, off, n, map != NULL);
			if (!map) {
				*buf = ph->spare;
				ph->spare = p;
			}
		} else {
			htr_body_hash__feed(bh, off, p, n);
			done_window(w, map, off, n);
		}
		ls->hi = lo;
		max -= k;
	}
	if (rc)
		return rc;
	if (!ls->lo && !ls->hi && ls->depth) {
		/* Some block claims more children than precede it. */
		return link_error(ls, ls->stack[ls->depth - 1].block,
				  "has more children than blocks before it");
	}
	return 0;
}

/* @ls's failure @rc as the writer's. */
static int link_fail(struct htr_writer *w, const struct link_state *ls,
		     int rc)
{
	if (rc == HTR_ERR_IO)
		return io_fail(w, ls->io, ls->what);
	w->err = ls->err;
	return fail(w, rc);
}

/* Choose where to cut the pass into up to @n ranges of about the same
 * size: cut[r] is the mark range r starts at (range 0 at block 0).
 * Returns the number of ranges. */
static unsigned pick_cuts(const struct htr_writer *w,
			  const struct mark **cut, unsigned n)
{
	unsigned r = 1, j, k;

	if (n > MARKS_MAX + 1)
		n = MARKS_MAX + 1;
	for (j = 1; j < n; j++) {
		uint64_t want = w->nblocks * j / n, d = UINT64_MAX;
		uint64_t prev = r > 1 ? cut[r - 1]->at : 0;

		for (k = 0; k < w->nmarks; k++) {
			const struct mark *m = &w->mark[k];
			uint64_t dk = m->at > want ? m->at - want :
						     want - m->at;

			if (m->at > prev && m->at < w->nblocks && dk < d) {
				cut[r] = m;
				d = dk;
			}
		}
		if (d != UINT64_MAX)
			r++;
	}
	return r;
}

/* A range of the pass below the top one, on a thread of its own. */
struct link_range {
	struct link_state ls;
	const struct htr_writer *w;
	struct htr_body_hash *bh;
	uint8_t *buf;
	int rc;
	bool started;
	pthread_t thread;
};

static void *link_range(void *arg)
{
	struct link_range *r = arg;

	r->rc = link_pieces(r->w, &r->ls, &r->buf, r->bh, NULL, UINT64_MAX);
	return NULL;
}

/* Start the ranges below @top's (cut[r]: where range r starts, range 0
 * at block 0), each on a thread of its own (or, if none starts, on this
 * one later).  Returns the ranges in *@out for link_cut_finish(), or a
 * negative htr_error. */
static int link_cut_start(struct htr_writer *w, struct htr_body_hash *bh,
			  const struct mark **cut, unsigned nr,
			  struct link_range **out)
{
	struct link_range *lr = calloc(nr - 1, sizeof(*lr));
	unsigned r;
	int rc = 0;

	*out = lr;
	if (!lr)
		return fail_nomem(w);
	for (r = 0; !rc && r + 1 < nr; r++) {
		lr[r].w = w;
		lr[r].bh = bh;
		if ((rc = mark_state(w, cut[r + 1], &lr[r].ls)))
			rc = link_fail(w, &lr[r].ls, rc);
		else if (!(lr[r].buf = malloc(HTR_BODY_PIECE)))
			rc = fail_nomem(w);
		lr[r].ls.lo = r ? cut[r]->at : 0;
	}
	for (r = 0; !rc && r + 1 < nr; r++)
		lr[r].started = pthread_create(&lr[r].thread, NULL, link_range,
					       &lr[r]) == 0;
	return rc;
}

/* Link the rest of @top's range here (unless @rc), wait for the others,
 * check that each ended in the state the one below began with, and
 * gather the figures into @top.  An error is the highest block's, as the
 * pass in one range would find it.  Frees @lr. */
static int link_cut_finish(struct htr_writer *w, struct link_state *top,
			   struct htr_body_hash *bh, const struct mark **cut,
			   unsigned nr, struct link_range *lr, int rc)
{
	unsigned r;

	if (!lr)
		return rc;
	if (!rc && (rc = link_pieces(w, top, &w->buf, bh, NULL, UINT64_MAX)))
		rc = link_fail(w, top, rc);
	/* A thread that did not start: its range here. */
	for (r = nr - 1; !rc && r-- > 0;)
		if (!lr[r].started)
			link_range(&lr[r]);
	for (r = 0; r + 1 < nr; r++)
		if (lr[r].started)
			pthread_join(lr[r].thread, NULL);
	for (r = nr - 1; !rc && r-- > 0;) {
		if (!at_mark(w, cut[r + 1], r + 2 < nr ? &lr[r + 1].ls : top))
			rc = fail(w, htr_err__set(&w->err, HTR_ERR_CORRUPT,
				"%s: block %llu: the linking ranges do not "
				"join up (a libhtr bug)", w->path,
				(unsigned long long) cut[r + 1]->at));
		else if (lr[r].rc)
			rc = link_fail(w, &lr[r].ls, lr[r].rc);
	}
	for (r = 0; r + 1 < nr; r++) {
		top->nroots += lr[r].ls.nroots;
		if (lr[r].ls.max_depth > top->max_depth)
			top->max_depth = lr[r].ls.max_depth;
		free(lr[r].ls.stack);
		free(lr[r].buf);
	}
	top->next_root = lr[0].ls.next_root;
	free(lr);
	return rc;
}

/*
 * The spools' copy after the blocks, with their pieces of the body hash.
 * On a large build it runs on a thread of its own while the blocks are
 * linked (10^8 instructions, one range: 0.04 s of linking, 0.015 s of
 * copying): other
 * bytes of the file, other pieces of the hash, once the piece the two may
 * share has had its blocks.
 */
#define HTR_WRITEBACK_STEP (1u << 20)  /* a multiple of the page size */
#define HTR_SPOOL_COPY (2u * HTR_BODY_PIECE)   /* two pieces: hashed at once */

struct spool_copy {
	struct htr_writer *w;     /* its spools and fd only */
	struct htr_body_hash *bh;
	uint64_t pos;
	uint64_t synced;          /* writeback started below this */
	uint8_t *buf;
	size_t cap;
	int err;                  /* htr_tmp__io_at()'s, for what */
	const char *what;
	pthread_t thread;
};

static int copy_out(struct spool_copy *c, const void *p, size_t n)
{
	size_t k;

	/* Written a megabyte at a time at most: 2 MiB writes made the
	 * kernel's copy into the page cache three times slower at 10^9
	 * instructions (1.2 s of the commit's 1.5; likely the larger folios
	 * that longer writes ask for, fresh memory that a virtual machine's
	 * host must back page by page on first touch). */
	for (k = 0; k < n; k += HTR_WRITER_BUF) {
		c->err = htr_tmp__io_at(c->w->fd, (uint8_t *) p + k,
					n - k < HTR_WRITER_BUF ? n - k :
								 HTR_WRITER_BUF,
					c->pos + k, true);
		if (c->err) {
			c->what = "write section";
			return -1;
		}
	}
	htr_body_hash__feed(c->bh, c->pos, p, n);
	c->pos += n;
	/* The whole pages written so far go to the disk now, beside the
	 * linking: the disk, not the processor, is what a fast commit
	 * waits for, and left to the fsync, these were its last 50 MB. */
	if (c->pos / HTR_WRITEBACK_STEP > c->synced / HTR_WRITEBACK_STEP) {
		uint64_t to = c->pos / HTR_WRITEBACK_STEP * HTR_WRITEBACK_STEP;

		start_writeback(c->w, c->synced, to - c->synced);
		c->synced = to;
	}
	return 0;
}

static void *copy_spools(void *arg)
{
	struct spool_copy *c = arg;
	int i;

	for (i = 0; i < SP_COUNT; i++) {
		struct spool *s = &c->w->sp[i];
		uint64_t done = 0, infile = s->fd < 0 ? 0 : s->size - s->len;

		while (done < infile) {
			/* Ending on a piece boundary of the output where
			 * it can: the next read then hashes as whole
			 * pieces, several at once. */
			size_t n = c->cap;

			if (n > HTR_BODY_PIECE)
				n -= (size_t) (c->pos % HTR_BODY_PIECE);
			if (n > infile - done)
				n = (size_t) (infile - done);
			done += n;
			c->err = htr_tmp__io_at(s->fd, c->buf, n, done - n,
						false);
			if (c->err) {
				c->what = "read spool";
				return NULL;
			}
			if (copy_out(c, c->buf, n) < 0)
				return NULL;
		}
		/* Its file goes now, beside the linking: closing an unlinked
		 * file frees its page cache, which took 4-5 ms at the end of
		 * a build of 10^8 instructions (50 MB of spools). */
		if (s->fd >= 0) {
			close(s->fd);
			s->fd = -1;
		}
		if (s->len && copy_out(c, s->buf, s->len) < 0)
			return NULL;
	}
	return NULL;
}

int htr_writer__commit(struct htr_writer *w, const struct htr_writer_meta *m)
{
	struct htr_disk_section table[1 + SP_COUNT];
	const uint64_t body_start = sizeof(struct htr_disk_header) +
				    sizeof(table);
	struct htr_disk_header h;
	struct htr_body_hash bh;
	struct link_state ls = { .next_root = HTR_NONE };
	const struct mark *cut[MARKS_MAX + 1];
	struct link_range *lr = NULL;
	struct spool_copy sc;
	struct piece_hash ph;
	uint64_t off, infile = 0, body_hash = 0;
	bool threaded, hashing;
	unsigned nr;
	int rc, i, dfd;

	if ((rc = check_state(w)))
		return rc;
	if (!m)
		return htr_err__set(&w->err, HTR_ERR_INVALID,
				    "%s: no metadata", w->path);
	if (m->ninsns > HTR_MAX_ID + 1)
		return fail(w, htr_err__set(&w->err, HTR_ERR_LIMIT,
				"%s: %llu instructions exceed 48-bit IDs",
				w->path, (unsigned long long) m->ninsns));
	if ((w->nblocks && w->max_id >= m->ninsns) ||
	    (w->sp[SP_GAPS].count && w->last_gap > m->ninsns) ||
	    (w->sp[SP_TSC].count && w->last_tsc > m->ninsns))
		return fail(w, htr_err__set(&w->err, HTR_ERR_INVALID,
				"%s: a record names an ID past the %llu "
				"instructions", w->path,
				(unsigned long long) m->ninsns));

	if ((rc = flush_blocks(w)))
		return rc;

	/* Sections: blocks in place, then each spool, 8-byte aligned
	 * (every record size is a multiple of 8). */
	memset(table, 0, sizeof(table));
	table[0].id = htr_file__sections[0].id;
	table[0].entsize = htr_file__sections[0].entsize;
	table[0].offset = HTR_WRITER_RESERVE;
	table[0].size = w->nblocks * sizeof(struct htr_disk_block);
	off = HTR_WRITER_RESERVE + table[0].size;
	for (i = 0; i < SP_COUNT; i++) {
		table[1 + i].id = htr_file__sections[1 + i].id;
		table[1 + i].entsize = htr_file__sections[1 + i].entsize;
		table[1 + i].offset = off;
		table[1 + i].size = w->sp[i].size;
		off += w->sp[i].size;
	}

	/* The body is hashed as it becomes final: the zeros between the
	 * section table and the blocks, the blocks as they are linked, the
	 * spools as they are copied. */
	if (htr_body_hash__init(&bh, body_start, off) < 0)
		return fail_nomem(w);
	memset(w->buf, 0, HTR_WRITER_RESERVE - body_start);
	htr_body_hash__feed(&bh, body_start, w->buf,
			    HTR_WRITER_RESERVE - body_start);
	ls.path = w->path;
	ls.hi = w->nblocks;
	nr = w->threads > 1 && !w->no_marks ? pick_cuts(w, cut, w->threads) :
					      1;
	ls.lo = nr > 1 ? cut[nr - 1]->at : 0;
	if (nr > 1)
		rc = link_cut_start(w, &bh, cut, nr, &lr);
	/* The first piece alone: it may hold the start of the spools, which
	 * must not be hashed before it. */
	if (!rc && !grow(&w->buf, &w->bufcap, table[0].size < HTR_BODY_PIECE ?
			 (size_t) table[0].size : HTR_BODY_PIECE,
			 HTR_WRITER_BUF))
		rc = fail_nomem(w);
	else if (!rc && (rc = link_pieces(w, &ls, &w->buf, &bh, NULL, 1)))
		rc = link_fail(w, &ls, rc);
	memset(&sc, 0, sizeof(sc));
	sc.w = w;
	sc.bh = &bh;
	sc.pos = table[1].offset;
	sc.synced = sc.pos / HTR_WRITEBACK_STEP * HTR_WRITEBACK_STEP;
	for (i = 0; i < SP_COUNT; i++)
		if (w->sp[i].fd >= 0)
			infile += w->sp[i].size - w->sp[i].len;
	sc.cap = infile < HTR_SPOOL_COPY ? (size_t) infile : HTR_SPOOL_COPY;
	if (sc.cap && !(sc.buf = malloc(sc.cap)))
		rc = rc ? rc : fail_nomem(w);
	threaded = !rc && ls.hi && infile >= HTR_WRITER_BUF &&
		   pthread_create(&sc.thread, NULL, copy_spools, &sc) == 0;
	/* In one range, a thread hashes the pieces as they are linked; cut,
	 * each range's thread hashes its own. */
	hashing = !rc && nr == 1 && ls.hi * sizeof(struct htr_disk_block) >=
		  HTR_WRITER_BUF && piece_hash_start(&ph, w, &bh);
	if (nr > 1) {
		rc = link_cut_finish(w, &ls, &bh, cut, nr, lr, rc);
	} else if (!rc) {
		rc = link_pieces(w, &ls, &w->buf, &bh, hashing ? &ph : NULL,
				 UINT64_MAX);
		if (rc)
			rc = link_fail(w, &ls, rc);
	}
	if (hashing)
		piece_hash_stop(&ph);
	if (threaded)
		pthread_join(sc.thread, NULL);
	else if (!rc)
		(void) copy_spools(&sc);
	free(sc.buf);
	free(ls.stack);
	if (!rc)
		rc = io_fail(w, sc.err, sc.what);
	if (!rc && htr_body_hash__final(&bh, &body_hash) < 0)
		rc = fail(w, htr_err__set(&w->err, HTR_ERR_IO,
				"%s: body hash: bytes missed (a libhtr bug)",
				w->path));
	htr_body_hash__free(&bh);
	if (rc)
		return rc;
	start_writeback(w, table[1].offset, 0);

	/* Header and table first (the body hash does not cover them). */
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, HTR_MAGIC, 8);
	h.version = HTR_FORMAT_VERSION;
	h.endian = HTR_ENDIAN_TAG;
	h.header_size = sizeof(h);
	h.nsections = 1 + SP_COUNT;
	h.section_table = sizeof(h);
	h.file_size = off;
	h.ninsns = m->ninsns;
	h.nblocks = w->nblocks;
	h.first_root = ls.next_root;
	h.max_depth = ls.max_depth;
	h.trace_size = m->trace_size;
	h.trace_hash = m->trace_hash;
	h.image_hash = w->image_hash;
	h.body_start = body_start;
	memcpy(h.libipt_version, m->libipt_version, sizeof(h.libipt_version));
	h.build_time = (uint64_t) time(NULL);
	h.nroots = ls.nroots;

	h.body_hash = body_hash;
	h.header_hash = 0;
	h.header_hash = htr_hash__bytes(htr_hash__bytes(HTR_HASH_SEED, &h,
							sizeof(h)),
					table, sizeof(table));
	if ((rc = pwrite_all(w, table, sizeof(table), sizeof(h),
			     "write section table")) ||
	    (rc = pwrite_all(w, &h, sizeof(h), 0, "write header")))
		return rc;

	/* The blocks preallocated past the end go. */
	if (w->prealloc != UINT64_MAX && w->prealloc > off &&
	    ftruncate(w->fd, (off_t) off) < 0)
		return fail(w, htr_err__sys(&w->err, "%s: truncate", w->path));
	if (!(w->flags & HTR_WRITER_NO_FSYNC) && fsync(w->fd) < 0)
		return fail(w, htr_err__sys(&w->err, "%s: fsync", w->path));
	if (rename(w->tmp, w->path) < 0)
		return fail(w, htr_err__sys(&w->err, "%s: rename to %s",
					    w->tmp, w->path));
	w->committed = true;
	w->max_depth = ls.max_depth;
	w->link_ranges = nr;
	/* Make the rename durable; some filesystems refuse fsync on a
	 * directory, which is not an error of ours. */
	if (w->flags & HTR_WRITER_NO_FSYNC)
		return 0;
	dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0 && errno != EINVAL && errno != EROFS) {
			rc = htr_err__sys(&w->err, "%s: fsync", w->dir);
			close(dfd);
			return rc;
		}
		close(dfd);
	}
	return 0;
}

void htr_writer__free(struct htr_writer *w)
{
	int i;

	if (!w)
		return;
	if (w->fd >= 0) {
		close(w->fd);
		if (!w->committed)
			unlink(w->tmp);
	}
	for (i = 0; i < SP_COUNT; i++) {
		if (w->sp[i].fd >= 0)
			close(w->sp[i].fd);
		free(w->sp[i].buf);
	}
	while (w->nmarks)
		drop_mark(w, w->nmarks - 1);
	free(w->buf);
	free(w->path);
	free(w->tmp);
	free(w->dir);
	free(w);
}

uint32_t htr_writer__max_depth(const struct htr_writer *w)
{
	return w && w->committed ? w->max_depth : 0;
}

unsigned htr_writer__link_ranges(const struct htr_writer *w)
{
	return w && w->committed ? w->link_ranges : 0;
}

const struct htr_err *htr_writer__err(const struct htr_writer *w)
{
	return w ? &w->err : NULL;
}

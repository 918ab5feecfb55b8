/* Validating an LMDB data file before LMDB trusts it (see lmdbcheck.h). */
#include "lmdbcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* LMDB 0.9's on-disk layout (64-bit, little-endian). */
#define MAGIC 0xBEEFC0DEu
#define DATA_VERSION 1u
#define PAGEHDR 16u              /* pgno 8, pad 2, flags 2, lower/upper 4 */
#define NODEHDR 8u               /* lo 2, hi 2, flags 2, ksize 2 */
#define DBREC 48u                /* MDB_db */
#define META_DBS 24u             /* offset of mm_dbs in the meta */
#define META_LASTPG (META_DBS + 2 * DBREC)
#define META_TXNID (META_LASTPG + 8)
#define P_BRANCH 0x01u
#define P_LEAF 0x02u
#define P_OVERFLOW 0x04u
#define P_META 0x08u
#define F_BIGDATA 0x01u
#define F_SUBDATA 0x02u
#define F_DUPDATA 0x04u
#define DB_INTEGERKEY 0x08u
#define DB_DUPS 0x74u            /* DUPSORT, DUPFIXED, INTEGERDUP, REVERSEDUP */
#define MAXKEY 511u
#define MAXDEPTH 32u
#define INVALID_PG UINT64_MAX

struct db {
	uint32_t pad;
	uint16_t flags, depth;
	uint64_t branch, leaf, overflow, entries, root;
};

struct chk {
	const uint8_t *map;
	uint64_t size, psize, npages;   /* pages in use: last_pg + 1 */
	uint8_t *seen;                  /* one bit per page */
	const char *path;
	struct htr_err *err;
	/* Counts of the tree being walked. */
	uint64_t branch, leaf, overflow, entries;
};

static uint64_t get(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

static int bad(struct chk *c, const char *what, uint64_t pg)
{
	return htr_err__set(c->err, HTR_ERR_CORRUPT, "%s: damaged LMDB file: "
			    "%s (page %llu)", c->path, what,
			    (unsigned long long) pg);
}

static void read_db(const uint8_t *p, struct db *d)
{
	d->pad = (uint32_t) get(p, 4);
	d->flags = (uint16_t) get(p + 4, 2);
	d->depth = (uint16_t) get(p + 6, 2);
	d->branch = get(p + 8, 8);
	d->leaf = get(p + 16, 8);
	d->overflow = get(p + 24, 8);
	d->entries = get(p + 32, 8);
	d->root = get(p + 40, 8);
}

/* Mark page @pg (and @n - 1 after it) as reached; each page once. */
static int claim(struct chk *c, uint64_t pg, uint64_t n, const char *what)
{
	uint64_t i;

	if (pg < 2 || pg >= c->npages || n > c->npages - pg)
		return bad(c, what, pg);
	for (i = pg; i < pg + n; i++) {
		if (c->seen[i >> 3] & (1u << (i & 7)))
			return bad(c, "a page is reached twice", i);
		c->seen[i >> 3] |= (uint8_t) (1u << (i & 7));
	}
	return 0;
}

/* LMDB's default order (memcmp, then length), or size_t order. */
static int key_cmp(const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
		   int intkey)
{
	int r;

	if (intkey) {
		uint64_t x = get(a, 8), y = get(b, 8);

		return x < y ? -1 : x > y;
	}
	r = memcmp(a, b, na < nb ? na : nb);
	return r ? r : na < nb ? -1 : na > nb;
}

/* The overflow run a big value lives in. */
static int check_overflow(struct chk *c, uint64_t pg, uint64_t dsize)
{
	const uint8_t *p;
	uint64_t n;

	if (pg < 2 || pg >= c->npages)
		return bad(c, "a value's overflow page is out of range", pg);
	p = c->map + pg * c->psize;
	n = get(p + 12, 4);
	if (get(p, 8) != pg || !(get(p + 10, 2) & P_OVERFLOW) || !n)
		return bad(c, "bad overflow page header", pg);
	if (dsize > n * c->psize - PAGEHDR)
		return bad(c, "a value is larger than its overflow run", pg);
	c->overflow += n;
	return claim(c, pg, n, "an overflow run runs past the file");
}

static int walk(struct chk *c, uint64_t pg, unsigned level,
		const struct db *d, int main_db, struct db *subs,
		size_t *nsubs, size_t maxsubs);

struct span {
	uint32_t off, len;
};

static int by_off(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* LMDB keeps a page's nodes packed from mp_upper to the page's end, each
 * taking its header, key and data rounded up to even, and moves them by
 * those sizes when it deletes one: nodes that overlap or leave holes make
 * it write past the page (a fuzzer found it).  Check they tile exactly. */
static int check_packed(struct chk *c, const uint8_t *p, uint64_t pg,
			int leaf, uint64_t upper, uint64_t n)
{
	struct span *sp = malloc(n * sizeof(*sp));
	uint64_t i, end = upper;
	int rc = 0;

	if (!sp)
		return htr_err__set(c->err, HTR_ERR_NOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		uint64_t off = get(p + PAGEHDR + 2 * i, 2), len;
		const uint8_t *node = p + off;

		if (off < upper || off + NODEHDR > c->psize || (off & 1)) {
			free(sp);
			return bad(c, "a node offset is out of bounds", pg);
		}
		len = NODEHDR + get(node + 6, 2);
		if (leaf)
			len += get(node + 4, 2) & F_BIGDATA ? 8 :
			       get(node, 2) | get(node + 2, 2) << 16;
		sp[i].off = (uint32_t) off;
		sp[i].len = (uint32_t) ((len + 1) & ~1ull);
		if (len > c->psize)
			sp[i].len = (uint32_t) c->psize + 2;
	}
	if (n)
		qsort(sp, (size_t) n, sizeof(*sp), by_off);
	for (i = 0; i < n && !rc; i++) {
		if (sp[i].off != end)
			rc = bad(c, "nodes overlap or leave a hole", pg);
		end = (uint64_t) sp[i].off + sp[i].len;
	}
	if (!rc && end != c->psize)
		rc = bad(c, "nodes do not reach the page's end", pg);
	free(sp);
	return rc;
}

/* One node of page @pg, at @off. */
static int check_node(struct chk *c, uint64_t pg, unsigned level,
		      const struct db *d, int main_db, struct db *subs,
		      size_t *nsubs, size_t maxsubs, const uint8_t *node,
		      int leaf, uint64_t room)
{
	uint64_t lo = get(node, 2), hi = get(node + 2, 2);
	uint64_t flags = get(node + 4, 2), ksize = get(node + 6, 2);
	uint64_t dsize = lo | hi << 16;

	if (ksize > MAXKEY || NODEHDR + ksize > room)
		return bad(c, "a key runs past its page", pg);
	if (!leaf)
		/* A branch node's data is the child's page number. */
		return walk(c, lo | hi << 16 | flags << 32, level + 1, d,
			    main_db, subs, nsubs, maxsubs);
	if (flags & ~(uint64_t) (F_BIGDATA | F_SUBDATA) ||
	    (flags & F_DUPDATA))
		return bad(c, "a leaf node has unknown flags", pg);
	c->entries++;
	if (flags & F_BIGDATA) {
		if (NODEHDR + ksize + 8 > room)
			return bad(c, "a value's page number runs past its "
				   "page", pg);
		return check_overflow(c, get(node + NODEHDR + ksize, 8),
				      dsize);
	}
	if (NODEHDR + ksize + dsize > room)
		return bad(c, "a value runs past its page", pg);
	if (flags & F_SUBDATA) {
		if (!main_db || dsize != DBREC)
			return bad(c, "a named database record is malformed",
				   pg);
		if (*nsubs == maxsubs)
			return bad(c, "too many named databases", pg);
		read_db(node + NODEHDR + ksize, &subs[(*nsubs)++]);
	}
	return 0;
}

/* Walk the subtree at @pg (depth @level, 1 for the root) of @d. */
static int walk(struct chk *c, uint64_t pg, unsigned level,
		const struct db *d, int main_db, struct db *subs,
		size_t *nsubs, size_t maxsubs)
{
	const uint8_t *p, *prev = NULL;
	uint64_t flags, lower, upper, n, i, prev_len = 0;
	int leaf, rc;

	if (level > d->depth)
		return bad(c, "a tree is deeper than its record says", pg);
	if ((rc = claim(c, pg, 1, "a tree page is out of range")) != 0)
		return rc;
	p = c->map + pg * c->psize;
	flags = get(p + 10, 2);
	lower = get(p + 12, 2);
	upper = get(p + 14, 2);
	if (get(p, 8) != pg)
		return bad(c, "a page does not carry its own number", pg);
	if (flags != P_BRANCH && flags != P_LEAF)
		return bad(c, "a tree page is neither branch nor leaf", pg);
	leaf = flags == P_LEAF;
	if (leaf != (level == d->depth))
		return bad(c, "leaves at different depths", pg);
	if (lower < PAGEHDR || lower > upper || upper > c->psize ||
	    (lower & 1) || lower == PAGEHDR)
		return bad(c, "bad page bounds", pg);
	n = (lower - PAGEHDR) / 2;
	if (leaf)
		c->leaf++;
	else
		c->branch++;
	if ((rc = check_packed(c, p, pg, leaf, upper, n)) != 0)
		return rc;
	for (i = 0; i < n; i++) {
		uint64_t off = get(p + PAGEHDR + 2 * i, 2), ksize;
		const uint8_t *node;

		if (off < upper || off + NODEHDR > c->psize || (off & 1))
			return bad(c, "a node offset is out of bounds", pg);
		node = p + off;
		ksize = get(node + 6, 2);
		/* A branch's first key is empty: it stands for everything
		 * below the second. */
		if (!leaf && !i)
			prev = NULL;
		else if (off + NODEHDR + ksize <= c->psize) {
			if ((d->flags & DB_INTEGERKEY) && ksize != 8)
				return bad(c, "an integer key is not 8 bytes",
					   pg);
			if (prev && key_cmp(prev, prev_len, node + NODEHDR,
					    ksize, d->flags & DB_INTEGERKEY) >= 0)
				return bad(c, "keys out of order", pg);
			prev = node + NODEHDR;
			prev_len = ksize;
		}
		rc = check_node(c, pg, level, d, main_db, subs, nsubs, maxsubs,
				node, leaf, c->psize - off);
		if (rc)
			return rc;
	}
	return 0;
}

/* A tree and its counts. */
static int check_tree(struct chk *c, const struct db *d, int main_db,
		      struct db *subs, size_t *nsubs, size_t maxsubs,
		      const char *name)
{
	int rc;

	if ((d->flags & DB_DUPS) || d->depth > MAXDEPTH)
		return htr_err__set(c->err, HTR_ERR_CORRUPT, "%s: damaged LMDB "
				    "file: database %s has unknown flags or "
				    "depth", c->path, name);
	if (d->root == INVALID_PG) {
		if (d->depth || d->entries || d->branch || d->leaf ||
		    d->overflow)
			return htr_err__set(c->err, HTR_ERR_CORRUPT, "%s: "
					    "damaged LMDB file: empty database "
					    "%s with counts", c->path, name);
		return 0;
	}
	if (!d->depth)
		return bad(c, "a database with a root has no depth", d->root);
	c->branch = c->leaf = c->overflow = c->entries = 0;
	if ((rc = walk(c, d->root, 1, d, main_db, subs, nsubs, maxsubs)) != 0)
		return rc;
	if (c->branch != d->branch || c->leaf != d->leaf ||
	    c->overflow != d->overflow || c->entries != d->entries)
		return htr_err__set(c->err, HTR_ERR_CORRUPT, "%s: damaged LMDB "
				    "file: database %s counts do not match its "
				    "pages", c->path, name);
	return 0;
}

/* The free list's records name pages no tree uses (LMDB hands them out to
 * writers).  Called after every tree was walked. */
static int check_freelist(struct chk *c, uint64_t pg, unsigned level,
			  unsigned depth)
{
	const uint8_t *p = c->map + pg * c->psize;
	uint64_t lower = get(p + 12, 2), n = (lower - PAGEHDR) / 2, i;
	int leaf = get(p + 10, 2) == P_LEAF;

	for (i = 0; i < n; i++) {
		const uint8_t *node = p + get(p + PAGEHDR + 2 * i, 2), *v;
		uint64_t ksize = get(node + 6, 2), dsize, cnt, k, idpg;
		int rc;

		if (!leaf) {
			rc = check_freelist(c, get(node, 2) |
					    get(node + 2, 2) << 16 |
					    get(node + 4, 2) << 32, level + 1,
					    depth);
			if (rc)
				return rc;
			continue;
		}
		dsize = get(node, 2) | get(node + 2, 2) << 16;
		v = node + NODEHDR + ksize;
		if (get(node + 4, 2) & F_BIGDATA)
			v = c->map + get(v, 8) * c->psize + PAGEHDR;
		cnt = dsize >= 8 ? get(v, 8) : 0;
		if (dsize < 8 || cnt > (dsize - 8) / 8)
			return bad(c, "a free list record is malformed", pg);
		for (k = 0; k < cnt; k++) {
			idpg = get(v + 8 + 8 * k, 8);
			if (idpg < 2 || idpg >= c->npages)
				return bad(c, "the free list names a page out "
					   "of range", pg);
			if (c->seen[idpg >> 3] & (1u << (idpg & 7)))
				return bad(c, "the free list names a page in "
					   "use", idpg);
		}
	}
	(void) depth;
	return 0;
}

/* The snapshot meta @meta describes: its trees and free list. */
static int check_snapshot(struct chk *c, const uint8_t *meta)
{
	struct db freedb, maindb, subs[64];
	uint64_t lastpg = get(meta + META_LASTPG, 8);
	uint64_t mapsize = get(meta + 16, 8);
	size_t nsubs = 0, i;
	int rc;

	if (lastpg < 1 || lastpg >= c->size / c->psize)
		return bad(c, "the last page lies past the end of the file",
			   lastpg);
	/* LMDB maps (and sizes tables by) what the meta asks for. */
	if (mapsize < (lastpg + 1) * c->psize || mapsize > (1ull << 40))
		return bad(c, "bad map size", 0);
	c->npages = lastpg + 1;
	free(c->seen);
	c->seen = calloc((size_t) (c->npages + 7) / 8, 1);
	if (!c->seen)
		return htr_err__set(c->err, HTR_ERR_NOMEM, "out of memory");
	read_db(meta + META_DBS, &freedb);
	read_db(meta + META_DBS + DBREC, &maindb);
	if (maindb.flags || freedb.flags != DB_INTEGERKEY)
		return bad(c, "the core databases have unknown flags", 0);
	/* Named databases are records in the main tree; walk them after. */
	if ((rc = check_tree(c, &maindb, 1, subs, &nsubs, 64, "main")) ||
	    (rc = check_tree(c, &freedb, 0, NULL, NULL, 0, "free")))
		return rc;
	for (i = 0; i < nsubs; i++)
		if ((rc = check_tree(c, &subs[i], 0, NULL, NULL, 0, "named")))
			return rc;
	if (freedb.root != INVALID_PG)
		return check_freelist(c, freedb.root, 1, freedb.depth);
	return 0;
}

static int check_map(struct chk *c)
{
	uint64_t psize;
	size_t i;
	int rc;

	if (c->size < 2 * 512)
		return bad(c, "shorter than two meta pages", 0);
	psize = get(c->map + PAGEHDR + META_DBS, 4);
	if (psize < 512 || psize > 65536 || (psize & (psize - 1)) ||
	    c->size < 2 * psize)
		return bad(c, "bad page size", 0);
	c->psize = psize;
	for (i = 0; i < 2; i++) {
		const uint8_t *pg = c->map + i * psize;
		const uint8_t *m = pg + PAGEHDR;

		if (get(pg, 8) != i || !(get(pg + 10, 2) & P_META) ||
		    get(m, 4) != MAGIC || get(m + 4, 4) != DATA_VERSION ||
		    get(m + META_DBS, 4) != psize)
			return bad(c, "bad meta page", i);
	}
	/* Both snapshots: LMDB usually reads the newer, but takes the meta
	 * the lock file's transaction ID names, which can be the older (a
	 * writer that died mid-commit; a fuzzer found it).  In a sound file
	 * both are whole trees: pages an older snapshot still uses are only
	 * reused two commits later, after its meta was overwritten. */
	for (i = 0; i < 2; i++)
		if ((rc = check_snapshot(c, c->map + i * psize + PAGEHDR)) != 0)
			return rc;
	return 0;
}

int htr_lmdb__check(const char *path, struct htr_err *err)
{
	struct chk c;
	struct stat st;
	void *map;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? 0 : htr_err__sys(err, "%s", path);
	if (fstat(fd, &st) < 0) {
		rc = htr_err__sys(err, "%s", path);
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return htr_err__set(err, HTR_ERR_CORRUPT, "%s: not a regular "
				    "file", path);
	}
	if (!st.st_size) {
		close(fd);
		return 0;
	}
	map = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return htr_err__sys(err, "%s: mmap", path);
	memset(&c, 0, sizeof(c));
	c.map = map;
	c.size = (uint64_t) st.st_size;
	c.path = path;
	c.err = err;
	rc = check_map(&c);
	free(c.seen);
	munmap(map, (size_t) st.st_size);
	return rc;
}

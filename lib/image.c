/*
 * Image: one libipt image over one shared section cache (see image.h).
 *
 * ELF files are read with libelf only to find their executable PT_LOAD
 * segments; libipt maps the bytes itself (pt_iscache_add_file).  Every
 * header field is checked against the file size before use, so a corrupt
 * ELF gives a message, never a crash.
 */
#include "image.h"
#include "elffile.h"
#include "symbols.h"

#include <intel-pt.h>

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct htr_image {
	struct pt_image *pt;
	struct pt_image_section_cache *iscache;
	struct htr_image_piece *pieces;
	size_t npieces, cap;
	struct htr_image_extent *ext;   /* by start */
	size_t next, ext_cap;
	int *fds;                       /* memory files behind bytes added */
	size_t nfds;
};

int htr_image__alloc(struct htr_image **out)
{
	struct htr_image *img;

	*out = NULL;
	img = calloc(1, sizeof(*img));
	if (!img)
		return HTR_ERR_NOMEM;
	img->pt = pt_image_alloc(NULL);
	img->iscache = pt_iscache_alloc(NULL);
	if (!img->pt || !img->iscache) {
		htr_image__free(img);
		return HTR_ERR_NOMEM;
	}
	*out = img;
	return 0;
}

void htr_image__free(struct htr_image *img)
{
	size_t i;

	if (!img)
		return;
	/* The image references the cache's sections: free it first. */
	pt_image_free(img->pt);
	pt_iscache_free(img->iscache);
	for (i = 0; i < img->npieces; i++) {
		free((char *) img->pieces[i].path);
		free((char *) img->pieces[i].file);
	}
	for (i = 0; i < img->nfds; i++)
		close(img->fds[i]);
	free(img->fds);
	free(img->pieces);
	free(img->ext);
	free(img);
}

struct pt_image *htr_image__pt(struct htr_image *img)
{
	return img ? img->pt : NULL;
}

int htr_image__private(const struct htr_image *img, struct pt_image **pt,
		       struct pt_image_section_cache **isc)
{
	size_t i;
	int rc = 0;

	*isc = pt_iscache_alloc(NULL);
	*pt = pt_image_alloc(NULL);
	if (!*isc || !*pt)
		rc = HTR_ERR_NOMEM;
	for (i = 0; !rc && i < img->npieces; i++) {
		const struct htr_image_piece *p = &img->pieces[i];
		int isid = pt_iscache_add_file(*isc, p->file, p->offset,
					       p->size, p->vaddr);

		if (isid < 0 || pt_image_add_cached(*pt, *isc, isid, NULL) < 0)
			rc = HTR_ERR_IO;
	}
	if (rc) {
		pt_image_free(*pt);
		pt_iscache_free(*isc);
		*pt = NULL;
		*isc = NULL;
	}
	return rc;
}

size_t htr_image__count(const struct htr_image *img)
{
	return img ? img->npieces : 0;
}

const struct htr_image_piece *htr_image__piece(const struct htr_image *img,
					       size_t i)
{
	if (!img || i >= img->npieces)
		return NULL;
	return &img->pieces[i];
}

/* Map @size bytes of @path at @offset to @vaddr and remember the piece. */
static int add_piece_as(struct htr_image *img, const char *path,
			const char *record, uint32_t kind, uint64_t offset,
			uint64_t size, uint64_t vaddr, struct htr_err *err);

static int add_piece(struct htr_image *img, const char *path, uint32_t kind,
		     uint64_t offset, uint64_t size, uint64_t vaddr,
		     struct htr_err *err)
{
	return add_piece_as(img, path, NULL, kind, offset, size, vaddr, err);
}

int htr_image__add_bytes(struct htr_image *img, const void *data,
			 uint64_t size, uint64_t vaddr, const char *name,
			 struct htr_err *err)
{
	const uint8_t *p = data;
	char path[64];
	uint64_t off = 0;
	int fd, *fds;

	if (!img || !data || !size)
		return htr_err__set(err, HTR_ERR_INVALID, "no bytes given");
	if (vaddr + size < vaddr)
		return htr_err__set(err, HTR_ERR_INVALID, "%s: 0x%llx bytes at "
				    "0x%llx wrap the address space",
				    name ? name : "bytes",
				    (unsigned long long) size,
				    (unsigned long long) vaddr);
	fds = realloc(img->fds, (img->nfds + 1) * sizeof(*fds));
	if (!fds)
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	img->fds = fds;
	/* libipt maps sections from files by name: a memory file's
	 * /proc/self/fd name lasts as long as the image keeps it open. */
	fd = (int) syscall(SYS_memfd_create, "htr-bytes", 1u /* CLOEXEC */);
	if (fd < 0)
		return htr_err__sys(err, "%s: memory file",
				    name ? name : "bytes");
	while (off < size) {
		ssize_t k = write(fd, p + off, size - off > (1u << 30) ?
				  (1u << 30) : (size_t) (size - off));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int rc = htr_err__sys(err, "%s: memory file",
					      name ? name : "bytes");

			close(fd);
			return rc;
		}
		off += (uint64_t) k;
	}
	img->fds[img->nfds++] = fd;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return add_piece_as(img, path, name ? name : "[bytes]", 2, 0, size,
			    vaddr, err);
}

/* As add_piece, recording @record (NULL: @path made absolute). */
static int add_piece_as(struct htr_image *img, const char *path,
			const char *record, uint32_t kind, uint64_t offset,
			uint64_t size, uint64_t vaddr, struct htr_err *err)
{
	struct htr_image_piece *p;
	char *copy;
	int isid, rc;

	if (img->npieces == img->cap) {
		size_t cap = img->cap ? img->cap * 2 : 8;

		p = realloc(img->pieces, cap * sizeof(*p));
		if (!p)
			return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
		img->pieces = p;
		img->cap = cap;
	}
	/* Recorded absolute, so names resolve from any directory later. */
	copy = record ? NULL : realpath(path, NULL);
	if (!copy)
		copy = strdup(record ? record : path);
	if (!copy)
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	isid = pt_iscache_add_file(img->iscache, path, offset, size, vaddr);
	if (isid < 0) {
		free(copy);
		return htr_err__set(err, HTR_ERR_IO, "%s: cannot map 0x%llx bytes "
				    "at offset 0x%llx: %s", path,
				    (unsigned long long) size,
				    (unsigned long long) offset,
				    pt_errstr(pt_errcode(isid)));
	}
	rc = pt_image_add_cached(img->pt, img->iscache, isid, NULL);
	if (rc < 0) {
		free(copy);
		return htr_err__set(err, HTR_ERR_INVALID, "%s: cannot add to "
				    "the image at 0x%llx: %s", path,
				    (unsigned long long) vaddr,
				    pt_errstr(pt_errcode(rc)));
	}
	p = &img->pieces[img->npieces];
	p->file = strdup(path);
	if (!p->file) {
		free(copy);
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	}
	img->npieces++;
	p->path = copy;
	p->kind = kind;
	p->vaddr = vaddr;
	p->offset = offset;
	p->size = size;
	return 0;
}

static int cmp_extent(const void *a, const void *b)
{
	const struct htr_image_extent *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_func_name(const void *a, const void *b)
{
	const struct htr_elf_func *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* The start of the function @name is split from (FUNC for "FUNC.cold",
 * "FUNC.cold.N", "FUNC.part.N", also after GCC's other clone suffixes:
 * "f.isra.0.cold" is part of "f.isra.0"), among @byname (@n, sorted by
 * name); @own if it is not split-off code or its FUNC is not there.
 * *@is_cold: it is FUNC.cold, which is jumped to, never called: its
 * start is no entry. */
static uint64_t split_from(const struct htr_elf_func *byname, long n,
			   const char *name, uint64_t own, int *is_cold)
{
	const char *cold = strstr(name, ".cold"), *part = strstr(name, ".part.");
	const char *cut = cold && (!part || cold < part) ? cold : part;
	struct htr_elf_func key, *hit;
	char buf[512];
	size_t len;

	*is_cold = 0;
	if (!cut || (len = (size_t) (cut - name)) == 0 || len >= sizeof(buf))
		return own;
	memcpy(buf, name, len);
	buf[len] = '\0';
	key.name = buf;
	hit = bsearch(&key, byname, (size_t) n, sizeof(*byname), cmp_func_name);
	*is_cold = hit && cold;
	return hit ? hit->value : own;
}

/* Record the extents of @elf's sized function symbols, moved by @bias.  A
 * file without symbols only loses the rules that need them; no error. */
static int add_extents(struct htr_image *img, Elf *elf, uint64_t bias)
{
	struct htr_elf_func *f = NULL, *byname;
	long n = htr_syms__elf_funcs(elf, &f), i;

	if (n < 0)
		return HTR_ERR_NOMEM;
	byname = n ? malloc((size_t) n * sizeof(*byname)) : NULL;
	if (n && !byname) {
		free(f);
		return HTR_ERR_NOMEM;
	}
	if (img->next + (size_t) n > img->ext_cap) {
		size_t cap = img->next + (size_t) n;
		struct htr_image_extent *e = realloc(img->ext, cap * sizeof(*e));

		if (!e) {
			free(f);
			free(byname);
			return HTR_ERR_NOMEM;
		}
		img->ext = e;
		img->ext_cap = cap;
	}
	if (n) {
		memcpy(byname, f, (size_t) n * sizeof(*byname));
		qsort(byname, (size_t) n, sizeof(*byname), cmp_func_name);
	}
	for (i = 0; i < n; i++)
		if (f[i].size && f[i].value + f[i].size > f[i].value) {
			struct htr_image_extent *e = &img->ext[img->next++];
			int is_cold;

			e->start = f[i].value + bias;
			e->end = f[i].value + f[i].size + bias;
			e->func = split_from(byname, n, f[i].name, f[i].value,
					     &is_cold) + bias;
			e->entry = is_cold ? e->func : e->start;
		}
	free(f);
	free(byname);
	if (img->next)
		qsort(img->ext, img->next, sizeof(*img->ext), cmp_extent);
	return 0;
}

int htr_image__func_extent(const struct htr_image *img, uint64_t addr,
			   uint64_t *start, uint64_t *end, uint64_t *func,
			   uint64_t *entry)
{
	size_t lo = 0, hi = img->next, i;

	/* The last extent starting at or before @addr; a few earlier ones
	 * may still cover it (aliases, nested symbols). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (img->ext[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; i-- > 0 && lo - i <= 8;)
		if (addr < img->ext[i].end) {
			*start = img->ext[i].start;
			*end = img->ext[i].end;
			*func = img->ext[i].func;
			*entry = img->ext[i].entry;
			return 1;
		}
	return 0;
}

int htr_image__add_elf(struct htr_image *img, const char *path,
		       int has_base, uint64_t base, struct htr_err *err)
{
	struct htr_elf ef;
	Elf *elf;
	GElf_Phdr ph;
	struct stat st;
	size_t n, i, nexec = 0;
	uint64_t lowest = UINT64_MAX, bias = 0;
	int rc;

	if (!img || !path)
		return htr_err__set(err, HTR_ERR_INVALID, "no image or path");
	rc = htr_elf__open(&ef, path, NULL, HTR_ELF_X86_64, err);
	/* htr_builder_add_elf()'s code for a file that is no x86-64 ELF */
	if (rc == HTR_ERR_FORMAT)
		rc = err ? (err->code = HTR_ERR_INVALID) : HTR_ERR_INVALID;
	if (rc < 0)
		return rc;
	elf = ef.elf;
	elf_getphdrnum(elf, &n);       /* checked by htr_elf__open() */
	if (fstat(ef.fd, &st) < 0) {
		rc = htr_err__sys(err, "%s", path);
		goto out;
	}
	/* First pass: validate every PT_LOAD and find the lowest vaddr. */
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int) i, &ph)) {
			rc = htr_err__set(err, HTR_ERR_INVALID, "%s: bad program "
					  "header %zu: %s", path, i,
					  elf_errmsg(-1));
			goto out;
		}
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_vaddr < lowest)
			lowest = ph.p_vaddr;
		if (!(ph.p_flags & PF_X) || !ph.p_filesz)
			continue;
		if (ph.p_offset > (uint64_t) st.st_size ||
		    ph.p_filesz > (uint64_t) st.st_size - ph.p_offset) {
			rc = htr_err__set(err, HTR_ERR_INVALID, "%s: PT_LOAD %zu "
					  "lies past the end of the file", path, i);
			goto out;
		}
		if (ph.p_vaddr + ph.p_filesz < ph.p_vaddr) {
			rc = htr_err__set(err, HTR_ERR_INVALID, "%s: PT_LOAD %zu "
					  "wraps the address space", path, i);
			goto out;
		}
		nexec++;
	}
	if (!nexec) {
		rc = htr_err__set(err, HTR_ERR_INVALID, "%s: no executable "
				  "PT_LOAD segment", path);
		goto out;
	}
	if (has_base)
		bias = base - lowest;     /* modular: relocating down works too */
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int) i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X) || !ph.p_filesz)
			continue;
		rc = add_piece(img, path, 1, ph.p_offset, ph.p_filesz,
			       ph.p_vaddr + bias, err);
		if (rc < 0)
			goto out;
	}
	if (add_extents(img, elf, bias) < 0)
		rc = htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
out:
	htr_elf__close(&ef);
	return rc;
}

int htr_image__add_raw(struct htr_image *img, const char *path,
		       uint64_t offset, uint64_t size, uint64_t vaddr,
		       struct htr_err *err)
{
	struct stat st;
	uint64_t fsize;

	if (!img || !path)
		return htr_err__set(err, HTR_ERR_INVALID, "no image or path");
	if (stat(path, &st) < 0)
		return htr_err__sys(err, "%s", path);
	if (!S_ISREG(st.st_mode))
		return htr_err__set(err, HTR_ERR_IO, "%s: not a regular file",
				    path);
	fsize = (uint64_t) st.st_size;
	if (offset >= fsize)
		return htr_err__set(err, HTR_ERR_INVALID, "%s: offset 0x%llx is "
				    "past the end of the file (%llu bytes)", path,
				    (unsigned long long) offset,
				    (unsigned long long) fsize);
	if (!size)
		size = fsize - offset;
	if (size > fsize - offset)
		return htr_err__set(err, HTR_ERR_INVALID, "%s: 0x%llx bytes at "
				    "offset 0x%llx run past the end of the file",
				    path, (unsigned long long) size,
				    (unsigned long long) offset);
	if (vaddr + size < vaddr)
		return htr_err__set(err, HTR_ERR_INVALID, "%s: 0x%llx bytes at "
				    "0x%llx wrap the address space", path,
				    (unsigned long long) size,
				    (unsigned long long) vaddr);
	return add_piece(img, path, 2, offset, size, vaddr, err);
}

/* Parse a whole string as hex (0x...) or decimal.  Returns 0 or -1. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	int hex = 0;

	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		hex = 1;
		i = 2;
	}
	if (i >= len)
		return -1;
	for (; i < len; i++) {
		unsigned d;
		char c = s[i];

		if (c >= '0' && c <= '9')
			d = (unsigned) (c - '0');
		else if (hex && c >= 'a' && c <= 'f')
			d = (unsigned) (c - 'a' + 10);
		else if (hex && c >= 'A' && c <= 'F')
			d = (unsigned) (c - 'A' + 10);
		else
			return -1;
		if (hex ? v >> 60 : v > (UINT64_MAX - d) / 10)
			return -1;
		v = hex ? v << 4 | d : v * 10 + d;
	}
	*out = v;
	return 0;
}

/* Last ':' in [@s, @end), or NULL. */
static const char *last_colon(const char *s, const char *end)
{
	while (end > s)
		if (*--end == ':')
			return end;
	return NULL;
}

/* Copy the @len first bytes of @s into a fresh string. */
static char *dup_n(const char *s, size_t len)
{
	char *p = malloc(len + 1);

	if (p) {
		memcpy(p, s, len);
		p[len] = 0;
	}
	return p;
}

int htr_image__add_elf_spec(struct htr_image *img, const char *spec,
			    struct htr_err *err)
{
	const char *at;
	uint64_t base = 0;
	char *file;
	int rc;

	if (!spec || !*spec)
		return htr_err__set(err, HTR_ERR_INVALID, "empty image spec");
	at = strrchr(spec, '@');
	if (!at)
		return htr_image__add_elf(img, spec, 0, 0, err);
	if (at == spec)
		return htr_err__set(err, HTR_ERR_INVALID, "spec '%s': no file",
				    spec);
	if (parse_u64(at + 1, strlen(at + 1), &base) < 0)
		return htr_err__set(err, HTR_ERR_INVALID, "spec '%s': bad "
				    "address", spec);
	file = dup_n(spec, (size_t) (at - spec));
	if (!file)
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	rc = htr_image__add_elf(img, file, 1, base, err);
	free(file);
	return rc;
}

int htr_image__add_raw_spec(struct htr_image *img, const char *spec,
			    struct htr_err *err)
{
	const char *at, *end, *c1, *c2 = NULL;
	uint64_t vaddr, offset = 0, size = 0;
	char *file;
	int rc;

	if (!spec || !*spec)
		return htr_err__set(err, HTR_ERR_INVALID, "empty image spec");
	at = strrchr(spec, '@');
	if (!at)
		return htr_err__set(err, HTR_ERR_INVALID, "spec '%s': missing "
				    "@VADDR", spec);
	if (parse_u64(at + 1, strlen(at + 1), &vaddr) < 0)
		return htr_err__set(err, HTR_ERR_INVALID, "spec '%s': bad "
				    "address", spec);
	/* FILE[:OFFSET[:SIZE]]: numeric ':' fields are taken from the right;
	 * a non-numeric one belongs to the file name. */
	end = at;
	c1 = last_colon(spec, end);
	if (c1 && c1 > spec) {
		uint64_t v1;

		if (parse_u64(c1 + 1, (size_t) (end - c1 - 1), &v1) == 0) {
			const char *c0 = last_colon(spec, c1);
			uint64_t v0;

			if (c0 && c0 > spec &&
			    parse_u64(c0 + 1, (size_t) (c1 - c0 - 1), &v0) == 0) {
				offset = v0;
				size = v1;
				c2 = c0;
			} else {
				offset = v1;
				c2 = c1;
			}
			end = c2;
		}
	}
	if (end == spec)
		return htr_err__set(err, HTR_ERR_INVALID, "spec '%s': no file",
				    spec);
	file = dup_n(spec, (size_t) (end - spec));
	if (!file)
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	rc = htr_image__add_raw(img, file, offset, size, vaddr, err);
	free(file);
	return rc;
}

/*
 * Opening .htr files: map read-only and validate everything that can be
 * validated without touching every block (see file.h and FORMAT.md).
 */
#include "file.h"

#include "abi.h"

#include <errno.h>
#include <intel-pt.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HTR_MAX_SECTIONS 64u
#define U64(x) ((unsigned long long) (x))

#define OPEN_OPTS_SIZE0 HTR_ABI_SIZE0(struct htr_open_opts, verify_body)
#define FILE_INFO_SIZE0 HTR_ABI_SIZE0(struct htr_file_info, build_time)
#define GAP_INFO_SIZE0 HTR_ABI_SIZE0(struct htr_gap_info, code)
#define IMAGE_INFO_SIZE0 HTR_ABI_SIZE0(struct htr_image_info, kind)
#define SYNC_INFO_SIZE0 HTR_ABI_SIZE0(struct htr_sync_info, id)
#define THREAD_INFO_SIZE0 HTR_ABI_SIZE0(struct htr_thread_info, clock_ns)

void htr_open_opts_init_size(struct htr_open_opts *opts, size_t size)
{
	htr_abi__init(opts, size);
}

const struct htr_file__section htr_file__sections[HTR_NSECTIONS] = {
	{ HTR_SEC_BLOCKS, sizeof(struct htr_disk_block), "blocks" },
	{ HTR_SEC_FUNCS, sizeof(uint64_t), "functions" },
	{ HTR_SEC_GAPS, sizeof(struct htr_disk_gap), "gaps" },
	{ HTR_SEC_TSC, sizeof(struct htr_disk_tsc), "tsc" },
	{ HTR_SEC_SYNC, sizeof(struct htr_disk_sync), "sync" },
	{ HTR_SEC_IMAGES, 1, "images" },
	{ HTR_SEC_THREAD, sizeof(struct htr_disk_thread), "thread" },
};

/* Records checked on open between letting their pages go. */
#define CHECK_WINDOW (1u << 16)

/* @n bytes at @p of the mapping were only checked: let their pages go.
 * Opening a file of 10^9 instructions reads gigabytes of time points and
 * sync points (and, verifying, all of it); kept resident, they would make
 * every command's memory grow with the trace.  The page cache keeps them;
 * a later read maps them again.  Never on the caller's buffer. */
static void let_go(void *ctx, const uint8_t *p, uint64_t n)
{
	const struct htr_file *f = ctx;
	uintptr_t pg = (uintptr_t) sysconf(_SC_PAGESIZE), lo, hi;

	if (f->borrowed || !pg)
		return;
	lo = ((uintptr_t) p + pg - 1) & ~(pg - 1);
	hi = ((uintptr_t) p + (uintptr_t) n) & ~(pg - 1);
	if (hi > lo)
		(void) madvise((void *) lo, hi - lo, MADV_DONTNEED);
}

/* Records [@k - @k % CHECK_WINDOW, @k] of the section at @base were
 * checked. */
static void checked(const struct htr_file *f, const void *base, size_t rec,
		    uint64_t k)
{
	uint64_t from = k - k % CHECK_WINDOW;

	let_go((void *) f, (const uint8_t *) base + from * rec,
	       (k + 1 - from) * rec);
}

/* Sections of each version: version 1 has no thread section. */
static uint32_t nsections_of(uint32_t version)
{
	return version == 1 ? HTR_NSECTIONS - 1 : HTR_NSECTIONS;
}

static int corrupt(struct htr_file *f, const char *what)
{
	return htr_err__set(&f->err, HTR_ERR_CORRUPT, "%s: %s", f->path, what);
}

/* The size of image record @rec at @pos with @left bytes left, or 0. */
static uint64_t image_rec_size(const uint8_t *p, uint64_t left)
{
	struct htr_disk_image im;
	uint64_t n;

	if (left < sizeof(im))
		return 0;
	memcpy(&im, p, sizeof(im));
	n = sizeof(im) + (((uint64_t) im.path_len + 7) & ~7ull);
	return n <= left ? n : 0;
}

int htr_file__image_next(const struct htr_file *file, uint64_t *pos,
			 struct htr_file_image *im)
{
	uint64_t n;

	if (!file || !file->ok || !pos || !im || *pos >= file->images_size)
		return HTR_ERR_ITEROVER;
	n = image_rec_size(file->images + *pos, file->images_size - *pos);
	if (!n)
		return HTR_ERR_ITEROVER;
	im->rec = (const struct htr_disk_image *) (file->images + *pos);
	im->path = (const char *) (im->rec + 1);
	im->path_len = im->rec->path_len;
	*pos += n;
	return 0;
}

/* Sections, the counts and the small sections' order. */
static int check_sections(struct htr_file *f, const struct htr_disk_header *h)
{
	const struct htr_disk_section *tab =
		(const struct htr_disk_section *) (f->map + h->section_table);
	const struct htr_disk_section *found[HTR_NSECTIONS] = { NULL };
	const struct htr_file__section *desc = htr_file__sections;
	uint32_t i, j, nsec = nsections_of(h->version);
	uint64_t k;

	for (i = 0; i < h->nsections; i++) {
		const struct htr_disk_section *s = &tab[i];

		for (j = 0; j < nsec; j++)
			if (desc[j].id == s->id)
				break;
		if (j == nsec)
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: unknown section id %u", f->path,
				(unsigned) s->id);
		if (found[j])
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: section %s appears twice", f->path,
				desc[j].name);
		found[j] = s;
		if (s->entsize != desc[j].entsize)
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: section %s: record size %u, expected %u",
				f->path, desc[j].name, (unsigned) s->entsize,
				(unsigned) desc[j].entsize);
		if (s->offset % 8 || s->size % 8 || s->size % s->entsize)
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: section %s: misaligned offset or size",
				f->path, desc[j].name);
		if (s->offset < h->body_start || s->offset > h->file_size ||
		    s->size > h->file_size - s->offset)
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: section %s: outside the file (offset %llu, "
				"size %llu)", f->path, desc[j].name,
				U64(s->offset), U64(s->size));
	}
	for (j = 0; j < nsec; j++)
		if (!found[j])
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: section %s missing", f->path,
				desc[j].name);
	for (i = 0; i < nsec; i++)
		for (j = i + 1; j < nsec; j++) {
			const struct htr_disk_section *a = found[i], *b = found[j];

			if (a->size && b->size && a->offset < b->offset + b->size &&
			    b->offset < a->offset + a->size)
				return htr_err__set(&f->err, HTR_ERR_CORRUPT,
					"%s: sections %s and %s overlap",
					f->path, desc[i].name,
					desc[j].name);
		}

	f->blocks = (const struct htr_disk_block *) (f->map + found[0]->offset);
	f->nblocks = found[0]->size / sizeof(struct htr_disk_block);
	f->funcs = (const uint64_t *) (f->map + found[1]->offset);
	f->nfuncs = found[1]->size / sizeof(uint64_t);
	f->gaps = (const struct htr_disk_gap *) (f->map + found[2]->offset);
	f->ngaps = found[2]->size / sizeof(struct htr_disk_gap);
	f->tsc = (const struct htr_disk_tsc *) (f->map + found[3]->offset);
	f->ntsc = found[3]->size / sizeof(struct htr_disk_tsc);
	f->sync = (const struct htr_disk_sync *) (f->map + found[4]->offset);
	f->nsync = found[4]->size / sizeof(struct htr_disk_sync);
	f->images = f->map + found[5]->offset;
	f->images_size = found[5]->size;
	if (nsec > 6 && found[6]->size) {
		if (found[6]->size != sizeof(struct htr_disk_thread))
			return corrupt(f, "more than one thread record");
		f->thread = (const struct htr_disk_thread *)
			    (f->map + found[6]->offset);
		if (f->thread->flags & ~(uint32_t) (HTR_THREAD_NS |
						    HTR_THREAD_WALL) ||
		    f->thread->time_shift > 63 ||
		    f->thread->comm[sizeof(f->thread->comm) - 1])
			return corrupt(f, "bad thread record");
	}

	/* Counts. */
	if (h->nblocks != f->nblocks)
		return htr_err__set(&f->err, HTR_ERR_CORRUPT,
			"%s: header says %llu blocks, the section holds %llu",
			f->path, U64(h->nblocks), U64(f->nblocks));
	if (f->nblocks > HTR_MAX_BLOCKS)
		return corrupt(f, "too many blocks");
	if (h->ninsns > HTR_MAX_ID + 1)
		return corrupt(f, "instruction count exceeds 48 bits");
	if (f->nfuncs > HTR_FUNC_NONE)
		return corrupt(f, "too many functions");
	if (f->nblocks == 0) {
		if (h->first_root != HTR_NONE || h->nroots || h->max_depth)
			return corrupt(f, "roots or depth without blocks");
	} else {
		const struct htr_disk_block *lb = &f->blocks[f->nblocks - 1];

		if (h->first_root >= f->nblocks)
			return corrupt(f, "first root out of range");
		if (!h->nroots || h->nroots > f->nblocks)
			return corrupt(f, "bad root count");
		if (!h->max_depth || h->max_depth > f->nblocks)
			return corrupt(f, "bad maximum depth");
		/* Post-order: the last block is the last root. */
		if (lb->parent != HTR_NONE || lb->next_sibling != HTR_NONE)
			return corrupt(f, "last block is not the last root");
		if (htr_disk__get48(lb->last) >= h->ninsns)
			return corrupt(f, "last block ends past the instructions");
	}

	/* The small sections: sorted, in range. */
	for (k = 0; k < f->ngaps; k++) {
		const struct htr_disk_gap *g = &f->gaps[k];

		if (g->id > h->ninsns || (k && g->id < g[-1].id))
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: gap %llu: ID out of order or range",
				f->path, U64(k));
		if (g->kind < HTR_GAP_DISABLED || g->kind > HTR_GAP_ERROR)
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: gap %llu: unknown kind %d", f->path,
				U64(k), (int) g->kind);
	}
	for (k = 0; k < f->ntsc; k++) {
		if (f->tsc[k].id > h->ninsns ||
		    (k && f->tsc[k].id < f->tsc[k - 1].id))
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: tsc %llu: ID out of order or range",
				f->path, U64(k));
		if (k % CHECK_WINDOW == CHECK_WINDOW - 1 || k + 1 == f->ntsc)
			checked(f, f->tsc, sizeof(*f->tsc), k);
	}
	for (k = 0; k < f->nsync; k++) {
		if (f->sync[k].id > h->ninsns ||
		    (k && f->sync[k].offset < f->sync[k - 1].offset))
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: sync %llu: out of order or range",
				f->path, U64(k));
		if (k % CHECK_WINDOW == CHECK_WINDOW - 1 || k + 1 == f->nsync)
			checked(f, f->sync, sizeof(*f->sync), k);
	}
	for (k = 0; k < f->images_size;) {
		uint64_t n = image_rec_size(f->images + k,
					    f->images_size - k);

		if (!n)
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: image %llu: record overruns its section",
				f->path, U64(f->nimages));
		k += n;
		f->nimages++;
	}
	if (htr_hash__bytes(HTR_HASH_SEED, f->images, f->images_size) !=
	    h->image_hash)
		return corrupt(f, "image list checksum mismatch");
	return 0;
}

static int validate(struct htr_file *f, int verify_body)
{
	struct htr_disk_header h;
	uint64_t size = f->map_size, table_end, hash;

	if (size < 8) {
		if (memcmp(f->map, HTR_MAGIC, (size_t) size) == 0)
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: truncated (%llu bytes)", f->path,
				U64(size));
		return htr_err__set(&f->err, HTR_ERR_FORMAT,
				    "%s: not an htr file (no magic)", f->path);
	}
	if (memcmp(f->map, HTR_MAGIC, 8) != 0)
		return htr_err__set(&f->err, HTR_ERR_FORMAT,
				    "%s: not an htr file (bad magic)", f->path);
	if (size < sizeof(h))
		memset(&h, 0, sizeof(h));
	memcpy(&h, f->map, size < sizeof(h) ? (size_t) size : sizeof(h));
	if (size >= 16) {
		if (h.endian == 0x04030201u)
			return htr_err__set(&f->err, HTR_ERR_FORMAT,
				"%s: written on a machine of the other "
				"endianness", f->path);
		if (h.endian != HTR_ENDIAN_TAG)
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: bad endianness tag 0x%08x", f->path,
				(unsigned) h.endian);
		if (h.version < HTR_FORMAT_VERSION_MIN ||
		    h.version > HTR_FORMAT_VERSION)
			return htr_err__set(&f->err, HTR_ERR_VERSION,
				"%s: format version %u, this libhtr reads %u "
				"to %u", f->path, (unsigned) h.version,
				(unsigned) HTR_FORMAT_VERSION_MIN,
				(unsigned) HTR_FORMAT_VERSION);
	}
	if (size < sizeof(h))
		return htr_err__set(&f->err, HTR_ERR_CORRUPT,
			"%s: truncated header (%llu bytes)", f->path,
			U64(size));
	if (h.header_size != sizeof(h))
		return corrupt(f, "bad header size");
	if (!h.nsections || h.nsections > HTR_MAX_SECTIONS)
		return corrupt(f, "bad section count");
	if (h.section_table < sizeof(h) || h.section_table % 8 ||
	    h.section_table > UINT64_MAX - HTR_MAX_SECTIONS *
				       sizeof(struct htr_disk_section))
		return corrupt(f, "bad section table offset");
	table_end = h.section_table +
		    (uint64_t) h.nsections * sizeof(struct htr_disk_section);
	if (table_end > size) {
		if (h.file_size > size)
			return htr_err__set(&f->err, HTR_ERR_CORRUPT,
				"%s: truncated (%llu of %llu bytes)", f->path,
				U64(size), U64(h.file_size));
		return corrupt(f, "section table outside the file");
	}
	if (h.body_start != table_end)
		return corrupt(f, "body does not start after the section table");
	hash = h.header_hash;
	h.header_hash = 0;
	if (htr_hash__bytes(htr_hash__bytes(HTR_HASH_SEED, &h, sizeof(h)),
			    f->map + h.section_table,
			    table_end - h.section_table) != hash)
		return corrupt(f, "header checksum mismatch");
	h.header_hash = hash;
	if (h.file_size > size)
		return htr_err__set(&f->err, HTR_ERR_CORRUPT,
			"%s: truncated (%llu of %llu bytes)", f->path,
			U64(size), U64(h.file_size));
	if (h.file_size < size)
		return htr_err__set(&f->err, HTR_ERR_CORRUPT,
			"%s: %llu trailing bytes after the end", f->path,
			U64(size - h.file_size));
	f->hdr = (const struct htr_disk_header *) f->map;
	if (check_sections(f, f->hdr))
		return f->err.code;
	if (verify_body &&
	    htr_hash__body(f->map, h.body_start, h.file_size, h.version,
			   let_go, f) != h.body_hash)
		return corrupt(f, "body checksum mismatch");
	return 0;
}

static int finish_open(struct htr_file *f, const struct htr_open_opts *o);

int htr_file_open(struct htr_file **out, const char *path,
		  const struct htr_open_opts *opts)
{
	struct htr_file *f;
	struct htr_open_opts o;
	struct stat st;
	int fd, rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return HTR_ERR_NOMEM;
	*out = f;
	if (!path)
		return htr_err__set(&f->err, HTR_ERR_INVALID, "no path given");
	f->path = strdup(path);
	if (!f->path)
		return htr_err__set(&f->err, HTR_ERR_NOMEM,
				    "out of memory");
	if (htr_abi__in(&o, sizeof(o), opts, htr_abi__size_of(opts),
			OPEN_OPTS_SIZE0) < 0)
		return htr_err__set(&f->err, HTR_ERR_INVALID,
			"%s: bad open options size %zu", path,
			htr_abi__size_of(opts));

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return htr_err__sys(&f->err, "%s: open", path);
	if (fstat(fd, &st) < 0) {
		rc = htr_err__sys(&f->err, "%s: stat", path);
		close(fd);
		return rc;
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		errno = EISDIR;
		return htr_err__sys(&f->err, "%s: open", path);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return htr_err__set(&f->err, HTR_ERR_FORMAT,
				    "%s: not a regular file", path);
	}
	if (st.st_size == 0) {
		close(fd);
		return htr_err__set(&f->err, HTR_ERR_FORMAT,
				    "%s: empty file, not an htr file", path);
	}
	if ((uint64_t) st.st_size > SIZE_MAX) {
		close(fd);
		return htr_err__set(&f->err, HTR_ERR_LIMIT,
				    "%s: too large to map", path);
	}
	f->map_size = (size_t) st.st_size;
	f->map = mmap(NULL, f->map_size, PROT_READ, MAP_SHARED, fd, 0);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		rc = htr_err__sys(&f->err, "%s: mmap", path);
		close(fd);
		return rc;
	}
	close(fd);

	return finish_open(f, &o);
}

int htr_file_open_buffer(struct htr_file **out, const void *data,
			 size_t size, const struct htr_open_opts *opts)
{
	struct htr_file *f;
	struct htr_open_opts o;

	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return HTR_ERR_NOMEM;
	*out = f;
	f->borrowed = true;
	f->path = strdup("(memory)");
	if (!f->path)
		return htr_err__set(&f->err, HTR_ERR_NOMEM, "out of memory");
	if (htr_abi__in(&o, sizeof(o), opts, htr_abi__size_of(opts),
			OPEN_OPTS_SIZE0) < 0)
		return htr_err__set(&f->err, HTR_ERR_INVALID,
			"%s: bad open options size %zu", f->path,
			htr_abi__size_of(opts));
	if (!data)
		return htr_err__set(&f->err, HTR_ERR_INVALID, "no buffer given");
	/* Records are read in place, as from a mapping. */
	if ((uintptr_t) data % 8)
		return htr_err__set(&f->err, HTR_ERR_INVALID, "%s: the buffer "
				    "is not 8-byte aligned", f->path);
	if (!size)
		return htr_err__set(&f->err, HTR_ERR_FORMAT, "%s: empty "
				    "buffer, not an htr file", f->path);
	f->map = data;
	f->map_size = size;
	return finish_open(f, &o);
}

/* Validate the mapped or borrowed bytes of @f. */
static int finish_open(struct htr_file *f, const struct htr_open_opts *o)
{
	int rc = validate(f, o->verify_body);

	if (rc) {
		f->hdr = NULL;
		f->blocks = NULL;
		f->nblocks = f->nfuncs = f->ngaps = f->ntsc = f->nsync = 0;
		f->images_size = f->nimages = 0;
		f->thread = NULL;
		return rc;
	}
	f->ok = true;
	htr_err__clear(&f->err);
	return 0;
}

void htr_file_close(struct htr_file *file)
{
	if (!file)
		return;
	if (file->map && !file->borrowed)
		munmap((void *) file->map, file->map_size);
	free(file->path);
	free(file);
}

const char *htr_file_last_error(const struct htr_file *file)
{
	return file ? file->err.msg : "";
}

const char *htr_last_error(const struct htr_file *file)
{
	return htr_file_last_error(file);
}

int htr_file_info(const struct htr_file *file, struct htr_file_info *info,
		  size_t size)
{
	struct htr_file_info fi;
	const struct htr_disk_header *h;

	if (!file || !file->ok)
		return HTR_ERR_INVALID;
	h = file->hdr;
	memset(&fi, 0, sizeof(fi));
	fi.size = sizeof(fi);
	fi.version = h->version;
	fi.file_size = h->file_size;
	fi.ninsns = h->ninsns;
	fi.nblocks = h->nblocks;
	fi.nroots = h->nroots;
	fi.nfuncs = file->nfuncs;
	fi.ngaps = file->ngaps;
	fi.ntsc = file->ntsc;
	fi.nsync = file->nsync;
	fi.nimages = file->nimages;
	fi.max_depth = h->max_depth;
	fi.trace_size = h->trace_size;
	fi.trace_hash = h->trace_hash;
	fi.image_hash = h->image_hash;
	fi.body_hash = h->body_hash;
	memcpy(fi.libipt_version, h->libipt_version,
	       sizeof(fi.libipt_version));
	fi.build_time = h->build_time;
	return htr_abi__out(info, size, &fi, sizeof(fi), FILE_INFO_SIZE0);
}

uint64_t htr_gap_count(const struct htr_file *file)
{
	return file && file->ok ? file->ngaps : 0;
}

int htr_gap_get(const struct htr_file *file, uint64_t i,
		struct htr_gap_info *info, size_t size)
{
	struct htr_gap_info gi;
	const struct htr_disk_gap *g;

	if (!file || !file->ok || !info || size < GAP_INFO_SIZE0)
		return HTR_ERR_INVALID;
	if (i >= file->ngaps)
		return HTR_ERR_RANGE;
	g = &file->gaps[i];
	memset(&gi, 0, sizeof(gi));
	gi.size = sizeof(gi);
	gi.id = g->id;
	gi.offset = g->offset;
	gi.kind = (enum htr_gap_kind) g->kind;
	gi.code = g->code;
	return htr_abi__out(info, size, &gi, sizeof(gi), GAP_INFO_SIZE0);
}

const char *htr_gap_kind_str(enum htr_gap_kind kind)
{
	switch (kind) {
	case HTR_GAP_DISABLED: return "disabled";
	case HTR_GAP_OVERFLOW: return "overflow";
	case HTR_GAP_ERROR:    return "error";
	}
	return "unknown";
}

const char *htr_gap_reason(const struct htr_gap_info *gap)
{
	if (!gap)
		return "unknown";
	switch (gap->kind) {
	case HTR_GAP_DISABLED:
		if (gap->code == HTR_GAP_CODE_KERNEL)
			return "[kernel]: the kernel ran (its code was not "
			       "at hand)";
		return "tracing was disabled (filtered or untraced code, a "
		       "syscall, an interrupt)";
	case HTR_GAP_OVERFLOW:
		return "the processor's trace buffer overflowed";
	case HTR_GAP_ERROR:
		if (gap->code == HTR_GAP_CODE_RUNAWAY)
			return "runaway: no trace consumed round a loop "
			       "or for 2^22 instructions (the image does "
			       "not match the recording)";
		if (gap->code < 0)
			return pt_errstr(pt_errcode(gap->code));
		return "decode error";
	}
	return "unknown";
}

const char *htr_file_path(const struct htr_file *file)
{
	return file && file->ok && !file->borrowed ? file->path : NULL;
}

uint64_t htr_image_count(const struct htr_file *file)
{
	return file && file->ok ? file->nimages : 0;
}

int htr_image_get(const struct htr_file *file, uint64_t i,
		  struct htr_image_info *info, size_t size)
{
	struct htr_image_info ii;
	struct htr_file_image im;
	uint64_t pos = 0, k;

	if (!file || !file->ok || !info || size < IMAGE_INFO_SIZE0)
		return HTR_ERR_INVALID;
	if (i >= file->nimages)
		return HTR_ERR_RANGE;
	for (k = 0; k <= i; k++)
		if (htr_file__image_next(file, &pos, &im) < 0)
			return HTR_ERR_CORRUPT;
	memset(&ii, 0, sizeof(ii));
	ii.path = im.path;
	ii.path_len = im.path_len;
	ii.vaddr = im.rec->vaddr;
	ii.offset = im.rec->offset;
	ii.bytes = im.rec->size;
	ii.kind = im.rec->kind;
	return htr_abi__out(info, size, &ii, sizeof(ii), IMAGE_INFO_SIZE0);
}

uint64_t htr_sync_count(const struct htr_file *file)
{
	return file && file->ok ? file->nsync : 0;
}

int htr_sync_get(const struct htr_file *file, uint64_t i,
		 struct htr_sync_info *info, size_t size)
{
	struct htr_sync_info si;

	if (!file || !file->ok || !info || size < SYNC_INFO_SIZE0)
		return HTR_ERR_INVALID;
	if (i >= file->nsync)
		return HTR_ERR_RANGE;
	memset(&si, 0, sizeof(si));
	si.offset = file->sync[i].offset;
	si.id = file->sync[i].id;
	return htr_abi__out(info, size, &si, sizeof(si), SYNC_INFO_SIZE0);
}

int htr_file_thread(const struct htr_file *file, struct htr_thread_info *info,
		    size_t size)
{
	struct htr_thread_info ti;
	const struct htr_disk_thread *t;

	if (!file || !file->ok || !info || size < THREAD_INFO_SIZE0)
		return HTR_ERR_INVALID;
	t = file->thread;
	if (!t)
		return HTR_ERR_NOTFOUND;
	memset(&ti, 0, sizeof(ti));
	ti.size = sizeof(ti);
	ti.pid = t->pid;
	ti.tid = t->tid;
	memcpy(ti.comm, t->comm, sizeof(ti.comm));
	ti.flags = t->flags;
	ti.time_shift = t->time_shift;
	ti.time_mult = t->time_mult;
	ti.time_zero = t->time_zero;
	ti.wall_ns = t->wall_ns;
	ti.clock_ns = t->clock_ns;
	return htr_abi__out(info, size, &ti, sizeof(ti), THREAD_INFO_SIZE0);
}

__extension__ typedef unsigned __int128 u128;

/* perf's tsc_to_perf_time() in 128 bits, saturating at 2^64 - 1. */
static int convert(const struct htr_file *file, uint64_t tsc, bool zero,
		   uint64_t *ns)
{
	const struct htr_disk_thread *t;
	u128 v;
	uint64_t mask;

	if (!file || !file->ok || !ns)
		return HTR_ERR_INVALID;
	t = file->thread;
	if (!t || !(t->flags & HTR_THREAD_NS))
		return HTR_ERR_NOTFOUND;
	mask = t->time_shift ? (1ull << t->time_shift) - 1 : 0;
	v = (u128) (tsc >> t->time_shift) * t->time_mult +
	    (((u128) (tsc & mask) * t->time_mult) >>
	     t->time_shift);
	if (zero)
		v += t->time_zero;
	*ns = v > UINT64_MAX ? UINT64_MAX : (uint64_t) v;
	return 0;
}

int htr_tsc_to_ns(const struct htr_file *file, uint64_t tsc, uint64_t *ns)
{
	return convert(file, tsc, true, ns);
}

int htr_ticks_to_ns(const struct htr_file *file, uint64_t ticks,
		    uint64_t *ns)
{
	return convert(file, ticks, false, ns);
}

/*
 * Source lines (see srcline.h).
 *
 * The image records are grouped into modules by path, as symbols.c does;
 * each record is an address range.  A module's file is opened when an
 * address first falls in one of its ranges, and only used if every record
 * still matches a PT_LOAD (same file offset and size): that gives each
 * range its bias, and a file changed since the build gives no lines
 * rather than wrong ones.  Without DWARF of its own, the separate debug file
 * with the same build-id is read.
 *
 * Every libdw call may fail on damaged DWARF; a failure only drops the
 * part of the answer it would have given.
 */
#include "srcline.h"
#include "htr/names.h"

#include "file.h"
#include "elffile.h"
#include "symbols.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HTR_HAVE_LIBDW

int htr_srclines__supported(void)
{
	return 0;
}

int htr_srclines__open(struct htr_srclines **out, const struct htr_file *file,
		       struct htr_err *err)
{
	(void) file;
	if (out)
		*out = NULL;
	return htr_err__set(err, HTR_ERR_INVALID,
			    "this build has no libdw (meson -Ddwarf=enabled)");
}

void htr_srclines__free(struct htr_srclines *sl)
{
	(void) sl;
}

const char *htr_srclines__at(struct htr_srclines *sl, uint64_t addr)
{
	(void) sl;
	(void) addr;
	return "";
}

#else

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <libiberty/demangle.h>
#include <unistd.h>

/* Direct-mapped: a dump asks once per block, and most blocks share their
 * function's entry, so a few thousand slots catch nearly every repeat
 * while the memory stays fixed (slots x text). */
#define CACHE_SLOTS 4096       /* 2^12: the hash's top 12 bits */
#define TEXT_MAX 512            /* longer inline chains are cut */
#define FRAMES_MAX 64

struct range {
	uint64_t lo, hi;        /* [lo, hi) */
	uint64_t bias;          /* runtime - file address, once matched */
	const struct htr_disk_image *rec;
	uint32_t mod;
};

struct module {
	const char *path;       /* into the file, NOT NUL-terminated */
	uint32_t path_len;
	int state;              /* 0 not tried, 1 usable, -1 not */
	struct htr_elf ef;      /* fd -1 until opened */
	int dbg_fd;             /* separate debug file, or -1 */
	Elf *dbg_elf;
	Dwarf *dw;
};

struct slot {
	uint64_t addr;
	char *text;             /* NULL: empty slot */
};

struct htr_srclines {
	const struct htr_file *file;
	struct range *ranges;
	size_t nranges;
	struct module *mods;
	size_t nmods;
	struct slot cache[CACHE_SLOTS];
	char buf[TEXT_MAX];
};

int htr_srclines__supported(void)
{
	return 1;
}

void htr_srclines__free(struct htr_srclines *sl)
{
	size_t i;

	if (!sl)
		return;
	for (i = 0; i < sl->nmods; i++) {
		if (sl->mods[i].dw)
			dwarf_end(sl->mods[i].dw);
		if (sl->mods[i].dbg_elf)
			elf_end(sl->mods[i].dbg_elf);
		if (sl->mods[i].dbg_fd >= 0)
			close(sl->mods[i].dbg_fd);
		htr_elf__close(&sl->mods[i].ef);
	}
	for (i = 0; i < CACHE_SLOTS; i++)
		free(sl->cache[i].text);
	free(sl->ranges);
	free(sl->mods);
	free(sl);
}

int htr_srclines__open(struct htr_srclines **out, const struct htr_file *file,
		       struct htr_err *err)
{
	struct htr_srclines *sl;
	struct htr_file_image im;
	uint64_t pos = 0;
	size_t capr = 0, capm = 0, i;

	if (!out || !file)
		return htr_err__set(err, HTR_ERR_INVALID, "no file");
	*out = NULL;
	sl = calloc(1, sizeof(*sl));
	if (!sl)
		goto nomem;
	sl->file = file;
	while (htr_file__image_next(file, &pos, &im) == 0) {
		struct range *r;

		if (im.rec->kind != 1 || !im.rec->size ||
		    im.rec->vaddr + im.rec->size < im.rec->vaddr)
			continue;       /* raw bytes have no DWARF */
		for (i = 0; i < sl->nmods; i++)
			if (sl->mods[i].path_len == im.path_len &&
			    !memcmp(sl->mods[i].path, im.path, im.path_len))
				break;
		if (i == sl->nmods) {
			if (sl->nmods == capm) {
				size_t n = capm ? 2 * capm : 8;
				void *p = realloc(sl->mods, n * sizeof(*sl->mods));

				if (!p)
					goto nomem;
				sl->mods = p;
				capm = n;
			}
			memset(&sl->mods[i], 0, sizeof(sl->mods[i]));
			sl->mods[i].path = im.path;
			sl->mods[i].path_len = im.path_len;
			sl->mods[i].ef.fd = -1;
			sl->mods[i].dbg_fd = -1;
			sl->nmods++;
		}
		if (sl->nranges == capr) {
			size_t n = capr ? 2 * capr : 16;
			void *p = realloc(sl->ranges, n * sizeof(*sl->ranges));

			if (!p)
				goto nomem;
			sl->ranges = p;
			capr = n;
		}
		r = &sl->ranges[sl->nranges++];
		r->lo = im.rec->vaddr;
		r->hi = im.rec->vaddr + im.rec->size;
		r->bias = 0;
		r->rec = im.rec;
		r->mod = (uint32_t) i;
	}
	*out = sl;
	return 0;
nomem:
	htr_srclines__free(sl);
	return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
}

/* The DWARF of @mod's separate debug file, or NULL. */
static Dwarf *debug_file(struct module *mod)
{
	mod->dbg_elf = htr_elf__debug_file(mod->ef.elf, &mod->dbg_fd);
	return mod->dbg_elf ? dwarf_begin_elf(mod->dbg_elf, DWARF_C_READ, NULL)
			    : NULL;
}

/* Open module @m's file and its DWARF; 0 if it cannot be used. */
static int module_open(struct htr_srclines *sl, uint32_t m)
{
	struct module *mod = &sl->mods[m];
	int rc;
	size_t nph, i, j;
	char *path;

	if (mod->state)
		return mod->state > 0;
	mod->state = -1;
	path = strndup(mod->path, mod->path_len);
	if (!path || strlen(path) != mod->path_len) {
		free(path);
		return 0;
	}
	rc = htr_elf__open(&mod->ef, path, sl->file->path, 0, NULL);
	free(path);
	if (rc < 0 || elf_getphdrnum(mod->ef.elf, &nph) != 0)
		return 0;
	for (j = 0; j < sl->nranges; j++) {
		struct range *r = &sl->ranges[j];
		GElf_Phdr ph;

		if (r->mod != m)
			continue;
		for (i = 0; i < nph; i++)
			if (gelf_getphdr(mod->ef.elf, (int) i, &ph) &&
			    ph.p_type == PT_LOAD &&
			    ph.p_offset == r->rec->offset &&
			    ph.p_filesz == r->rec->size)
				break;
		if (i == nph)
			return 0;
		r->bias = r->lo - ph.p_vaddr;   /* modular */
	}
	mod->dw = dwarf_begin_elf(mod->ef.elf, DWARF_C_READ, NULL);
	if (!mod->dw)
		mod->dw = debug_file(mod);
	if (!mod->dw)
		return 0;
	mod->state = 1;
	return 1;
}

/* The compile unit holding file address @pc.  dwarf_addrdie needs
 * .debug_aranges (or a libdw that builds it); without, the units' own
 * ranges are searched. */
static int cu_of(Dwarf *dw, Dwarf_Addr pc, Dwarf_Die *cu)
{
	Dwarf_Off off = 0, next;
	size_t hsize;

	if (dwarf_addrdie(dw, pc, cu))
		return 1;
	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		if (dwarf_offdie(dw, off + hsize, cu) && dwarf_haspc(cu, pc) > 0)
			return 1;
		off = next;
	}
	return 0;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* Append to @sl->buf at *@n, cut at TEXT_MAX (the NUL always fits). */
static void put(struct htr_srclines *sl, size_t *n, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;
static void put(struct htr_srclines *sl, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*n >= TEXT_MAX - 1)
		return;
	va_start(ap, fmt);
	k = vsnprintf(sl->buf + *n, TEXT_MAX - *n, fmt, ap);
	va_end(ap);
	if (k > 0)
		*n += (size_t) k < TEXT_MAX - *n ? (size_t) k : TEXT_MAX - 1 - *n;
}

/* A frame's function name: demangled linkage name (what addr2line -C
 * prints), else the plain name, through DW_AT_abstract_origin and
 * DW_AT_specification. */
static void put_name(struct htr_srclines *sl, size_t *n, Dwarf_Die *die)
{
	Dwarf_Attribute at;
	const char *name = NULL;
	char *dm = NULL;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &at) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at)) {
		name = dwarf_formstring(&at);
		if (name && name[0] == '_' && name[1] == 'Z')
			dm = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
		if (dm)
			name = dm;
	}
	if (!name && dwarf_attr_integrate(die, DW_AT_name, &at))
		name = dwarf_formstring(&at);
	put(sl, n, "%s", name && *name ? name : "??");
	free(dm);
}

/* " at FILE:LINE", the call site of inlined subroutine @die. */
static void put_call_site(struct htr_srclines *sl, size_t *n, Dwarf_Die *die)
{
	Dwarf_Attribute at;
	Dwarf_Word fidx = 0, line = 0;
	Dwarf_Files *files;
	Dwarf_Die cu;
	size_t nfiles;
	const char *f = NULL;

	if (dwarf_attr(die, DW_AT_call_file, &at))
		dwarf_formudata(&at, &fidx);
	if (dwarf_attr(die, DW_AT_call_line, &at))
		dwarf_formudata(&at, &line);
	if (dwarf_diecu(die, &cu, NULL, NULL) &&
	    dwarf_getsrcfiles(&cu, &files, &nfiles) == 0 && fidx < nfiles)
		f = dwarf_filesrc(files, fidx, NULL, NULL);
	put(sl, n, " at %s:", f ? base_name(f) : "??");
	if (line)
		put(sl, n, "%llu", (unsigned long long) line);
	else
		put(sl, n, "?");
}

/* The text for file address @pc of @dw into @sl->buf. */
static void locate(struct htr_srclines *sl, Dwarf *dw, Dwarf_Addr pc)
{
	Dwarf_Die cu, *scopes = NULL, *chain = NULL, *fr[FRAMES_MAX];
	Dwarf_Line *row;
	size_t n = 0;
	int ns, nf = 0, i, inlined = 0;

	sl->buf[0] = 0;
	if (!cu_of(dw, pc, &cu))
		return;
	row = dwarf_getsrc_die(&cu, pc);
	if (row) {
		const char *f = dwarf_linesrc(row, NULL, NULL);
		int line = 0;

		/* Line 0: compiler-made code of no line; addr2line says
		 * FILE:? and so nothing is placed. */
		if (f && dwarf_lineno(row, &line) == 0 && line > 0)
			put(sl, &n, "at %s:%d", base_name(f), line);
	}
	/* dwarf_getscopes goes from an inlined subroutine into its abstract
	 * definition, not to its caller: it finds the innermost one, and
	 * dwarf_getscopes_die the DIEs around that, the callers' side. */
	ns = dwarf_getscopes(&cu, pc, &scopes);
	for (i = 0; i < ns; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_subprogram)
			break;
		if (tag != DW_TAG_inlined_subroutine)
			continue;
		ns = dwarf_getscopes_die(&scopes[i], &chain);
		break;
	}
	for (i = 0; chain && i < ns && nf < FRAMES_MAX; i++) {
		int tag = dwarf_tag(&chain[i]);

		if (tag == DW_TAG_inlined_subroutine) {
			fr[nf++] = &chain[i];
			inlined = 1;
		} else if (tag == DW_TAG_subprogram) {
			fr[nf++] = &chain[i];
			break;
		}
	}
	if (inlined) {
		put(sl, &n, "%s[inlined: ", n ? " " : "");
		for (i = 0; i < nf; i++) {
			if (i)
				put(sl, &n, " <- ");
			put_name(sl, &n, fr[i]);
			if (i)
				put_call_site(sl, &n, fr[i - 1]);
		}
		put(sl, &n, "]");
	}
	free(chain);
	free(scopes);
}

/* The range holding @addr, or NULL.  Few ranges (a handful per module):
 * a linear search. */
static const struct range *find_range(const struct htr_srclines *sl,
				      uint64_t addr)
{
	size_t i;

	for (i = 0; i < sl->nranges; i++)
		if (addr >= sl->ranges[i].lo && addr < sl->ranges[i].hi)
			return &sl->ranges[i];
	return NULL;
}

const char *htr_srclines__at(struct htr_srclines *sl, uint64_t addr)
{
	const struct range *r;
	struct slot *s;
	uint64_t h;

	if (!sl)
		return "";
	h = addr * 0x9e3779b97f4a7c15ull;
	s = &sl->cache[h >> 52];            /* 12 bits: CACHE_SLOTS */
	if (s->text && s->addr == addr)
		return s->text;
	sl->buf[0] = 0;
	r = find_range(sl, addr);
	if (r && module_open(sl, r->mod))
		locate(sl, sl->mods[r->mod].dw, addr - r->bias);
	free(s->text);
	s->text = strdup(sl->buf);
	s->addr = addr;
	/* Out of memory the answer is still right, only not kept. */
	return s->text ? s->text : sl->buf;
}

#endif

/* The public API (htr/names.h). */
int htr_srclines_supported(void)
{
	return htr_srclines__supported();
}

int htr_srclines_open(struct htr_srclines **out, const struct htr_file *file)
{
	return htr_srclines__open(out, file, NULL);
}

void htr_srclines_free(struct htr_srclines *sl)
{
	htr_srclines__free(sl);
}

const char *htr_srclines_at(struct htr_srclines *sl, uint64_t addr)
{
	return sl ? htr_srclines__at(sl, addr) : "";
}

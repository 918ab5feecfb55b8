/*
 * Symbols (see symbols.h).
 *
 * Load: the image records are grouped into modules by path.  Every module
 * has a name (the path's base name), a lowest address and one address
 * range per record.  An ELF module's file is opened once; each of its
 * records must still match a PT_LOAD (same file offset and size), which
 * gives that record's bias.  The function symbols of .symtab (or .dynsym
 * without one) that lie inside a matched segment are relocated by its
 * bias, demangled into one string pool, then all modules' symbols are
 * sorted by address with one entry per address.  Built with libdw, the
 * functions the file's DWARF describes are added too, after every ELF
 * symbol (a name for static functions a stripped .symtab lost), and a
 * file without .symtab takes both from its separate debug file.  Labels
 * in code outside every function (the loader's _start) and PLT stubs
 * ("puts@plt") name their code too.
 *
 * Everything read from an ELF file is checked before it is indexed:
 * libelf bounds the sections and symbol indices, the string offsets and
 * their NUL terminators are checked here.
 */
#include "symbols.h"
#include "elffile.h"
#include "htr/names.h"

#include "file.h"
#include "le.h"

#ifdef HTR_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#endif
#include <gelf.h>
#include <libelf.h>
#include <libiberty/demangle.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <Zydis/Zydis.h>

#define U64(x) ((unsigned long long) (x))

struct sym {
	uint64_t addr;
	uint64_t size;          /* 0: up to the next symbol of the module */
	uint32_t name;          /* pool offset */
	uint32_t mod;
	uint32_t rank;          /* 0 global, 1 weak, 2 local: lower wins */
	uint32_t stub;          /* a PLT stub: pool offset of "NAME@plt",
				 * which names its inside; else UINT32_MAX */
	uint32_t stub_mod;      /* the stub's module (@mod: its target's) */
	uint64_t next;          /* where entering it always leads (its PLT
				 * target, a tail jump its first straight-line
				 * instructions end in); 0: nowhere known */
};

struct range {
	uint64_t lo, hi;        /* [lo, hi) */
	uint64_t base;          /* address - base: the module's own address
				 * ("MODULE+0xOFFSET") */
	uint32_t mod;
	uint32_t kind;          /* of the image record */
};

struct module {
	const char *path;       /* load only: into @file, NOT NUL-terminated */
	uint32_t path_len;
	uint32_t name;          /* pool offset of the base name */
	uint64_t lowest;
	int elf;                /* has ELF records */
	int exe;                /* load only: an executable (PT_INTERP or
				 * ET_EXEC), searched first by bindings */
};

/* Load only: a PLT stub, and a function a module exports (strings:
 * offsets into the loader's tpool, UINT32_MAX for none). */
struct stub {
	uint64_t addr, size;    /* where it was loaded */
	uint32_t mod;
	uint32_t label;         /* objdump's name without "@plt" */
	uint32_t import;        /* the symbol it binds to; none: IRELATIVE */
	uint32_t version;       /* the version the symbol requires */
	uint32_t ifunc;         /* IRELATIVE: the IFUNC at its resolver */
};

struct export {
	uint32_t name, version, mod;
	int hidden;             /* not the default version */
	uint64_t addr;          /* where it was loaded; 0: not traced code */
	const char *sname;      /* the name, once tpool stopped growing */
};

struct htr_syms {
	struct sym *syms;
	size_t nsyms;
	struct sym *alts;       /* the other names of symbols' addresses
				 * (aliases: qsort_r, __qsort_r), by addr */
	size_t nalts;
	struct range *ranges;   /* by lo */
	size_t nranges;
	struct module *mods;
	size_t nmods;
	char *pool;
	size_t pool_len;
};

/* Load-time state. */
struct loader {
	struct htr_syms *s;
	const char *htr_path;   /* the .htr: moved images are looked for
				 * next to it */
	size_t cap_syms, cap_mods, cap_pool, cap_ranges;
	struct stub *stubs;
	size_t nstubs, cap_stubs;
	struct export *exports;
	size_t nexports, cap_exports;
	char *tpool;            /* the stubs' and exports' strings */
	size_t tpool_len, cap_tpool;
	char *interp;           /* base name of an executable's PT_INTERP */
	unsigned nskipped;
	struct htr_err *err;
};

static int grow(void **p, size_t *cap, size_t need, size_t elsize)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2 / elsize)
			return HTR_ERR_NOMEM;
		n *= 2;
	}
	q = realloc(*p, n * elsize);
	if (!q)
		return HTR_ERR_NOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* Append @len bytes of @str and a NUL to the pool; *@off gets the offset. */
static int pool_add(struct loader *ld, const char *str, size_t len,
		    uint32_t *off)
{
	struct htr_syms *s = ld->s;

	if (len > UINT32_MAX - 1 || s->pool_len > UINT32_MAX - 1 - len)
		return HTR_ERR_NOMEM;
	if (grow((void **) &s->pool, &ld->cap_pool, s->pool_len + len + 1, 1))
		return HTR_ERR_NOMEM;
	memcpy(s->pool + s->pool_len, str, len);
	s->pool[s->pool_len + len] = 0;
	*off = (uint32_t) s->pool_len;
	s->pool_len += len + 1;
	return 0;
}

static int nomem(struct loader *ld)
{
	return htr_err__set(ld->err, HTR_ERR_NOMEM, "out of memory");
}

/* Count a skipped module; the first one's reason goes to @err. */
static void skip(struct loader *ld, const char *path, const char *why)
{
	if (!ld->nskipped++)
		htr_err__set(ld->err, HTR_ERR_IO, "%s: %s; no symbols", path,
			     why);
}

/* The module with @path, created if new. */
static int module_get(struct loader *ld, const struct htr_file_image *im,
		      uint32_t *out)
{
	struct htr_syms *s = ld->s;
	struct module *m;
	const char *base;
	size_t i, len;

	for (i = 0; i < s->nmods; i++) {
		m = &s->mods[i];
		if (m->path_len == im->path_len &&
		    !memcmp(m->path, im->path, im->path_len)) {
			*out = (uint32_t) i;
			return 0;
		}
	}
	if (s->nmods >= UINT32_MAX ||
	    grow((void **) &s->mods, &ld->cap_mods, s->nmods + 1,
		 sizeof(*m)))
		return HTR_ERR_NOMEM;
	m = &s->mods[s->nmods];
	memset(m, 0, sizeof(*m));
	m->path = im->path;
	m->path_len = im->path_len;
	m->lowest = UINT64_MAX;
	/* The base name; a path ending in '/' keeps its whole text. */
	base = im->path;
	len = im->path_len;
	for (i = im->path_len; i > 0; i--) {
		if (im->path[i - 1] == '/') {
			if (i < im->path_len) {
				base = im->path + i;
				len = im->path_len - i;
			}
			break;
		}
	}
	if (memchr(base, 0, len))
		len = strlen(base);
	if (pool_add(ld, base, len, &m->name))
		return HTR_ERR_NOMEM;
	*out = (uint32_t) s->nmods++;
	return 0;
}

static uint32_t bind_rank(unsigned bind)
{
	switch (bind) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return 0;
	case STB_WEAK:
		return 1;
	case STB_LOCAL:
		return 2;
	default:
		return 3;
	}
}

/* Section @type's first instance, or NULL. */
static Elf_Scn *find_section(Elf *elf, Elf64_Word type, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, sh) && sh->sh_type == type)
			return scn;
	return NULL;
}

/* @elf's symbol table of @type (*@scnp, its *@data), the strings it
 * names (*@strdata) and its entry count; 0 if it has none usable. */
static size_t table_of(Elf *elf, Elf64_Word type, Elf_Scn **scnp,
		       Elf_Data **data, Elf_Data **strdata)
{
	Elf_Scn *scn, *strscn;
	GElf_Shdr sh, strsh;
	size_t n, shnum;

	*scnp = scn = find_section(elf, type, &sh);
	if (!scn || elf_getshdrnum(elf, &shnum) != 0 || sh.sh_link == 0 ||
	    sh.sh_link >= shnum)
		return 0;
	strscn = elf_getscn(elf, sh.sh_link);
	if (!strscn || !gelf_getshdr(strscn, &strsh) ||
	    strsh.sh_type != SHT_STRTAB)
		return 0;
	*data = elf_getdata(scn, NULL);
	*strdata = elf_getdata(strscn, NULL);
	if (!*data || !(*data)->d_buf || !*strdata || !(*strdata)->d_buf ||
	    !(*strdata)->d_size)
		return 0;
	n = (*data)->d_size / sizeof(Elf64_Sym);
	if (gelf_getclass(elf) == ELFCLASS32)
		n = (*data)->d_size / sizeof(Elf32_Sym);
	return n > INT_MAX ? INT_MAX : n;      /* gelf_getsym takes an int */
}

/* @elf's .symtab (or, without one, .dynsym), as table_of(). */
static size_t sym_table(Elf *elf, Elf_Data **data, Elf_Data **strdata)
{
	Elf_Scn *scn;
	size_t n = table_of(elf, SHT_SYMTAB, &scn, data, strdata);

	return n || scn ? n : table_of(elf, SHT_DYNSYM, &scn, data, strdata);
}

/* The name of @sym in @strdata, or NULL if it has none or it is not in
 * bounds. */
static const char *sym_name(const GElf_Sym *sym, const Elf_Data *strdata)
{
	const char *str = strdata->d_buf;

	if (sym->st_name >= strdata->d_size ||
	    !memchr(str + sym->st_name, 0, strdata->d_size - sym->st_name) ||
	    !str[sym->st_name])
		return NULL;
	return str + sym->st_name;
}

long htr_syms__elf_funcs(Elf *elf, struct htr_elf_func **out)
{
	Elf_Data *data = NULL, *strdata = NULL;
	struct htr_elf_func *c = NULL;
	size_t n, i, nc = 0;
	GElf_Sym sym;

	*out = NULL;
	n = sym_table(elf, &data, &strdata);
	if (!n)
		return 0;
	c = malloc(n * sizeof(*c));
	if (!c)
		return HTR_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		const char *name;
		unsigned type;

		if (!gelf_getsym(data, (int) i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    !sym.st_value || sym.st_shndx == SHN_UNDEF ||
		    !(name = sym_name(&sym, strdata)))
			continue;
		c[nc].value = sym.st_value;
		c[nc].size = sym.st_size;
		c[nc].name = name;
		c[nc].rank = bind_rank(GELF_ST_BIND(sym.st_info));
		nc++;
	}
	if (!nc) {
		free(c);
		return 0;
	}
	*out = c;
	return (long) nc;
}

static int cmp_value(const void *a, const void *b)
{
	const struct htr_elf_func *x = a, *y = b;

	return x->value < y->value ? -1 : x->value > y->value;
}

/* Append to *@c (@n functions, sorted here by address) the labels of
 * @elf: untyped symbols in code that no sized function covers, as perf
 * takes them (the loader's _start, where every trace of a program
 * begins).  Returns the new count or HTR_ERR_NOMEM. */
static long code_labels(Elf *elf, struct htr_elf_func **c, long n)
{
	Elf_Data *data = NULL, *strdata = NULL;
	size_t nsym = sym_table(elf, &data, &strdata), i, cap = (size_t) n;
	long nc = n;
	GElf_Sym sym;

	if (n > 1)
		qsort(*c, (size_t) n, sizeof(**c), cmp_value);
	for (i = 0; i < nsym; i++) {
		GElf_Shdr sh;
		Elf_Scn *scn;
		const char *name;
		size_t lo = 0, hi = (size_t) n, k;
		int inside = 0;

		if (!gelf_getsym(data, (int) i, &sym) ||
		    GELF_ST_TYPE(sym.st_info) != STT_NOTYPE || !sym.st_value ||
		    sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE ||
		    !(scn = elf_getscn(elf, sym.st_shndx)) ||
		    !gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) ||
		    !(name = sym_name(&sym, strdata)))
			continue;
		/* The functions starting at or before it: does one cover
		 * it?  (A few may, nested or aliased: look back a little.) */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if ((*c)[mid].value <= sym.st_value)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (k = lo; k-- > 0 && lo - k <= 8 && !inside;)
			inside = sym.st_value - (*c)[k].value < (*c)[k].size;
		if (inside)
			continue;
		if (grow((void **) c, &cap, (size_t) nc + 1, sizeof(**c)))
			return HTR_ERR_NOMEM;
		(*c)[nc].value = sym.st_value;
		(*c)[nc].size = 0;
		(*c)[nc].name = name;
		(*c)[nc].rank = 3;
		nc++;
	}
	return nc;
}

#ifdef HTR_HAVE_LIBDW
#define DWARF_RANK 4u           /* after every ELF symbol */
#define DWARF_MAX_NEST 32       /* namespaces and classes, bounded */

struct dw_funcs {
	struct htr_elf_func *c;
	size_t n, cap;
	int oom;
};

/* A function definition: its name (the linkage name, which demangles to
 * the qualified one, else the plain name; through DW_AT_specification
 * and DW_AT_abstract_origin) and its code's range. */
static void dw_subprogram(struct dw_funcs *f, Dwarf_Die *die)
{
	Dwarf_Attribute at;
	Dwarf_Addr lo, hi;
	const char *name = NULL;

	if (dwarf_lowpc(die, &lo) != 0 || dwarf_highpc(die, &hi) != 0 ||
	    hi <= lo || !lo)
		return;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &at))
		name = dwarf_formstring(&at);
	if (!name && dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at))
		name = dwarf_formstring(&at);
	if (!name && dwarf_attr_integrate(die, DW_AT_name, &at))
		name = dwarf_formstring(&at);
	if (!name || !*name)
		return;
	if (f->n == f->cap) {
		size_t nc = f->cap ? 2 * f->cap : 256;
		struct htr_elf_func *v = realloc(f->c, nc * sizeof(*v));

		if (!v) {
			f->oom = 1;
			return;
		}
		f->c = v;
		f->cap = nc;
	}
	f->c[f->n].value = lo;
	f->c[f->n].size = hi - lo;
	f->c[f->n].name = name;
	f->c[f->n].rank = DWARF_RANK;
	f->n++;
}

/* The definitions among @die's children, into namespaces and classes. */
static void dw_walk(struct dw_funcs *f, Dwarf_Die *die, int nest)
{
	Dwarf_Die child;

	if (nest > DWARF_MAX_NEST || dwarf_child(die, &child) != 0)
		return;
	do {
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
			dw_subprogram(f, &child);
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
			dw_walk(f, &child, nest + 1);
			break;
		default:
			break;
		}
	} while (!f->oom && dwarf_siblingof(&child, &child) == 0);
}

/*
 * Append the functions @elf's DWARF defines to *@c (of @n entries).  Their
 * names point into libdw's data: keep *@dw open while they are used, then
 * dwarf_end() it.  Returns the new count, or HTR_ERR_NOMEM.  A file
 * without DWARF, or with DWARF libdw cannot read, adds nothing.
 */
static long dwarf_funcs(Elf *elf, Dwarf **dw, struct htr_elf_func **c, long n)
{
	struct dw_funcs f = { NULL, 0, 0, 0 };
	Dwarf_Off off = 0, next;
	size_t hsize;
	struct htr_elf_func *v;

	*dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	if (!*dw)
		return n;
	while (!f.oom && dwarf_nextcu(*dw, off, &next, &hsize, NULL, NULL,
				      NULL) == 0) {
		Dwarf_Die cu;

		if (dwarf_offdie(*dw, off + hsize, &cu))
			dw_walk(&f, &cu, 0);
		off = next;
	}
	if (f.oom || (f.n && !(v = realloc(*c, ((size_t) n + f.n) *
						sizeof(*v))))) {
		free(f.c);
		return HTR_ERR_NOMEM;
	}
	if (f.n) {
		memcpy(v + n, f.c, f.n * sizeof(*v));
		*c = v;
	}
	free(f.c);
	return n + (long) f.n;
}
#endif

/*
 * x86-64 PLT stubs.  A call through the PLT enters a stub that jumps on
 * to the function through a GOT slot: each stub of .plt, .plt.sec and
 * .plt.got holds a jmp *GOT(%rip), and the relocation of that slot says
 * where it leads (layout-independent: lazy or -z now, with or without
 * IBT's endbr64 and bnd).  JUMP_SLOT, or GLOB_DAT for .plt.got, names a
 * symbol (and the version it requires): resolve_stubs() binds it to the
 * module that defines it, as the dynamic loader would, and the stub's
 * block is that function's, "libc.so.6!qsort".  IRELATIVE names the
 * IFUNC resolver that picks the code at load time: the stub is named
 * after the IFUNC symbol at the resolver, "libc.so.6!strnlen".  A stub
 * nothing resolves keeps objdump's name in its own module, "NAME@plt"
 * ("*ABS*+0xADDR@plt" for IRELATIVE).
 */
struct got_name {
	uint64_t got;
	const char *name;       /* in libelf's data; NULL: IRELATIVE */
	const char *version;    /* the version the symbol requires, or NULL */
	uint64_t addend;        /* IRELATIVE: the resolver's address */
};

static int cmp_got(const void *a, const void *b)
{
	const struct got_name *x = a, *y = b;

	return x->got < y->got ? -1 : x->got > y->got;
}

/* The version names of a dynamic symbol table, by version index (its
 * .gnu.version entries), from .gnu.version_d and .gnu.version_r. */
struct versions {
	Elf_Data *versym;       /* NULL: the table is not versioned */
	const char **name;      /* in libelf's data; NULL where unknown */
	size_t nname;
};

static int version_set(struct versions *v, size_t ndx, const char *name)
{
	if (ndx >= v->nname) {
		const char **q = realloc(v->name, (ndx + 1) * sizeof(*q));

		if (!q)
			return HTR_ERR_NOMEM;
		memset(q + v->nname, 0, (ndx + 1 - v->nname) * sizeof(*q));
		v->name = q;
		v->nname = ndx + 1;
	}
	v->name[ndx] = name;
	return 0;
}

/* The versions of symbol table section @symndx of @elf into @v (free
 * v->name).  Returns 0 or HTR_ERR_NOMEM; a damaged table names nothing. */
static int versions_load(Elf *elf, size_t symndx, struct versions *v)
{
	Elf_Scn *scn = NULL;

	memset(v, 0, sizeof(*v));
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t off = 0, k;

		if (!gelf_getshdr(scn, &sh) || !(d = elf_getdata(scn, NULL)) ||
		    !d->d_buf)
			continue;
		if (sh.sh_type == SHT_GNU_versym && sh.sh_link == symndx)
			v->versym = d;
		if (sh.sh_type == SHT_GNU_verdef)
			for (k = 0; k < 0x8000 && off <= INT_MAX; k++) {
				GElf_Verdef vd;
				GElf_Verdaux va;
				const char *s;

				if (!gelf_getverdef(d, (int) off, &vd))
					break;
				if (vd.vd_cnt && off + vd.vd_aux <= INT_MAX &&
				    gelf_getverdaux(d, (int) (off + vd.vd_aux),
						    &va) &&
				    (s = elf_strptr(elf, sh.sh_link,
						    va.vda_name)) &&
				    version_set(v, vd.vd_ndx & 0x7fff, s))
					return HTR_ERR_NOMEM;
				if (!vd.vd_next)
					break;
				off += vd.vd_next;
			}
		if (sh.sh_type == SHT_GNU_verneed)
			for (k = 0; k < 0x8000 && off <= INT_MAX; k++) {
				GElf_Verneed vn;
				GElf_Vernaux na;
				size_t aoff, i;

				if (!gelf_getverneed(d, (int) off, &vn))
					break;
				aoff = off + vn.vn_aux;
				for (i = 0; i < vn.vn_cnt && aoff <= INT_MAX;
				     i++) {
					const char *s;

					if (!gelf_getvernaux(d, (int) aoff, &na))
						break;
					s = elf_strptr(elf, sh.sh_link,
						       na.vna_name);
					if (s && version_set(v, na.vna_other &
							     0x7fff, s))
						return HTR_ERR_NOMEM;
					if (!na.vna_next)
						break;
					aoff += na.vna_next;
				}
				if (!vn.vn_next)
					break;
				off += vn.vn_next;
			}
	}
	return 0;
}

/* The version of symbol @k (NULL: none) and whether it is hidden (not
 * the default version of a definition: "memcpy@GLIBC_2.2.5"). */
static const char *version_of(const struct versions *v, size_t k,
			      int *hidden)
{
	GElf_Versym vs;

	*hidden = 0;
	if (!v->versym || k > INT_MAX ||
	    !gelf_getversym(v->versym, (int) k, &vs))
		return NULL;
	*hidden = !!(vs & 0x8000);
	vs &= 0x7fff;
	return vs >= 2 && vs < v->nname ? v->name[vs] : NULL;
}

/* The JUMP_SLOT, GLOB_DAT and IRELATIVE relocations of @elf into *@out
 * (sorted by GOT address; the caller frees it).  Returns the count or
 * HTR_ERR_NOMEM. */
static long got_names(Elf *elf, struct got_name **out)
{
	Elf_Scn *scn = NULL;
	struct got_name *v = NULL;
	size_t n = 0, cap = 0, shnum;

	*out = NULL;
	if (elf_getshdrnum(elf, &shnum) != 0)
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh, ssh, strsh;
		Elf_Scn *sym_scn, *str_scn;
		Elf_Data *data, *syms, *strs;
		struct versions ver;
		size_t i, nrel;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
		    !sh.sh_link || sh.sh_link >= shnum ||
		    !(sym_scn = elf_getscn(elf, sh.sh_link)) ||
		    !gelf_getshdr(sym_scn, &ssh) ||
		    !ssh.sh_link || ssh.sh_link >= shnum ||
		    !(str_scn = elf_getscn(elf, ssh.sh_link)) ||
		    !gelf_getshdr(str_scn, &strsh) ||
		    strsh.sh_type != SHT_STRTAB ||
		    !(data = elf_getdata(scn, NULL)) || !data->d_buf ||
		    !(syms = elf_getdata(sym_scn, NULL)) || !syms->d_buf ||
		    !(strs = elf_getdata(str_scn, NULL)) || !strs->d_buf)
			continue;
		if (versions_load(elf, sh.sh_link, &ver))
			goto nomem;
		nrel = data->d_size / sizeof(Elf64_Rela);
		if (nrel > INT_MAX)
			nrel = INT_MAX;
		for (i = 0; i < nrel; i++) {
			const char *name = NULL, *version = NULL;
			GElf_Rela r;
			GElf_Sym sym;
			unsigned long t;
			size_t k;
			int hidden;

			if (!gelf_getrela(data, (int) i, &r))
				break;
			t = GELF_R_TYPE(r.r_info);
			k = GELF_R_SYM(r.r_info);
			if (t == R_X86_64_IRELATIVE) {
				if (k || r.r_addend <= 0)
					continue;
			} else if ((t != R_X86_64_JUMP_SLOT &&
				    t != R_X86_64_GLOB_DAT) || !k ||
				   k > INT_MAX ||
				   !gelf_getsym(syms, (int) k, &sym) ||
				   !(name = sym_name(&sym, strs))) {
				continue;
			} else {
				version = version_of(&ver, k, &hidden);
			}
			if (grow((void **) &v, &cap, n + 1, sizeof(*v))) {
				free(ver.name);
				goto nomem;
			}
			v[n].got = r.r_offset;
			v[n].name = name;
			v[n].version = version;
			v[n].addend = (uint64_t) r.r_addend;
			n++;
		}
		free(ver.name);
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_got);
	*out = v;
	return (long) n;
nomem:
	free(v);
	return HTR_ERR_NOMEM;
}

/* The GOT slot a stub's bytes @p (@len of them, at @addr) jump through:
 * [endbr64] [bnd] jmp *disp32(%rip).  0 if none. */
static uint64_t stub_got(const uint8_t *p, size_t len, uint64_t addr)
{
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	size_t k = 0;
	int32_t disp;

	if (len >= 4 && !memcmp(p, endbr64, 4))
		k = 4;
	if (k < len && p[k] == 0xf2)
		k++;
	if (k + 6 > len || p[k] != 0xff || p[k + 1] != 0x25)
		return 0;
	disp = (int32_t) (uint32_t) htr_disk__get_le(p + k + 2, 4);
	return addr + k + 6 + (uint64_t) (int64_t) disp;
}

/* The best-bound IFUNC symbol of @elf's table of @type at @value, or
 * NULL. */
static const char *ifunc_at(Elf *elf, Elf64_Word type, uint64_t value)
{
	Elf_Data *data, *strdata;
	Elf_Scn *scn;
	const char *best = NULL, *name;
	uint32_t rank = UINT32_MAX;
	size_t n, i;
	GElf_Sym sym;

	n = table_of(elf, type, &scn, &data, &strdata);
	for (i = 0; i < n; i++)
		if (gelf_getsym(data, (int) i, &sym) &&
		    GELF_ST_TYPE(sym.st_info) == STT_GNU_IFUNC &&
		    sym.st_value == value && sym.st_shndx != SHN_UNDEF &&
		    bind_rank(GELF_ST_BIND(sym.st_info)) < rank &&
		    (name = sym_name(&sym, strdata))) {
			best = name;
			rank = bind_rank(GELF_ST_BIND(sym.st_info));
		}
	return best;
}

/* The segments of a module that its records matched. */
struct segs {
	const GElf_Phdr *seg;
	const struct htr_disk_image **recs;
	size_t n;
};

/* Where file address @v of a matched segment was loaded, into *@out.
 * Returns 0 if no matched segment holds it. */
static int relocate(const struct segs *sg, size_t j, uint64_t v, uint64_t *out)
{
	const GElf_Phdr *s = &sg->seg[j];

	if (v < s->p_vaddr || v - s->p_vaddr >= s->p_filesz)
		return 0;
	*out = v + (sg->recs[j]->vaddr - s->p_vaddr);   /* modular */
	return 1;
}

static int tpool_add(struct loader *ld, const char *str, uint32_t *off)
{
	size_t len = str ? strlen(str) : 0;

	if (!str) {
		*off = UINT32_MAX;
		return 0;
	}
	if (len > UINT32_MAX - 2 || ld->tpool_len > UINT32_MAX - 2 - len ||
	    grow((void **) &ld->tpool, &ld->cap_tpool, ld->tpool_len + len + 1,
		 1))
		return HTR_ERR_NOMEM;
	memcpy(ld->tpool + ld->tpool_len, str, len + 1);
	*off = (uint32_t) ld->tpool_len;
	ld->tpool_len += len + 1;
	return 0;
}

/* Remember the PLT stubs of @elf, module @mod, where @sg loaded them;
 * @syms is its symbol file (a debug file's .symtab may name an IFUNC
 * that .dynsym does not).  Returns their count or HTR_ERR_NOMEM. */
static long plt_stubs(struct loader *ld, Elf *elf, Elf *syms, uint32_t mod,
		      const struct segs *sg)
{
	struct got_name *g = NULL;
	size_t shstrndx, j;
	long ng, nadd = 0;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;

	if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64 ||
	    gelf_getclass(elf) != ELFCLASS64 ||
	    elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	ng = got_names(elf, &g);
	if (ng <= 0)
		return ng;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		const char *sname;
		uint64_t es, off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR) ||
		    !(sname = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    (strcmp(sname, ".plt") && strcmp(sname, ".plt.sec") &&
		     strcmp(sname, ".plt.got")) ||
		    !(d = elf_getdata(scn, NULL)) || !d->d_buf)
			continue;
		es = sh.sh_entsize >= 8 ? sh.sh_entsize :
		     strcmp(sname, ".plt.got") ? 16 : 8;
		for (off = 0; off + es <= d->d_size; off += es) {
			struct got_name key, *hit;
			const char *ifunc = NULL;
			char label[40];
			struct stub *st;
			uint64_t at, res = 0;

			key.got = stub_got((const uint8_t *) d->d_buf + off,
					   (size_t) es, sh.sh_addr + off);
			hit = key.got ? bsearch(&key, g, (size_t) ng,
						sizeof(*g), cmp_got) : NULL;
			if (!hit)
				continue;
			if (!hit->name) {
				snprintf(label, sizeof(label), "*ABS*+0x%llx",
					 U64(hit->addend));
				ifunc = ifunc_at(elf, SHT_DYNSYM, hit->addend);
				if (!ifunc && syms != elf)
					ifunc = ifunc_at(syms, SHT_SYMTAB,
							 hit->addend);
			}
			for (j = 0; j < sg->n; j++) {
				if (!relocate(sg, j, sh.sh_addr + off, &at))
					continue;
				if (!hit->name && ifunc)
					for (res = 0; j < sg->n; j++)
						if (relocate(sg, j, hit->addend,
							     &res))
							break;
				if (grow((void **) &ld->stubs, &ld->cap_stubs,
					 ld->nstubs + 1, sizeof(*ld->stubs)))
					goto nomem;
				st = &ld->stubs[ld->nstubs];
				st->addr = at;
				st->size = es;
				st->mod = mod;
				if (tpool_add(ld, hit->name ? hit->name : label,
					      &st->label) ||
				    tpool_add(ld, hit->name, &st->import) ||
				    tpool_add(ld, hit->version, &st->version) ||
				    tpool_add(ld, ifunc, &st->ifunc))
					goto nomem;
				ld->nstubs++;
				nadd++;
				break;
			}
		}
	}
	free(g);
	return nadd;
nomem:
	free(g);
	return HTR_ERR_NOMEM;
}

/* Remember the functions @elf's .dynsym defines for other modules to
 * bind to: global or weak, not hidden or internal. */
static int exports(struct loader *ld, Elf *elf, uint32_t mod,
		   const struct segs *sg)
{
	Elf_Data *data, *strdata;
	Elf_Scn *scn;
	struct versions ver;
	size_t n, i, k;
	GElf_Sym sym;
	int rc = 0;

	n = table_of(elf, SHT_DYNSYM, &scn, &data, &strdata);
	if (!n)
		return 0;
	if (versions_load(elf, elf_ndxscn(scn), &ver))
		return HTR_ERR_NOMEM;
	for (i = 1; i < n && !rc; i++) {
		unsigned type, bind, vis;
		const char *name, *version;
		struct export *e;
		int hidden;

		if (!gelf_getsym(data, (int) i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		bind = GELF_ST_BIND(sym.st_info);
		vis = GELF_ST_VISIBILITY(sym.st_other);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    sym.st_shndx == SHN_UNDEF ||
		    (bind != STB_GLOBAL && bind != STB_WEAK &&
		     bind != STB_GNU_UNIQUE) ||
		    (vis != STV_DEFAULT && vis != STV_PROTECTED) ||
		    !(name = sym_name(&sym, strdata)))
			continue;
		version = version_of(&ver, i, &hidden);
		if (grow((void **) &ld->exports, &ld->cap_exports,
			 ld->nexports + 1, sizeof(*ld->exports))) {
			rc = HTR_ERR_NOMEM;
			break;
		}
		e = &ld->exports[ld->nexports];
		e->mod = mod;
		e->hidden = hidden;
		e->addr = 0;
		for (k = 0; k < sg->n && !relocate(sg, k, sym.st_value,
						   &e->addr); k++)
			;
		rc = tpool_add(ld, name, &e->name);
		if (!rc)
			rc = tpool_add(ld, version, &e->version);
		if (!rc)
			ld->nexports++;
	}
	free(ver.name);
	return rc;
}

/* Add @c's name (demangled if it can be) as a symbol at @addr. */
static int add_sym(struct loader *ld, uint64_t addr, const struct htr_elf_func *c,
		   uint32_t mod)
{
	struct htr_syms *s = ld->s;
	struct sym *e;
	char *dm = NULL;
	const char *name = c->name;
	int rc;

	if (grow((void **) &s->syms, &ld->cap_syms, s->nsyms + 1, sizeof(*e)))
		return HTR_ERR_NOMEM;
	if (name[0] == '_' && (name[1] == 'Z' || name[1] == 'R')) {
		dm = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
		if (dm)
			name = dm;
	}
	e = &s->syms[s->nsyms];
	rc = pool_add(ld, name, strlen(name), &e->name);
	free(dm);
	if (rc)
		return rc;
	e->addr = addr;
	e->size = c->size;
	e->mod = mod;
	e->rank = c->rank;
	e->stub = UINT32_MAX;
	e->stub_mod = mod;
	e->next = 0;
	s->nsyms++;
	return 0;
}

/*
 * Where the function at @value (@size bytes; 0: unknown), whose first
 * bytes are @p (@n of them), always goes: the target of a direct jmp its
 * first straight-line instructions end in, outside the function (a tail
 * jump: glibc's qsort is "xor %r8d,%r8d; jmp qsort_r").  0 if it branches,
 * calls or returns first, or the jump stays inside it.
 */
#define TAIL_INSNS 8

static uint64_t tail_jump(const ZydisDecoder *z, const uint8_t *p, size_t n,
			  uint64_t value, uint64_t size)
{
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction in;
	uint64_t at = value, t;
	size_t k = 0, i;

	for (i = 0; i < TAIL_INSNS && k < n; i++) {
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(z, &ctx, p + k,
								n - k, &in)))
			return 0;
		at += in.length;
		k += in.length;
		switch (in.meta.category) {
		case ZYDIS_CATEGORY_UNCOND_BR:
			if (in.mnemonic != ZYDIS_MNEMONIC_JMP ||
			    !in.raw.imm[0].is_relative)
				return 0;
			t = at + (uint64_t) in.raw.imm[0].value.s;
			if (t - value < (size ? size : k))
				return 0;
			return t;
		case ZYDIS_CATEGORY_COND_BR:
		case ZYDIS_CATEGORY_CALL:
		case ZYDIS_CATEGORY_RET:
		case ZYDIS_CATEGORY_SYSCALL:
		case ZYDIS_CATEGORY_SYSRET:
		case ZYDIS_CATEGORY_INTERRUPT:
		case ZYDIS_CATEGORY_SYSTEM:
			return 0;
		default:
			break;
		}
	}
	return 0;
}

static int cmp_export(const void *a, const void *b)
{
	const struct export *x = a, *y = b;
	int c = strcmp(x->sname, y->sname);

	if (c)
		return c;
	return x->mod < y->mod ? -1 : x->mod > y->mod;
}

/* How well export @e satisfies a reference to a symbol of version @want
 * (NULL: none), as the dynamic loader binds: 0 the version asked for, 1
 * an unversioned definition, 2 the default version, 3 not at all. */
static int binds(const struct loader *ld, const struct export *e,
		 const char *want)
{
	if (e->version == UINT32_MAX)
		return 1;
	if (want && !strcmp(ld->tpool + e->version, want))
		return 0;
	return e->hidden ? 3 : 2;
}

/*
 * Name every PLT stub (plt_stubs) after the function it leads to: bind
 * its symbol in the order the dynamic loader searches (the executable,
 * the libraries, the loader itself last), or its IRELATIVE resolver's
 * IFUNC; else "NAME@plt" in its own module.  Each becomes a symbol of
 * rank 3 (any symbol at the same address wins) whose inside keeps the
 * stub's name, "qsort@plt+0x6".
 */
static int resolve_stubs(struct loader *ld)
{
	struct htr_syms *s = ld->s;
	uint32_t *order = NULL;
	size_t i, k;
	int rc = 0;

	if (!ld->nstubs)
		return 0;
	order = malloc(s->nmods * sizeof(*order));
	if (!order)
		return HTR_ERR_NOMEM;
	/* Search rank per module: executables 0, libraries 1, loader 2. */
	for (k = 0; k < s->nmods; k++)
		order[k] = s->mods[k].exe ? 0 :
			   ld->interp && !strcmp(s->pool + s->mods[k].name,
						 ld->interp) ? 2 : 1;
	for (i = 0; i < ld->nexports; i++)
		ld->exports[i].sname = ld->tpool + ld->exports[i].name;
	if (ld->nexports)
		qsort(ld->exports, ld->nexports, sizeof(*ld->exports),
		      cmp_export);
	for (i = 0; i < ld->nstubs && !rc; i++) {
		const struct stub *st = &ld->stubs[i];
		const char *label = ld->tpool + st->label, *name = NULL;
		const char *want = st->version == UINT32_MAX ? NULL :
				   ld->tpool + st->version;
		uint32_t mod = st->mod, best = UINT32_MAX;
		uint64_t next = 0;
		int how = 3;
		struct htr_elf_func c;
		char *plt;
		size_t lo = 0, hi = ld->nexports, len = strlen(label);

		if (st->import != UINT32_MAX) {
			const char *imp = ld->tpool + st->import;

			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;

				if (strcmp(ld->exports[mid].sname, imp) < 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (; lo < ld->nexports &&
			     !strcmp(ld->exports[lo].sname, imp); lo++) {
				const struct export *e = &ld->exports[lo];
				int b = binds(ld, e, want);

				/* The first module in search order, its best
				 * version. */
				if (b < 3 && (best == UINT32_MAX ||
				    order[e->mod] < order[best] ||
				    (order[e->mod] == order[best] &&
				     (e->mod < best ||
				      (e->mod == best && b < how))))) {
					best = e->mod;
					how = b;
					next = e->addr;
				}
			}
			if (best != UINT32_MAX) {
				name = imp;
				mod = best;
			}
		} else if (st->ifunc != UINT32_MAX) {
			name = ld->tpool + st->ifunc;
		}
		plt = malloc(len + 5);
		if (!plt) {
			rc = HTR_ERR_NOMEM;
			break;
		}
		memcpy(plt, label, len);
		memcpy(plt + len, "@plt", 5);
		c.value = st->addr;
		c.size = st->size;
		c.name = name ? name : plt;
		c.rank = 3;
		rc = add_sym(ld, st->addr, &c, mod);
		if (!rc) {
			struct sym *e = &s->syms[s->nsyms - 1];

			e->stub_mod = st->mod;
			e->next = name ? next : 0;
			rc = pool_add(ld, plt, len + 4, &e->stub);
		}
		free(plt);
	}
	free(order);
	return rc;
}

/*
 * Open the ELF file of module @mod, match each of its @nrecs records
 * against its PT_LOADs and add the symbols of every matched segment.
 * A file that cannot be used is skipped.  Returns 0 or HTR_ERR_NOMEM.
 */
#ifdef HTR_HAVE_LIBDW
/* A stripped file (no .symtab) takes its symbols and DWARF from its
 * distribution's debug file.  Returns 1 if @elf is stripped, with its
 * debug file in *@dbg (NULL if there is none; else the caller ends it,
 * then closes *@fd), 0 if not (*@dbg NULL). */
static int stripped(Elf *elf, Elf **dbg, int *fd)
{
	GElf_Shdr sh;

	*dbg = NULL;
	*fd = -1;
	if (find_section(elf, SHT_SYMTAB, &sh))
		return 0;
	*dbg = htr_elf__debug_file(elf, fd);
	return 1;
}
#endif

/* Whether @elf is stripped and has no debug file (load_elf then names
 * its code from .dynsym at best). */
static int lacks_debug_file(Elf *elf)
{
	int lacks = 0;
#ifdef HTR_HAVE_LIBDW
	Elf *dbg = NULL;
	int dfd;

	lacks = stripped(elf, &dbg, &dfd) && !dbg;
	if (dbg) {
		elf_end(dbg);
		close(dfd);
	}
#else
	(void) elf;
#endif
	return lacks;
}

unsigned htr_syms__unreadable(const struct htr_file *file, unsigned *nodebug)
{
	struct htr_file_image im, prev;
	uint64_t pos = 0;
	unsigned n = 0;
	int have_prev = 0;

	if (nodebug)
		*nodebug = 0;

	while (htr_file__image_next(file, &pos, &im) == 0) {
		struct htr_elf e;
		char *path;

		if (im.rec->kind != 1 || (have_prev &&
		    prev.path_len == im.path_len &&
		    !memcmp(prev.path, im.path, im.path_len)))
			continue;
		prev = im;
		have_prev = 1;
		path = strndup(im.path, im.path_len);
		if (!path || htr_elf__open(&e, path, file->path, 0, NULL) < 0) {
			n++;
		} else {
			if (nodebug && lacks_debug_file(e.elf))
				(*nodebug)++;
			htr_elf__close(&e);
		}
		free(path);
	}
	return n;
}

static int load_elf(struct loader *ld, uint32_t mod,
		    const struct htr_disk_image **recs, size_t nrecs)
{
	const struct module *m = &ld->s->mods[mod];
	GElf_Phdr *seg = NULL;
	struct htr_elf_func *c = NULL;
	struct segs sg;
	GElf_Ehdr eh;
	ZydisDecoder z;
	int use_zydis;
	long nstubs = 0;
#ifdef HTR_HAVE_LIBDW
	Dwarf *dw = NULL;
	Elf *dbg = NULL;
	int dbg_fd = -1;
#endif
	struct htr_elf ef = { -1, NULL };
	struct htr_err eerr;
	Elf *elf = NULL, *syms;
	char *path;
	size_t nph, i, j;
	long nc = 0;
	int rc = 0;

	path = malloc((size_t) m->path_len + 1);
	if (!path)
		return nomem(ld);
	memcpy(path, m->path, m->path_len);
	path[m->path_len] = 0;
	if (strlen(path) != m->path_len) {
		skip(ld, path, "path holds a NUL byte");
		goto out;
	}
	if (htr_elf__open(&ef, path, ld->htr_path, 0, &eerr) < 0) {
		if (!ld->nskipped++)      /* as skip(): the message names path */
			htr_err__set(ld->err, HTR_ERR_IO, "%s; no symbols",
				     eerr.msg);
		goto out;
	}
	elf = ef.elf;
	elf_getphdrnum(elf, &nph);      /* checked by htr_elf__open() */
	seg = calloc(nrecs, sizeof(*seg));
	if (!seg) {
		rc = nomem(ld);
		goto out;
	}
	for (j = 0; j < nrecs; j++) {
		for (i = 0; i < nph; i++) {
			if (gelf_getphdr(elf, (int) i, &seg[j]) &&
			    seg[j].p_type == PT_LOAD &&
			    seg[j].p_offset == recs[j]->offset &&
			    seg[j].p_filesz == recs[j]->size)
				break;
		}
		if (i == nph) {
			char why[128];

			snprintf(why, sizeof(why), "changed since the build "
				 "(no segment of 0x%llx bytes at offset 0x%llx)",
				 U64(recs[j]->size), U64(recs[j]->offset));
			skip(ld, path, why);
			goto out;
		}
	}
	/* Where this file's own addresses begin in each of its ranges. */
	for (j = 0; j < nrecs; j++)
		for (i = 0; i < ld->s->nranges; i++) {
			struct range *r = &ld->s->ranges[i];

			if (r->mod == mod && r->kind == 1 &&
			    r->lo == recs[j]->vaddr)
				r->base = recs[j]->vaddr - seg[j].p_vaddr;
		}
	/* An executable, and the loader it names (which binds last). */
	for (i = 0; i < nph; i++) {
		GElf_Phdr ph;
		size_t len;
		char *q;

		if (!gelf_getphdr(elf, (int) i, &ph) || ph.p_type != PT_INTERP)
			continue;
		ld->s->mods[mod].exe = 1;
		q = ld->interp ? NULL : elf_rawfile(elf, &len);
		if (q && ph.p_offset < len && ph.p_filesz <= len - ph.p_offset &&
		    ph.p_filesz && memchr(q + ph.p_offset, 0, ph.p_filesz)) {
			const char *ip = q + ph.p_offset, *b = strrchr(ip, '/');

			ld->interp = strdup(b ? b + 1 : ip);
			if (!ld->interp) {
				rc = nomem(ld);
				goto out;
			}
		}
	}
	if (gelf_getehdr(elf, &eh) && eh.e_type == ET_EXEC)
		ld->s->mods[mod].exe = 1;
	syms = elf;
#ifdef HTR_HAVE_LIBDW
	if (stripped(elf, &dbg, &dbg_fd) && dbg)
		syms = dbg;
#endif
	nc = htr_syms__elf_funcs(syms, &c);
	if (nc >= 0)
		nc = code_labels(syms, &c, nc);
#ifdef HTR_HAVE_LIBDW
	if (nc >= 0)
		nc = dwarf_funcs(syms, &dw, &c, nc);
#endif
	sg.seg = seg;
	sg.recs = recs;
	sg.n = nrecs;
	if (nc >= 0)
		nstubs = plt_stubs(ld, elf, syms, mod, &sg);
	if (nc < 0 || nstubs < 0 || exports(ld, elf, mod, &sg)) {
		rc = nomem(ld);
		goto out;
	}
	if (!nc && !nstubs) {
		skip(ld, path, "no function symbols");
		goto out;
	}
	use_zydis = gelf_getehdr(elf, &eh) && eh.e_machine == EM_X86_64 &&
		    gelf_getclass(elf) == ELFCLASS64 &&
		    ZYAN_SUCCESS(ZydisDecoderInit(&z, ZYDIS_MACHINE_MODE_LONG_64,
						  ZYDIS_STACK_WIDTH_64));
	for (j = 0; j < nrecs; j++) {
		uint64_t bias = recs[j]->vaddr - seg[j].p_vaddr;  /* modular */
		uint64_t last = 0, next = 0;

		for (i = 0; i < (size_t) nc; i++) {
			uint64_t in;
			uint8_t code[64];
			ssize_t got;

			if (c[i].value < seg[j].p_vaddr ||
			    (in = c[i].value - seg[j].p_vaddr) >=
			    seg[j].p_filesz)
				continue;
			rc = add_sym(ld, c[i].value + bias, &c[i], mod);
			if (rc) {
				rc = nomem(ld);
				goto out;
			}
			/* Functions only: a label's code is no entry. */
			if (!use_zydis || c[i].rank == 3)
				continue;
			if (c[i].value != last) {
				last = c[i].value;
				got = pread(ef.fd, code, seg[j].p_filesz - in <
					    sizeof(code) ? (size_t)
					    (seg[j].p_filesz - in) :
					    sizeof(code),
					    (off_t) (seg[j].p_offset + in));
				next = got > 0 ? tail_jump(&z, code,
					(size_t) got, c[i].value,
					c[i].size) : 0;
				if (next && relocate(&sg, j, next, &next))
					;
				else
					next = 0;
			}
			ld->s->syms[ld->s->nsyms - 1].next = next;
		}
	}
out:
	free(c);
	free(seg);
#ifdef HTR_HAVE_LIBDW
	if (dw)
		dwarf_end(dw);
	if (dbg)
		elf_end(dbg);
	if (dbg_fd >= 0)
		close(dbg_fd);
#endif
	htr_elf__close(&ef);
	free(path);
	return rc;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->size != y->size)         /* the larger extent first */
		return x->size > y->size ? -1 : 1;
	if (x->mod != y->mod)
		return x->mod < y->mod ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->hi < y->hi ? -1 : x->hi > y->hi;
}

void htr_syms__free(struct htr_syms *syms)
{
	if (!syms)
		return;
	free(syms->syms);
	free(syms->alts);
	free(syms->ranges);
	free(syms->mods);
	free(syms->pool);
	free(syms);
}

int htr_syms__load(struct htr_syms **out, const struct htr_file *file,
		   unsigned *nskipped, struct htr_err *err)
{
	struct loader ld;
	struct htr_syms *s;
	struct htr_file_image im;
	const struct htr_disk_image **recs = NULL;
	uint32_t *recmod = NULL;
	uint64_t pos = 0;
	size_t n = 0, cap = 0, i, j, k;
	int rc = 0;

	if (nskipped)
		*nskipped = 0;
	if (!out)
		return htr_err__set(err, HTR_ERR_INVALID, "no output");
	*out = NULL;
	memset(&ld, 0, sizeof(ld));
	ld.err = err;
	ld.htr_path = file ? file->path : NULL;
	s = ld.s = calloc(1, sizeof(*s));
	if (!s)
		return nomem(&ld);

	/* Modules and ranges. */
	while (htr_file__image_next(file, &pos, &im) == 0) {
		uint32_t mod;
		uint64_t hi;

		if (n == cap) {
			size_t c2 = cap ? cap * 2 : 16;
			void *p = realloc(recs, c2 * sizeof(*recs));

			if (p)
				recs = p;
			p = p ? realloc(recmod, c2 * sizeof(*recmod)) : NULL;
			if (!p) {
				rc = nomem(&ld);
				goto out;
			}
			recmod = p;
			cap = c2;
		}
		if (module_get(&ld, &im, &mod)) {
			rc = nomem(&ld);
			goto out;
		}
		recs[n] = im.rec;
		recmod[n] = mod;
		n++;
		if (im.rec->vaddr < s->mods[mod].lowest)
			s->mods[mod].lowest = im.rec->vaddr;
		if (im.rec->kind == 1)
			s->mods[mod].elf = 1;
		hi = im.rec->vaddr + im.rec->size;
		if (hi < im.rec->vaddr)
			hi = UINT64_MAX;    /* saturate a wrapping record */
		if (hi == im.rec->vaddr)
			continue;           /* empty: names nothing */
		if (grow((void **) &s->ranges, &ld.cap_ranges, s->nranges + 1,
			 sizeof(*s->ranges))) {
			rc = nomem(&ld);
			goto out;
		}
		s->ranges[s->nranges].lo = im.rec->vaddr;
		s->ranges[s->nranges].hi = hi;
		/* An ELF file that cannot be read counts from its file
		 * offsets: the addresses of a shared library or PIE as
		 * linkers lay them out (load_elf sets the true ones). */
		s->ranges[s->nranges].base = im.rec->kind == 1 ?
			im.rec->vaddr - im.rec->offset : 0;
		s->ranges[s->nranges].mod = mod;
		s->ranges[s->nranges].kind = im.rec->kind;
		s->nranges++;
	}
	for (i = 0; i < s->nranges; i++)
		if (s->ranges[i].kind != 1)
			s->ranges[i].base = s->mods[s->ranges[i].mod].lowest;
	if (s->nranges)
		qsort(s->ranges, s->nranges, sizeof(*s->ranges), cmp_range);

	/* Symbols: each ELF module's file once, with its ELF records. */
	for (k = 0; k < s->nmods; k++) {
		const struct htr_disk_image **mrecs;
		size_t nm = 0;

		if (!s->mods[k].elf)
			continue;
		mrecs = malloc(n * sizeof(*mrecs));
		if (!mrecs) {
			rc = nomem(&ld);
			goto out;
		}
		for (j = 0; j < n; j++)
			if (recmod[j] == k && recs[j]->kind == 1)
				mrecs[nm++] = recs[j];
		rc = load_elf(&ld, (uint32_t) k, mrecs, nm);
		free(mrecs);
		if (rc)
			goto out;
	}
	if (resolve_stubs(&ld)) {
		rc = nomem(&ld);
		goto out;
	}

	/* Sort; one entry per address, the best-bound first; the other
	 * names of an address (each once) apart. */
	if (s->nsyms)
		qsort(s->syms, s->nsyms, sizeof(*s->syms), cmp_sym);
	if (s->nsyms) {
		s->alts = malloc(s->nsyms * sizeof(*s->alts));
		if (!s->alts) {
			rc = nomem(&ld);
			goto out;
		}
	}
	for (i = j = 0; i < s->nsyms; i++) {
		const struct sym *e = &s->syms[i];

		if (!j || e->addr != s->syms[j - 1].addr) {
			s->syms[j++] = *e;
			continue;
		}
		if (e->mod != s->syms[j - 1].mod ||
		    !strcmp(s->pool + e->name, s->pool + s->syms[j - 1].name))
			continue;
		for (k = s->nalts; k > 0 && s->alts[k - 1].addr == e->addr &&
		     strcmp(s->pool + s->alts[k - 1].name, s->pool + e->name);
		     k--)
			;
		if (k == 0 || s->alts[k - 1].addr != e->addr)
			s->alts[s->nalts++] = *e;
	}
	s->nsyms = j;
	for (k = 0; k < s->nmods; k++)
		s->mods[k].path = NULL;     /* pointed into @file */
out:
	free(recs);
	free(recmod);
	free(ld.stubs);
	free(ld.exports);
	free(ld.tpool);
	free(ld.interp);
	if (nskipped)
		*nskipped = ld.nskipped;
	if (rc) {
		htr_syms__free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static int describe(const struct htr_syms *syms, uint64_t addr, char *buf,
		    size_t size, int offsets);

/* The range holding @addr, or NULL. */
static const struct range *find_range(const struct htr_syms *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nranges;

	/* First range with lo > addr; then look back (ranges may overlap). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->ranges[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo > 0) {
		const struct range *r = &s->ranges[--lo];

		if (addr < r->hi)
			return r;
	}
	return NULL;
}

/* The first of @a's @n symbols (by address) at or after @addr. */
static size_t sym_at_or_after(const struct sym *a, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The symbol starting exactly at @addr, or NULL. */
static const struct sym *exact_sym(const struct htr_syms *s, uint64_t addr)
{
	size_t i = sym_at_or_after(s->syms, s->nsyms, addr);

	return i < s->nsyms && s->syms[i].addr == addr ? &s->syms[i] : NULL;
}

size_t htr_syms__leads_to(const struct htr_syms *syms, uint64_t addr,
			  uint64_t *out, size_t max)
{
	const struct sym *e = syms ? exact_sym(syms, addr) : NULL;
	size_t n = 0, k;

	while (e && e->next && n < max) {
		uint64_t to = e->next;

		for (k = 0; k < n && out[k] != to; k++)
			;
		if (k < n || to == addr)
			break;          /* a cycle */
		e = exact_sym(syms, to);
		if (!e)
			break;          /* into the middle of code */
		out[n++] = to;
	}
	return n;
}

int htr_syms__alias(const struct htr_syms *syms, uint64_t addr, size_t k,
		    char *buf, size_t size)
{
	const struct sym *e;
	size_t lo;

	if (!size)
		return 0;
	buf[0] = 0;
	if (!syms)
		return 0;
	lo = sym_at_or_after(syms->alts, syms->nalts, addr);
	if (lo + k >= syms->nalts || syms->alts[lo + k].addr != addr)
		return 0;
	e = &syms->alts[lo + k];
	if (syms->nmods > 1)
		snprintf(buf, size, "%s!%s", syms->pool + syms->mods[e->mod].name,
			 syms->pool + e->name);
	else
		snprintf(buf, size, "%s", syms->pool + e->name);
	return 1;
}

int htr_syms__name(const struct htr_syms *syms, uint64_t addr, char *buf,
		   size_t size)
{
	return describe(syms, addr, buf, size, 1);
}

int htr_syms__function(const struct htr_syms *syms, uint64_t addr,
		       char *buf, size_t size)
{
	return describe(syms, addr, buf, size, 0);
}

/* htr_syms__name() (@offsets: "name+0xOFF" inside a symbol) and
 * htr_syms__function() (without: the containing function). */
static int describe(const struct htr_syms *syms, uint64_t addr, char *buf,
		    size_t size, int offsets)
{
	const struct sym *e = NULL;
	const struct range *r;
	const char *mod = "";
	size_t lo = 0, hi;
	int exact = 0;

	if (syms) {
		hi = syms->nsyms;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (syms->syms[mid].addr <= addr)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo)
			e = &syms->syms[lo - 1];
	}
	if (e && e->addr == addr)
		exact = 1;
	if (!buf || !size)
		return exact;
	/* With several modules the same name may mean different code
	 * (two static helpers, two copies of a library): name the module,
	 * "libc.so.6!memcpy", so they never merge. */
	if (e && syms->nmods > 1)
		mod = syms->pool + syms->mods[e->mod].name;
	if (exact) {
		snprintf(buf, size, "%s%s%s", mod, *mod ? "!" : "",
			 syms->pool + e->name);
		return 1;
	}
	r = syms ? find_range(syms, addr) : NULL;
	if (e) {
		int inside;

		if (e->size)
			inside = addr - e->addr < e->size;
		else    /* up to the next symbol, inside the same range */
			inside = r && r->mod == e->mod && e->addr >= r->lo;
		if (inside && !offsets) {
			snprintf(buf, size, "%s%s%s", mod, *mod ? "!" : "",
				 syms->pool + e->name);
			return 1;
		}
		if (inside && e->stub != UINT32_MAX) {
			mod = syms->nmods > 1 ?
			      syms->pool + syms->mods[e->stub_mod].name : "";
			snprintf(buf, size, "%s%s%s+0x%llx", mod, *mod ? "!" : "",
				 syms->pool + e->stub, U64(addr - e->addr));
			return 0;
		}
		if (inside) {
			snprintf(buf, size, "%s%s%s+0x%llx", mod, *mod ? "!" : "",
				 syms->pool + e->name, U64(addr - e->addr));
			return 0;
		}
	}
	if (r) {
		snprintf(buf, size, "%s+0x%llx",
			 syms->pool + syms->mods[r->mod].name,
			 U64(addr - r->base));
		return 0;
	}
	snprintf(buf, size, "0x%llx", U64(addr));
	return 0;
}

/* The public API (htr/names.h): the loader's symbols and its message. */
struct htr_names {
	struct htr_syms *syms;
	unsigned skipped;
	struct htr_err err;
};

int htr_names_open(struct htr_names **out, const struct htr_file *file)
{
	struct htr_names *n;
	int rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	if (!file)
		return HTR_ERR_INVALID;
	n = calloc(1, sizeof(*n));
	if (!n)
		return HTR_ERR_NOMEM;
	rc = htr_syms__load(&n->syms, file, &n->skipped, &n->err);
	if (rc < 0) {
		free(n);
		return rc;
	}
	*out = n;
	return 0;
}

void htr_names_free(struct htr_names *n)
{
	if (!n)
		return;
	htr_syms__free(n->syms);
	free(n);
}

unsigned htr_names_skipped(const struct htr_names *n, const char **why)
{
	if (why)
		*why = n && n->skipped ? n->err.msg : "";
	return n ? n->skipped : 0;
}

int htr_names_at(const struct htr_names *n, uint64_t addr, char *buf,
		 size_t size)
{
	if (!n || !buf || !size)
		return 0;
	return htr_syms__name(n->syms, addr, buf, size);
}

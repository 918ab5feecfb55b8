/*
 * Symbols against the synthesizer's ground truth: every function of the
 * truth resolves to its name (C++ names demangled) at the link base and
 * relocated to a PIE base; offsets inside functions, the module fallback
 * and unknown addresses; ELF files deleted, replaced, stripped, corrupted
 * or fuzzed after the build; .dynsym-only files; duplicate addresses.
 * Late blocks named "~name" after the function the synthesizer knows they
 * were in.  With libdw: a function whose symbol was stripped is named from
 * the DWARF the compiler wrote.
 */
#include "htr/htr.h"
#include "symbols.h"
#include "writer.h"
#include "synth.h"
#include "truth.h"

#include "build_truth.h"
#include "tmpdir.h"

#include <criterion/criterion.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define U64(x) ((unsigned long long) (x))
#define PIE_BASE 0x555555554000ull
#define LINK_BASE 0x400000ull

HTR_TEST_TMPDIR(symbols);

/* Synthesize DIR/TAG.{elf,pt,truth} for a program at @base. */
static void synth(const char *tag, uint64_t base, uint64_t seed,
		  unsigned nfuncs, struct truth *t)
{
	struct synth_opts o;
	char prefix[256], path[300], err[512];

	synth_opts_init(&o);
	o.seed = seed;
	o.insns = 20000;
	o.nfuncs = nfuncs;
	o.base = base;
	o.bundle = 0;
	snprintf(prefix, sizeof(prefix), "%s/%s", dir, tag);
	cr_assert_eq(synth_run(&o, prefix, NULL, err, sizeof(err)), 0, "%s",
		     err);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(t, path, err, sizeof(err)), 0, "%s", err);
}

/* Build DIR/TAG.htr from DIR/TRACE.pt with the ELF @elf loaded at @base. */
static void build(const char *tag, const char *trace, const char *elf,
		  uint64_t base, const struct truth *t)
{
	char spec[400], pt[300], out[300];

	snprintf(spec, sizeof(spec), "%s/%s@0x%llx", dir, elf, U64(base));
	snprintf(pt, sizeof(pt), "%s/%s.pt", dir, trace);
	snprintf(out, sizeof(out), "%s/%s.htr", dir, tag);
	build_with_truth(t, spec, pt, out, NULL);
}

struct loaded {
	struct htr_file *f;
	struct htr_syms *s;
	unsigned nskipped;
	struct htr_err err;
};

static void load(struct loaded *l, const char *tag)
{
	char path[300];
	int rc;

	memset(l, 0, sizeof(*l));
	snprintf(path, sizeof(path), "%s/%s.htr", dir, tag);
	rc = htr_file_open(&l->f, path, NULL);
	cr_assert_eq(rc, 0, "%s: %s", path, l->f ? htr_file_last_error(l->f) : "");
	l->nskipped = 12345;
	rc = htr_syms__load(&l->s, l->f, &l->nskipped, &l->err);
	cr_assert_eq(rc, 0, "%s: %s", path, l->err.msg);
	cr_assert_not_null(l->s);
}

static void unload(struct loaded *l)
{
	htr_syms__free(l->s);
	htr_file_close(l->f);
}

/*
 * The demangled form of the synthesizer's C++ names, parsed by hand:
 * _ZN<len><id>...Ev is "id::id::...()"; other names are kept.
 */
static void expect_name(const char *mangled, char *out, size_t size)
{
	const char *p = mangled + 3;
	size_t n = 0;

	if (strncmp(mangled, "_ZN", 3) != 0) {
		snprintf(out, size, "%s", mangled);
		return;
	}
	out[0] = 0;
	while (*p >= '0' && *p <= '9') {
		char *end;
		unsigned long len = strtoul(p, &end, 10);

		cr_assert(strlen(end) >= len, "%s: bad length", mangled);
		n += (size_t) snprintf(out + n, size - n, "%s%.*s",
				       n ? "::" : "", (int) len, end);
		cr_assert_lt(n, size);
		p = end + len;
	}
	cr_assert_str_eq(p, "Ev", "%s: not the synthesizer's pattern",
			 mangled);
	n += (size_t) snprintf(out + n, size - n, "()");
	cr_assert_lt(n, size);
}

static int name_of(const struct loaded *l, uint64_t addr, char *buf,
		   size_t size)
{
	return htr_syms__name(l->s, addr, buf, size);
}

/* Every function of @t (entries at @t->base) by name, and inside it. */
static void check_funcs(const struct loaded *l, const struct truth *t)
{
	char want[128], got[256], plus[160];
	size_t i, mangled = 0;

	for (i = 0; i < t->nfuncs; i++) {
		const struct truth_func *fn = &t->funcs[i];

		expect_name(fn->name, want, sizeof(want));
		if (strcmp(want, fn->name) != 0)
			mangled++;
		cr_assert_eq(name_of(l, fn->entry, got, sizeof(got)), 1,
			     "func %zu (%s) at 0x%llx: got %s", i, want,
			     U64(fn->entry), got);
		cr_assert_str_eq(got, want, "func %zu at 0x%llx", i,
				 U64(fn->entry));
		cr_assert_gt(fn->size, 3);
		snprintf(plus, sizeof(plus), "%s+0x3", want);
		cr_assert_eq(name_of(l, fn->entry + 3, got, sizeof(got)), 0);
		cr_assert_str_eq(got, plus);
		snprintf(plus, sizeof(plus), "%s+0x%x", want, fn->size - 1);
		name_of(l, fn->entry + fn->size - 1, got, sizeof(got));
		cr_assert_str_eq(got, plus);
	}
	cr_assert_geq(mangled, 3, "too few C++ names to test demangling");
}

/* What the executable PT_LOAD of DIR/@name says its file offset 0 is at
 * (p_vaddr - p_offset, as readelf -l shows them): "MODULE+0xOFFSET"
 * names the file's own addresses, those addr2line -e FILE takes. */
static uint64_t elf_link(const char *name)
{
	char path[300];
	GElf_Phdr ph;
	size_t n, i;
	Elf *e;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_neq(elf_version(EV_CURRENT), EV_NONE);
	e = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert_not_null(e);
	cr_assert_eq(elf_getphdrnum(e, &n), 0);
	for (i = 0; i < n; i++)
		if (gelf_getphdr(e, (int) i, &ph) && ph.p_type == PT_LOAD &&
		    (ph.p_flags & PF_X))
			break;
	cr_assert_lt(i, n, "%s: no executable PT_LOAD", path);
	elf_end(e);
	close(fd);
	return ph.p_vaddr - ph.p_offset;
}

/* Addresses no symbol covers: the ELF headers before .text (inside the
 * segment) name the module, by the file's own addresses (its segment at
 * @link: elf_link()), past the segment a bare address. */
static void check_fallbacks(const struct loaded *l, const struct truth *t,
			    const char *module, uint64_t link)
{
	const struct truth_func *last = &t->funcs[0];
	char got[256], want[256];
	size_t i;
	uint64_t lowest = UINT64_MAX;

	for (i = 0; i < t->nfuncs; i++) {
		if (t->funcs[i].entry > last->entry)
			last = &t->funcs[i];
		if (t->funcs[i].entry < lowest)
			lowest = t->funcs[i].entry;
	}
	cr_assert_gt(lowest, t->base + 0x40);
	cr_assert_eq(name_of(l, t->base, got, sizeof(got)), 0);
	snprintf(want, sizeof(want), "%s+0x%llx", module, U64(link));
	cr_assert_str_eq(got, want);
	name_of(l, t->base + 0x40, got, sizeof(got));
	snprintf(want, sizeof(want), "%s+0x%llx", module, U64(link + 0x40));
	cr_assert_str_eq(got, want);
	name_of(l, lowest - 1, got, sizeof(got));
	snprintf(want, sizeof(want), "%s+0x%llx", module,
		 U64(lowest - 1 - t->base + link));
	cr_assert_str_eq(got, want);

	name_of(l, last->entry + last->size, got, sizeof(got));
	snprintf(want, sizeof(want), "0x%llx", U64(last->entry + last->size));
	cr_assert_str_eq(got, want);
	name_of(l, t->base - 1, got, sizeof(got));
	snprintf(want, sizeof(want), "0x%llx", U64(t->base - 1));
	cr_assert_str_eq(got, want);
	name_of(l, 0, got, sizeof(got));
	cr_assert_str_eq(got, "0x0");
	name_of(l, UINT64_MAX, got, sizeof(got));
	cr_assert_str_eq(got, "0xffffffffffffffff");
}

/* With no symbols: every entry is "MODULE+0xOFFSET", the file's own
 * address (its segment at @link), or without the file its file offset
 * (@link 0: the synthesizer's segment starts the file). */
static void check_module_only(const struct loaded *l, const struct truth *t,
			      const char *module, uint64_t link)
{
	char got[256], want[256];
	size_t i;

	for (i = 0; i < t->nfuncs; i++) {
		cr_assert_eq(name_of(l, t->funcs[i].entry, got, sizeof(got)),
			     0);
		snprintf(want, sizeof(want), "%s+0x%llx", module,
			 U64(t->funcs[i].entry - t->base + link));
		cr_assert_str_eq(got, want);
	}
}

/* Synthesize scenario @sc (seed @seed), build it, and check every late
 * block's name (the analysis's) against the truth's function of the late
 * block with the same span or, with @tail_ok (scenarios with tail calls),
 * the truth's function that contains the address the block ran.  Returns
 * the number checked. */
static size_t check_late(int sc, uint64_t seed, int tail_ok)
{
	struct htr_analysis_opts ao;
	struct htr_analysis *a = NULL;
	struct htr_file *f = NULL;
	struct synth_opts o;
	struct truth t;
	char prefix[256], path[300], spec[300], out[300], err[512];
	char want[160], dem[128];
	size_t i, j, k, n = 0;
	uint32_t fn;

	synth_opts_init(&o);
	o.seed = seed;
	o.insns = 20000;
	o.scenario = (enum synth_scenario) sc;
	o.bundle = 0;
	snprintf(prefix, sizeof(prefix), "%s/late%d-%llu", dir, sc, U64(seed));
	cr_assert_eq(synth_run(&o, prefix, NULL, err, sizeof(err)), 0, "%s",
		     err);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(&t, path, err, sizeof(err)), 0, "%s", err);
	snprintf(spec, sizeof(spec), "%s.elf@0x%llx", prefix, U64(t.base));
	snprintf(path, sizeof(path), "%s.pt", prefix);
	snprintf(out, sizeof(out), "%s.htr", prefix);
	build_with_truth(&t, spec, path, out, NULL);
	cr_assert_eq(htr_file_open(&f, out, NULL), 0);
	htr_analysis_opts_init(&ao);
	ao.analyzers = HTR_ANALYZE_ALL;
	cr_assert_eq(htr_analysis_open(&a, f, &ao), 0, "%s",
		     htr_analysis_last_error(a));
	for (i = 0; i < htr_block_count(f); i++) {
		struct htr_block_info b;
		const char *name;

		cr_assert_eq(htr_block_get(f, (uint32_t) i, &b, sizeof(b)), 0);
		if (!(b.flags & HTR_BLOCK_LATE))
			continue;
		for (j = 0; j < t.nblocks; j++)
			if (t.blocks[j].first == b.first &&
			    t.blocks[j].last == b.last &&
			    (t.blocks[j].flags & TRUTH_LATE))
				break;
		cr_assert_lt(j, t.nblocks, "scenario %d seed %llu: late block "
			     "%zu (%llu..%llu) is not the truth's", sc,
			     U64(seed), i, U64(b.first), U64(b.last));
		if (t.blocks[j].func == TRUTH_FUNC_NONE)
			continue;
		cr_assert_neq(b.anchor_func, HTR_NONE);
		cr_assert_eq(b.func, HTR_NONE, "a late block's entry is "
			     "unknown");
		fn = t.blocks[j].func;
		/* Code that ran before the trace may have left the called
		 * function by a tail jump: the block runs (and is named after)
		 * the function containing its code. */
		if (tail_ok)
			for (k = 0; k < t.nfuncs; k++)
				if (b.anchor >= t.funcs[k].entry &&
				    b.anchor - t.funcs[k].entry <
				    t.funcs[k].size)
					fn = (uint32_t) k;
		expect_name(t.funcs[fn].name, dem, sizeof(dem));
		snprintf(want, sizeof(want), "~%s", dem);
		cr_assert_eq(htr_block_name(a, (uint32_t) i, &name), 0);
		cr_assert_str_eq(name, want, "scenario %d seed %llu block %zu",
				 sc, U64(seed), i);
		n++;
	}
	htr_analysis_close(a);
	htr_file_close(f);
	truth_free(&t);
	return n;
}

Test(symbols, late_blocks_named_after_their_function)
{
	static const int scs[] = { SYNTH_LATE_START, SYNTH_MIXED,
				   SYNTH_LATE_GAP, SYNTH_REAL };
	size_t k, n = 0;
	uint64_t seed;

	for (k = 0; k < sizeof(scs) / sizeof(scs[0]); k++)
		for (seed = 1; seed <= 5; seed++)
			n += check_late(scs[k], seed, scs[k] == SYNTH_REAL);
	cr_assert_geq(n, 20, "only %zu late blocks checked", n);
}

Test(symbols, link_base)
{
	struct truth t;
	struct loaded l;

	synth("a", LINK_BASE, 7, 40, &t);
	build("a", "a", "a.elf", LINK_BASE, &t);
	load(&l, "a");
	cr_assert_eq(l.nskipped, 0, "%s", l.err.msg);
	check_funcs(&l, &t);
	check_fallbacks(&l, &t, "a.elf", elf_link("a.elf"));
	unload(&l);
	truth_free(&t);
}

/* The program linked at 0x400000, traced at a PIE base: relocated. */
Test(symbols, pie_base)
{
	struct truth tl, tp;
	struct loaded l;
	size_t i;

	synth("link", LINK_BASE, 11, 40, &tl);
	synth("pie", PIE_BASE, 11, 40, &tp);
	cr_assert_eq(tl.nfuncs, tp.nfuncs);
	for (i = 0; i < tl.nfuncs; i++) {
		cr_assert_eq(tl.funcs[i].entry - LINK_BASE,
			     tp.funcs[i].entry - PIE_BASE);
		cr_assert_str_eq(tl.funcs[i].name, tp.funcs[i].name);
	}
	build("pie", "pie", "link.elf", PIE_BASE, &tp);
	load(&l, "pie");
	cr_assert_eq(l.nskipped, 0, "%s", l.err.msg);
	check_funcs(&l, &tp);
	check_fallbacks(&l, &tp, "link.elf", elf_link("link.elf"));
	unload(&l);
	truth_free(&tl);
	truth_free(&tp);
}

Test(symbols, deleted_elf)
{
	struct truth t;
	struct loaded l;
	char path[300];

	synth("del", PIE_BASE, 3, 30, &t);
	build("del", "del", "del.elf", PIE_BASE, &t);
	snprintf(path, sizeof(path), "%s/del.elf", dir);
	cr_assert_eq(unlink(path), 0);
	load(&l, "del");
	cr_assert_eq(l.nskipped, 1);
	cr_assert_not_null(strstr(l.err.msg, path), "%s", l.err.msg);
	check_module_only(&l, &t, "del.elf", 0);
	unload(&l);
	truth_free(&t);
}

/* Another program's ELF in its place: its segment no longer matches. */
Test(symbols, replaced_elf)
{
	struct truth t, other;
	struct loaded l;
	char from[300], to[300];

	synth("rep", LINK_BASE, 5, 30, &t);
	build("rep", "rep", "rep.elf", LINK_BASE, &t);
	synth("other", LINK_BASE, 6, 60, &other);
	snprintf(from, sizeof(from), "%s/other.elf", dir);
	snprintf(to, sizeof(to), "%s/rep.elf", dir);
	cr_assert_eq(rename(from, to), 0);
	load(&l, "rep");
	cr_assert_eq(l.nskipped, 1);
	cr_assert_not_null(strstr(l.err.msg, to), "%s", l.err.msg);
	check_module_only(&l, &t, "rep.elf", 0);
	unload(&l);
	truth_free(&t);
	truth_free(&other);
}

/* The whole ELF file in memory, for patching. */
struct elfbuf {
	uint8_t *p;
	size_t n;
	char path[300];
};

static void elf_read(struct elfbuf *e, const char *name)
{
	FILE *fp;
	struct stat st;

	snprintf(e->path, sizeof(e->path), "%s/%s", dir, name);
	cr_assert_eq(stat(e->path, &st), 0);
	e->n = (size_t) st.st_size;
	e->p = malloc(e->n);
	cr_assert_not_null(e->p);
	fp = fopen(e->path, "rb");
	cr_assert_not_null(fp);
	cr_assert_eq(fread(e->p, 1, e->n, fp), e->n);
	fclose(fp);
}

static void elf_write(const struct elfbuf *e, size_t n)
{
	FILE *fp = fopen(e->path, "wb");

	cr_assert_not_null(fp);
	cr_assert_eq(fwrite(e->p, 1, n, fp), n);
	cr_assert_eq(fclose(fp), 0);
}

static Elf64_Shdr *elf_shdr(struct elfbuf *e, unsigned type)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *) e->p;
	Elf64_Shdr *sh = (Elf64_Shdr *) (e->p + eh->e_shoff);
	unsigned i;

	for (i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == type)
			return &sh[i];
	cr_assert_fail("no section of type %u", type);
	return NULL;
}

/* Symbol @i of the table (0 is the null symbol). */
static Elf64_Sym *elf_sym(struct elfbuf *e, unsigned i)
{
	Elf64_Shdr *sh = elf_shdr(e, SHT_SYMTAB);

	cr_assert_lt(i, sh->sh_size / sizeof(Elf64_Sym));
	return (Elf64_Sym *) (e->p + sh->sh_offset) + i;
}

/* A .dynsym-only file (the table's type changed) still gives names. */
Test(symbols, dynsym_only)
{
	struct truth t;
	struct loaded l;
	struct elfbuf e;

	synth("dyn", LINK_BASE, 9, 30, &t);
	build("dyn", "dyn", "dyn.elf", LINK_BASE, &t);
	elf_read(&e, "dyn.elf");
	elf_shdr(&e, SHT_SYMTAB)->sh_type = SHT_DYNSYM;
	elf_write(&e, e.n);
	load(&l, "dyn");
	cr_assert_eq(l.nskipped, 0, "%s", l.err.msg);
	check_funcs(&l, &t);
	check_fallbacks(&l, &t, "dyn.elf", elf_link("dyn.elf"));
	unload(&l);
	free(e.p);
	truth_free(&t);
}

/* strip(1) leaves no symbols at all: skipped, module names. */
Test(symbols, stripped)
{
	struct truth t;
	struct loaded l;
	char cmd[700];

	if (access("/usr/bin/strip", X_OK) != 0)
		cr_skip_test("no /usr/bin/strip");
	synth("str", LINK_BASE, 9, 30, &t);
	build("str", "str", "str.elf", LINK_BASE, &t);
	snprintf(cmd, sizeof(cmd), "/usr/bin/strip %s/str.elf 2>/dev/null",
		 dir);
	cr_assert_eq(system(cmd), 0);
	load(&l, "str");
	cr_assert_eq(l.nskipped, 1);
	cr_assert_not_null(strstr(l.err.msg, "str.elf"), "%s", l.err.msg);
	check_module_only(&l, &t, "str.elf", elf_link("str.elf"));
	unload(&l);
	truth_free(&t);
}

/* Several symbols at one address: global over weak over local, whatever
 * their order; a size-0 symbol reaches up to the next symbol. */
Test(symbols, duplicates_and_sizeless)
{
	struct truth t;
	struct loaded l;
	struct elfbuf e;
	char got[256], want[128], plus[160];
	const struct truth_func *fn;

	synth("dup", LINK_BASE, 13, 30, &t);
	build("dup", "dup", "dup.elf", LINK_BASE, &t);
	elf_read(&e, "dup.elf");
	/* ELF symbol i + 1 is truth function i. */
	elf_sym(&e, 2)->st_value = elf_sym(&e, 3)->st_value;
	elf_sym(&e, 2)->st_info = ELF64_ST_INFO(STB_WEAK, STT_FUNC);
	elf_sym(&e, 5)->st_value = elf_sym(&e, 4)->st_value;
	elf_sym(&e, 4)->st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC);
	elf_sym(&e, 7)->st_value = elf_sym(&e, 6)->st_value;
	elf_sym(&e, 7)->st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC);
	elf_sym(&e, 6)->st_info = ELF64_ST_INFO(STB_WEAK, STT_FUNC);
	elf_sym(&e, 9)->st_size = 0;
	elf_sym(&e, 10)->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
	elf_write(&e, e.n);
	load(&l, "dup");
	cr_assert_eq(l.nskipped, 0, "%s", l.err.msg);

	/* global (truth 2) beats weak (truth 1) at truth 2's entry */
	expect_name(t.funcs[2].name, want, sizeof(want));
	cr_assert_eq(name_of(&l, t.funcs[2].entry, got, sizeof(got)), 1);
	cr_assert_str_eq(got, want);
	/* global (truth 4) beats local (truth 3) */
	expect_name(t.funcs[4].name, want, sizeof(want));
	name_of(&l, t.funcs[3].entry, got, sizeof(got));
	cr_assert_str_eq(got, want);
	/* weak (truth 5) beats local (truth 6) */
	expect_name(t.funcs[5].name, want, sizeof(want));
	name_of(&l, t.funcs[5].entry, got, sizeof(got));
	cr_assert_str_eq(got, want);
	/* size 0 (truth 8): up to the next symbol, which is truth 10
	 * because truth 9 is no function any more */
	fn = &t.funcs[8];
	expect_name(fn->name, want, sizeof(want));
	cr_assert_eq(t.funcs[9].entry, fn->entry + fn->size);
	snprintf(plus, sizeof(plus), "%s+0x%llx", want,
		 U64(fn->size + t.funcs[9].size - 1));
	name_of(&l, t.funcs[10].entry - 1, got, sizeof(got));
	cr_assert_str_eq(got, plus);
	expect_name(t.funcs[10].name, want, sizeof(want));
	cr_assert_eq(name_of(&l, t.funcs[10].entry, got, sizeof(got)), 1);
	cr_assert_str_eq(got, want);
	unload(&l);
	free(e.p);
	truth_free(&t);
}

/* Resolve a spread of addresses; only checks termination and no crash. */
static void poke(const struct loaded *l, const struct truth *t)
{
	char got[64];
	size_t i;

	for (i = 0; i < t->nfuncs; i++) {
		got[0] = 'x';
		name_of(l, t->funcs[i].entry, got, sizeof(got));
		cr_assert_lt(strlen(got), sizeof(got));
		name_of(l, t->funcs[i].entry + 1, got, sizeof(got));
		cr_assert_lt(strlen(got), sizeof(got));
	}
}

static void load_any(struct loaded *l, const char *tag)
{
	load(l, tag);
	cr_assert_leq(l->nskipped, 1);
}

/* Targeted corruption of the symbol table: never a crash. */
Test(symbols, corrupt_elf)
{
	struct truth t;
	struct loaded l;
	struct elfbuf e, orig;
	Elf64_Ehdr *eh;
	Elf64_Shdr *sh;
	size_t k, cut;
	char got[16];

	synth("bad", LINK_BASE, 21, 30, &t);
	build("bad", "bad", "bad.elf", LINK_BASE, &t);
	elf_read(&orig, "bad.elf");
	e = orig;
	e.p = malloc(orig.n);
	cr_assert_not_null(e.p);

	for (k = 0; k < 12; k++) {
		memcpy(e.p, orig.p, orig.n);
		eh = (Elf64_Ehdr *) e.p;
		sh = elf_shdr(&e, SHT_SYMTAB);
		switch (k) {
		case 0: sh->sh_link = 99; break;
		case 1: sh->sh_link = 0; break;
		case 2: sh->sh_link = (Elf64_Word) (sh - (Elf64_Shdr *)
				(e.p + eh->e_shoff)); break;
		case 3: elf_shdr(&e, SHT_STRTAB)->sh_size = 3; break;
		case 4: elf_sym(&e, 1)->st_name = 0xfffffff0u;
			elf_sym(&e, 2)->st_name =
				(Elf64_Word) elf_shdr(&e, SHT_STRTAB)->sh_size;
			break;
		case 5: sh->sh_offset = 0xfffffffffff0ull; break;
		case 6: sh->sh_size = 0xfffffffffff0ull; break;
		case 7: sh->sh_entsize = 3; sh->sh_size = 7; break;
		case 8: eh->e_shoff = 0xffffffffffff0000ull; break;
		case 9: eh->e_shnum = 0xffff; break;
		case 10: eh->e_shstrndx = 0xfffe; break;
		case 11: /* the string table without its final NUL */
			elf_shdr(&e, SHT_STRTAB)->sh_size -= 1;
			break;
		}
		elf_write(&e, e.n);
		load_any(&l, "bad");
		poke(&l, &t);
		unload(&l);
	}

	/* Truncated: inside the headers, inside .text, after .text. */
	sh = elf_shdr(&orig, SHT_SYMTAB);
	for (cut = 0; cut < orig.n; cut += cut < 256 ? 17 : 509) {
		memcpy(e.p, orig.p, orig.n);
		elf_write(&e, cut);
		load_any(&l, "bad");
		if (cut < sh->sh_offset + sh->sh_size)
			cr_assert_eq(l.nskipped, 1, "cut at %zu", cut);
		poke(&l, &t);
		unload(&l);
	}

	/* Garbage of the same size. */
	for (k = 0; k < orig.n; k++)
		e.p[k] = (uint8_t) (k * 131 + 7);
	elf_write(&e, e.n);
	load_any(&l, "bad");
	cr_assert_eq(l.nskipped, 1);
	poke(&l, &t);
	unload(&l);

	/* A directory in the file's place. */
	cr_assert_eq(unlink(orig.path), 0);
	cr_assert_eq(mkdir(orig.path, 0700), 0);
	load_any(&l, "bad");
	cr_assert_eq(l.nskipped, 1);
	check_module_only(&l, &t, "bad.elf", 0);
	/* A tiny buffer is still NUL-terminated; size 0 writes nothing. */
	name_of(&l, t.funcs[0].entry, got, 4);
	cr_assert_str_eq(got, "bad");
	got[0] = 'z';
	name_of(&l, t.funcs[0].entry, got, 0);
	cr_assert_eq(got[0], 'z');
	unload(&l);

	free(e.p);
	free(orig.p);
	truth_free(&t);
}

/* Random bytes overwritten anywhere: never a crash. */
Test(symbols, fuzz)
{
	struct truth t;
	struct loaded l;
	struct elfbuf e, orig;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	unsigned it, k;

	synth("fz", LINK_BASE, 23, 20, &t);
	build("fz", "fz", "fz.elf", LINK_BASE, &t);
	elf_read(&orig, "fz.elf");
	e = orig;
	e.p = malloc(orig.n);
	cr_assert_not_null(e.p);
	for (it = 0; it < 300; it++) {
		memcpy(e.p, orig.p, orig.n);
		for (k = 0; k < 1 + it % 8; k++) {
			size_t at;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* half the hits on the headers and the tables */
			if (x & 1)
				at = (size_t) (x >> 8) % 0x100;
			else if (x & 2)
				at = orig.n - 1 - (size_t) (x >> 8) %
					(orig.n < 2048 ? orig.n : 2048);
			else
				at = (size_t) (x >> 8) % orig.n;
			e.p[at] = (uint8_t) (x >> 40);
		}
		elf_write(&e, e.n);
		load_any(&l, "fz");
		poke(&l, &t);
		unload(&l);
	}
	free(e.p);
	free(orig.p);
	truth_free(&t);
}

/* No symbols table at all: NULL is an empty table. */
Test(symbols, null_table)
{
	char got[32];

	cr_assert_eq(htr_syms__name(NULL, 0x1234, got, sizeof(got)), 0);
	cr_assert_str_eq(got, "0x1234");
	htr_syms__free(NULL);
}

/* A bundle copied elsewhere (the .htr and its ELF side by side, the
 * original ELF gone): names still resolve, from the copy next to the .htr;
 * and htr_syms__unreadable follows the file coming and going. */
Test(symbols, moved_bundle)
{
	struct truth t;
	struct loaded l;
	char cmd[1200], path[300];

	synth("mv", PIE_BASE, 9, 30, &t);
	build("mv", "mv", "mv.elf", PIE_BASE, &t);
	snprintf(cmd, sizeof(cmd), "mkdir %s/sub && mv %s/mv.htr %s/sub/ && "
		 "mv %s/mv.elf %s/sub/", dir, dir, dir, dir, dir);
	cr_assert_eq(system(cmd), 0);
	load(&l, "sub/mv");
	cr_assert_eq(l.nskipped, 0, "%s", l.err.msg);
	cr_assert_eq(htr_syms__unreadable(l.f, NULL), 0);
	check_funcs(&l, &t);
	snprintf(path, sizeof(path), "%s/sub/mv.elf", dir);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(htr_syms__unreadable(l.f, NULL), 1);
	unload(&l);
	truth_free(&t);
}

/* The value of function symbol @name in @path's .symtab (libelf), 0 if
 * none. */
static uint64_t symtab_value(const char *path, const char *name)
{
	struct htr_elf_func *c = NULL;
	uint64_t v = 0;
	long n, i;
	int fd = open(path, O_RDONLY);
	Elf *elf;

	cr_assert_geq(fd, 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert_not_null(elf);
	n = htr_syms__elf_funcs(elf, &c);
	for (i = 0; i < n; i++)
		if (!strcmp(c[i].name, name))
			v = c[i].value;
	free(c);
	elf_end(elf);
	close(fd);
	return v;
}

/* A .htr with no blocks whose image is @elf at its link addresses. */
static void image_only_htr(const char *elf_path, const char *out)
{
	struct htr_writer_meta m;
	struct htr_writer *w;
	struct htr_err err;
	GElf_Phdr ph;
	size_t nph, i;
	int fd = open(elf_path, O_RDONLY);
	Elf *elf;

	cr_assert_geq(fd, 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert(elf && elf_getphdrnum(elf, &nph) == 0);
	cr_assert_eq(htr_writer__open(&w, out, &err), 0, "%s", err.msg);
	for (i = 0; i < nph; i++)
		if (gelf_getphdr(elf, (int) i, &ph) && ph.p_type == PT_LOAD &&
		    (ph.p_flags & PF_X))
			cr_assert_eq(htr_writer__image(w, 1, ph.p_vaddr,
						       ph.p_offset,
						       ph.p_filesz, elf_path),
				     0);
	memset(&m, 0, sizeof(m));
	cr_assert_eq(htr_writer__commit(w, &m), 0);
	htr_writer__free(w);
	elf_end(elf);
	close(fd);
}

Test(symbols, dwarf_names_a_stripped_function)
{
	static const char src[] =
		"static __attribute__((noinline)) int helper(int x)\n"
		"{ return x * 3 + 1; }\n"
		"int main(int argc, char **argv)\n"
		"{ (void) argv; return helper(argc); }\n";
	char c_path[300], full[300], stripped[300], out[300], cmd[1400];
	char got[256];
	struct htr_file *f;
	struct htr_syms *syms;
	struct htr_err err;
	unsigned nskipped;
	uint64_t helper, main_addr;
	FILE *fp;

	if (system("command -v cc >/dev/null 2>&1 && "
		   "command -v objcopy >/dev/null 2>&1") != 0)
		cr_skip_test("no cc or objcopy");
	snprintf(c_path, sizeof(c_path), "%s/dw.c", dir);
	snprintf(full, sizeof(full), "%s/dw-full", dir);
	snprintf(stripped, sizeof(stripped), "%s/dw-stripped", dir);
	snprintf(out, sizeof(out), "%s/dw.htr", dir);
	fp = fopen(c_path, "w");
	cr_assert_not_null(fp);
	fputs(src, fp);
	fclose(fp);
	/* helper's symbol goes; its DWARF stays. */
	snprintf(cmd, sizeof(cmd), "cc -O1 -g -o '%s' '%s' && objcopy "
		 "--strip-symbol=helper '%s' '%s'", full, c_path, full,
		 stripped);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	helper = symtab_value(full, "helper");
	main_addr = symtab_value(full, "main");
	cr_assert_neq(helper, 0);
	cr_assert_eq(symtab_value(stripped, "helper"), 0);
	image_only_htr(stripped, out);
	cr_assert_eq(htr_file_open(&f, out, NULL), 0);
	cr_assert_eq(htr_syms__load(&syms, f, &nskipped, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(htr_syms__name(syms, main_addr, got, sizeof(got)), 1);
	cr_assert_str_eq(got, "main");
#ifdef HTR_HAVE_LIBDW
	cr_assert_eq(htr_syms__name(syms, helper, got, sizeof(got)), 1);
	cr_assert_str_eq(got, "helper", "from DWARF");
	cr_assert_eq(htr_syms__function(syms, helper + 2, got, sizeof(got)),
		     1);
	cr_assert_str_eq(got, "helper");
#else
	/* Without libdw the stripped function has no name of its own. */
	cr_assert_eq(htr_syms__name(syms, helper, got, sizeof(got)), 0);
#endif
	htr_syms__free(syms);
	htr_file_close(f);
}

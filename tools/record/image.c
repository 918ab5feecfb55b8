/*
 * The guest's code: which ELF file is mapped where (read from qemu's
 * /proc/PID/maps, whose addresses are the guest's when qemu puts the guest
 * at host address 0, as it does for x86-64 on x86-64), and every executed
 * instruction classified once with Zydis and cached by address.
 *
 * Modules are found lazily, at the first instruction that runs in one.  qemu
 * cannot run far ahead of us (it blocks on the log pipe), so a library is
 * still mapped when its first instruction is read here.
 */
#include "rec_int.h"

#include <Zydis/Zydis.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int ierr(struct rec_image *im, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(im->err, im->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int rec_image_init(struct rec_image *im, const struct rec_filter *f, size_t nf,
		   char *err, size_t errlen)
{
	ZydisDecoder *d;

	memset(im, 0, sizeof(*im));
	im->filters = f;
	im->nfilters = nf;
	im->err = err;
	im->errlen = errlen;
	d = malloc(sizeof(*d));
	im->capcache = 1u << 16;
	im->cache = calloc(im->capcache, sizeof(*im->cache));
	if (!d || !im->cache) {
		free(d);
		free(im->cache);
		return ierr(im, "out of memory");
	}
	ZydisDecoderInit(d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	im->zydis = d;
	return 0;
}

void rec_image_fini(struct rec_image *im)
{
	size_t i;

	for (i = 0; i < im->nmods; i++) {
		if (im->mods[i]->map)
			munmap((void *) im->mods[i]->map, im->mods[i]->mapsize);
		free(im->mods[i]->path);
		free(im->mods[i]->funcs);
		free(im->mods[i]);
	}
	free(im->mods);
	free(im->cache);
	free(im->zydis);
	memset(im, 0, sizeof(*im));
}

static int filter_matches(const struct rec_filter *f, const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!strcmp(f->module, path) || !strcmp(f->module, base))
		return 1;
	/* A relative path names the same file as its absolute form. */
	if (strchr(f->module, '/')) {
		char *rp = realpath(f->module, NULL);
		int same = rp && !strcmp(rp, path);

		free(rp);
		return same;
	}
	return !fnmatch(f->module, base, 0);
}

/* Map @path and read its program headers.  [@start, @end) maps file
 * offset @off: that fixes the bias (@want, the code being looked for,
 * tells which segment it is when two hold that page).  Returns the
 * module or NULL (not an ELF we can use: the caller ignores the
 * mapping). */
static struct rec_mod *load(struct rec_image *im, const char *path,
			    uint64_t start, uint64_t end, uint64_t off,
			    uint64_t want)
{
	struct rec_mod *m;
	const Elf64_Ehdr *eh;
	struct stat st;
	uint64_t lowest = UINT64_MAX;
	int fd, i, have_bias = 0;
	size_t k;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || (size_t) st.st_size < sizeof(*eh)) {
		close(fd);
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		close(fd);
		return NULL;
	}
	m->mapsize = (size_t) st.st_size;
	m->map = mmap(NULL, m->mapsize, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m->map == MAP_FAILED) {
		free(m);
		return NULL;
	}
	eh = (const Elf64_Ehdr *) m->map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != EM_X86_64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    eh->e_phoff + (uint64_t) eh->e_phnum * sizeof(Elf64_Phdr) >
	    m->mapsize)
		goto bad;
	for (i = 0; i < eh->e_phnum && m->nsegs < 16; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)
			(m->map + eh->e_phoff) + i;
		struct rec_seg *s;

		if (ph->p_type != PT_LOAD)
			continue;
		s = &m->segs[m->nsegs++];
		s->vaddr = ph->p_vaddr;
		s->memsz = ph->p_memsz;
		s->offset = ph->p_offset;
		s->filesz = ph->p_filesz;
		s->flags = ph->p_flags;
		if (ph->p_vaddr < lowest)
			lowest = ph->p_vaddr;
		/* The segment mapped at [@start, @end) from file offset
		 * @off.  lld starts a segment in the page where the previous
		 * one ends, one page higher in memory, so two segments may
		 * hold @off's page: the one that puts the wanted code @want
		 * (when the mapping holds it) in an executable segment wins,
		 * then one starting on @off's page, then the first holding
		 * @off (the loader maps each segment from its offset's
		 * page). */
		if (off >= (ph->p_offset & ~0xfffull) &&
		    off < ph->p_offset + ph->p_filesz) {
			uint64_t bias = start -
					(ph->p_vaddr - ph->p_offset + off);
			int score = 1 + ((ph->p_offset & ~0xfffull) == off) * 2;

			if (want >= start && want < end &&
			    (ph->p_flags & PF_X) && want - bias >= ph->p_vaddr &&
			    want - bias < ph->p_vaddr + ph->p_filesz)
				score += 4;
			if (score > have_bias) {
				m->bias = bias;
				have_bias = score;
			}
		}
	}
	if (!have_bias || lowest == UINT64_MAX)
		goto bad;
	m->base = lowest + m->bias;
	m->end = 0;
	for (k = 0; k < m->nsegs; k++)
		if (m->segs[k].vaddr + m->segs[k].memsz + m->bias > m->end)
			m->end = m->segs[k].vaddr + m->segs[k].memsz + m->bias;
	m->lo = UINT64_MAX;
	for (k = 0; k < m->nsegs; k++) {
		const struct rec_seg *s = &m->segs[k];

		if (!(s->flags & PF_X))
			continue;
		if (s->vaddr + m->bias < m->lo)
			m->lo = s->vaddr + m->bias;
		if (s->vaddr + s->memsz + m->bias > m->hi)
			m->hi = s->vaddr + s->memsz + m->bias;
	}
	if (m->lo >= m->hi)
		goto bad;
	m->path = strdup(path);
	if (!m->path)
		goto bad;
	for (k = 0; k < im->nfilters; k++)
		if (im->filters[k].module &&
		    filter_matches(&im->filters[k], path))
			m->filtered = 1;
	return m;
bad:
	munmap((void *) m->map, m->mapsize);
	free(m);
	return NULL;
}

/* A later mapping of a module already registered (its read-only data,
 * RELRO): its file offset may lie in two segments' pages, so it cannot
 * tell the bias; the module's first (lowest) mapping did. */
static int part_of(const struct rec_image *im, const char *file,
		   uint64_t addr)
{
	size_t i;

	for (i = 0; i < im->nmods; i++)
		if (addr >= im->mods[i]->base && addr < im->mods[i]->end &&
		    !strcmp(im->mods[i]->path, file))
			return 1;
	return 0;
}

static int known(const struct rec_image *im, uint64_t addr)
{
	size_t i;

	for (i = 0; i < im->nmods; i++)
		if (addr >= im->mods[i]->lo && addr < im->mods[i]->hi)
			return 1;
	return 0;
}

int rec_image_scan(struct rec_image *im, uint64_t want, uint64_t now)
{
	char path[64], line[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int) im->pid);
	fp = fopen(path, "r");
	if (!fp)
		return ierr(im, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), fp)) {
		unsigned long long start, end, off;
		char *file = strchr(line, '/'), perms[8];
		struct rec_mod *m, **mods;

		if (!file || sscanf(line, "%llx-%llx %7s %llx", &start, &end,
				    perms, &off) != 4)
			continue;
		/* qemu maps guest code without host execute permission; what
		 * the host executes is qemu itself and its libraries. */
		if (strchr(perms, 'x'))
			continue;
		file[strcspn(file, "\n")] = 0;
		if (strstr(file, " (deleted)"))
			continue;
		if (known(im, start) || known(im, end - 1) ||
		    part_of(im, file, start))
			continue;
		/* Only the mapping the wanted address lies in, and PROG's:
		 * the other files are qemu's own, or not run yet. */
		if (!(want >= start && want < end) &&
		    !(im->exe && !strcmp(file, im->exe)))
			continue;
		m = load(im, file, start, end, off, want);
		if (!m)
			continue;
		/* Several mappings of one file give the same module. */
		if (known(im, m->lo)) {
			munmap((void *) m->map, m->mapsize);
			free(m->path);
			free(m);
			continue;
		}
		mods = realloc(im->mods, (im->nmods + 1) * sizeof(*mods));
		if (!mods) {
			fclose(fp);
			return ierr(im, "out of memory");
		}
		im->mods = mods;
		m->seen_at = now;
		im->mods[im->nmods++] = m;
	}
	fclose(fp);
	return 0;
}

struct rec_mod *rec_image_mod(struct rec_image *im, uint64_t pc)
{
	size_t i;

	if (im->last < im->nmods && pc >= im->mods[im->last]->lo &&
	    pc < im->mods[im->last]->hi)
		return im->mods[im->last];
	for (i = 0; i < im->nmods; i++)
		if (pc >= im->mods[i]->lo && pc < im->mods[i]->hi) {
			im->last = i;
			return im->mods[i];
		}
	return NULL;
}

/* The truth's rule for jumps that leave frames (tools/record/README.md)
 * needs functions: read from the mapped file's section headers, checked
 * against its size, apart from libhtr's reader on purpose. */
static const Elf64_Shdr *shdr_of(const struct rec_mod *m, unsigned i)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *) m->map;

	if (eh->e_shentsize != sizeof(Elf64_Shdr) || i >= eh->e_shnum ||
	    eh->e_shoff + ((uint64_t) i + 1) * sizeof(Elf64_Shdr) > m->mapsize)
		return NULL;
	return (const Elf64_Shdr *) (m->map + eh->e_shoff) + i;
}

static int cmp_rec_func(const void *a, const void *b)
{
	const struct rec_func *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* A function symbol by name. */
struct named {
	const char *name;
	uint64_t value;
};

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const struct named *) a)->name,
		      ((const struct named *) b)->name);
}

/* The split-off part's FUNC ("f.cold", "f.part.0" -> "f"), among @byname
 * (@n, sorted by name); @own if @name is no such part. */
static uint64_t parent_func(const struct named *byname, size_t n,
			    const char *name, uint64_t own)
{
	const char *c = strstr(name, ".cold"), *p = strstr(name, ".part.");
	struct named key, *hit;
	char buf[512];
	size_t len;

	if (p && (!c || p < c))
		c = p;
	if (!c || c == name || (len = (size_t) (c - name)) >= sizeof(buf))
		return own;
	/* (FUNC.cold is only jumped to: read_funcs() gives it FUNC's
	 * entry.) */
	memcpy(buf, name, len);
	buf[len] = '\0';
	key.name = buf;
	hit = bsearch(&key, byname, n, sizeof(*byname), cmp_named);
	return hit ? hit->value : own;
}

static void read_funcs(struct rec_mod *m)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *) m->map;
	const Elf64_Shdr *tab = NULL, *strs, *sh;
	const Elf64_Sym *syms;
	struct named *byname;
	const char *str;
	size_t n, i, k = 0, nb = 0;
	unsigned j;

	m->funcs_read = 1;
	/* .symtab if there is one (local and split-off functions), else
	 * .dynsym */
	for (j = 0; j < eh->e_shnum && (sh = shdr_of(m, j)); j++)
		if (sh->sh_type == SHT_SYMTAB ||
		    (sh->sh_type == SHT_DYNSYM && !tab))
			tab = sh;
	if (!tab || !(strs = shdr_of(m, tab->sh_link)) ||
	    tab->sh_offset + tab->sh_size > m->mapsize ||
	    strs->sh_offset + strs->sh_size > m->mapsize || !strs->sh_size ||
	    tab->sh_entsize != sizeof(Elf64_Sym))
		return;
	syms = (const Elf64_Sym *) (m->map + tab->sh_offset);
	n = tab->sh_size / sizeof(*syms);
	str = (const char *) m->map + strs->sh_offset;
	if (str[strs->sh_size - 1] != '\0')
		return;
	m->funcs = calloc(n ? n : 1, sizeof(*m->funcs));
	byname = calloc(n ? n : 1, sizeof(*byname));
	if (!m->funcs || !byname) {
		free(m->funcs);
		m->funcs = NULL;
		free(byname);
		return;
	}
	for (i = 0; i < n; i++)
		if (ELF64_ST_TYPE(syms[i].st_info) == STT_FUNC &&
		    syms[i].st_name < strs->sh_size) {
			byname[nb].name = str + syms[i].st_name;
			byname[nb++].value = syms[i].st_value;
		}
	qsort(byname, nb, sizeof(*byname), cmp_named);
	for (i = 0; i < n; i++) {
		const Elf64_Sym *y = &syms[i];

		if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || !y->st_size ||
		    y->st_shndx == SHN_UNDEF || y->st_name >= strs->sh_size)
			continue;
		m->funcs[k].start = y->st_value;
		m->funcs[k].end = y->st_value + y->st_size;
		m->funcs[k].func = parent_func(byname, nb, str + y->st_name,
					       y->st_value);
		m->funcs[k].entry = strstr(str + y->st_name, ".cold") ?
				    m->funcs[k].func : y->st_value;
		k++;
	}
	free(byname);
	m->nfuncs = k;
	qsort(m->funcs, k, sizeof(*m->funcs), cmp_rec_func);
}

int rec_image_func(struct rec_image *im, uint64_t pc, uint64_t *start,
		   uint64_t *func)
{
	struct rec_mod *m = rec_image_mod(im, pc);
	size_t lo = 0, hi, i;
	uint64_t a;

	if (!m)
		return 0;
	if (!m->funcs_read)
		read_funcs(m);
	a = pc - m->bias;
	hi = m->nfuncs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->funcs[mid].start <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; i-- > 0 && lo - i <= 8;)
		if (a < m->funcs[i].end) {
			*start = m->funcs[i].entry + m->bias;
			*func = m->funcs[i].func + m->bias;
			return 1;
		}
	return 0;
}

/* The file bytes behind runtime address @pc, and how many there are. */
static const uint8_t *code_at(const struct rec_mod *m, uint64_t pc,
			      size_t *avail)
{
	uint64_t va = pc - m->bias;
	unsigned i;

	for (i = 0; i < m->nsegs; i++) {
		const struct rec_seg *s = &m->segs[i];

		if (va >= s->vaddr && va < s->vaddr + s->filesz &&
		    s->offset + s->filesz <= m->mapsize) {
			*avail = (size_t) (s->vaddr + s->filesz - va);
			return m->map + s->offset + (va - s->vaddr);
		}
	}
	return NULL;
}

static int is_traced(const struct rec_image *im, const struct rec_mod *m,
		     uint64_t pc)
{
	size_t i;

	if (!im->nfilters || m->filtered)
		return 1;
	for (i = 0; i < im->nfilters; i++)
		if (!im->filters[i].module && pc >= im->filters[i].start &&
		    pc < im->filters[i].end)
			return 1;
	return 0;
}

static void classify(struct rec_insn *in, const ZydisDecodedInstruction *z)
{
	int far = z->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
	int rel = z->raw.imm[0].is_relative;

	in->len = z->length;
	in->kind = RK_OTHER;
	switch (z->mnemonic) {
	case ZYDIS_MNEMONIC_JMP:
		in->kind = far ? RK_FAR : rel ? RK_JMP : RK_IJMP;
		break;
	case ZYDIS_MNEMONIC_CALL:
		in->kind = far ? RK_FAR : rel ? RK_CALL : RK_ICALL;
		break;
	case ZYDIS_MNEMONIC_RET:
		in->kind = far ? RK_FAR : RK_RET;
		break;
	case ZYDIS_MNEMONIC_IRET:
	case ZYDIS_MNEMONIC_IRETD:
	case ZYDIS_MNEMONIC_IRETQ:
		in->kind = RK_FAR;
		break;
	case ZYDIS_MNEMONIC_SYSCALL:
	case ZYDIS_MNEMONIC_SYSENTER:
	case ZYDIS_MNEMONIC_INT:
	case ZYDIS_MNEMONIC_INT1:
	case ZYDIS_MNEMONIC_INT3:
	case ZYDIS_MNEMONIC_INTO:
		in->kind = RK_SYSCALL;
		break;
	case ZYDIS_MNEMONIC_JCXZ:
	case ZYDIS_MNEMONIC_JECXZ:
	case ZYDIS_MNEMONIC_JRCXZ:
	case ZYDIS_MNEMONIC_LOOP:
	case ZYDIS_MNEMONIC_LOOPE:
	case ZYDIS_MNEMONIC_LOOPNE:
		in->kind = RK_COND;
		break;
	default:
		if (z->meta.category == ZYDIS_CATEGORY_COND_BR)
			in->kind = RK_COND;
		break;
	}
	if (rel && (in->kind == RK_JMP || in->kind == RK_CALL ||
		    in->kind == RK_COND))
		in->target = in->pc + in->len + (uint64_t) z->raw.imm[0].value.s;
	/* qemu runs each iteration of a rep-prefixed string instruction as
	 * its own block, logging the same address again: one instruction. */
	in->rep = in->kind == RK_OTHER &&
		  (z->attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE |
				    ZYDIS_ATTRIB_HAS_REPNE)) != 0;
}

static size_t slot(const struct rec_image *im, uint64_t pc)
{
	size_t h = (size_t) ((pc * 0x9e3779b97f4a7c15ull) >> 20);

	h &= im->capcache - 1;
	while (im->cache[h].len && im->cache[h].pc != pc)
		h = (h + 1) & (im->capcache - 1);
	return h;
}

static int grow(struct rec_image *im)
{
	struct rec_insn *old = im->cache;
	size_t i, n = im->capcache;

	im->cache = calloc(n * 2, sizeof(*im->cache));
	if (!im->cache) {
		im->cache = old;
		return ierr(im, "out of memory");
	}
	im->capcache = n * 2;
	for (i = 0; i < n; i++)
		if (old[i].len)
			im->cache[slot(im, old[i].pc)] = old[i];
	free(old);
	return 0;
}

const struct rec_insn *rec_image_insn(struct rec_image *im, uint64_t pc,
				      uint64_t now)
{
	ZydisDecodedInstruction z;
	ZydisDecoderContext zc;
	struct rec_insn *in;
	struct rec_mod *m;
	const uint8_t *code;
	size_t h = slot(im, pc), avail = 0;

	if (im->cache[h].len)
		return &im->cache[h];
	m = rec_image_mod(im, pc);
	if (!m) {
		if (rec_image_scan(im, pc, now) < 0)
			return NULL;
		m = rec_image_mod(im, pc);
		if (!m) {
			ierr(im, "code at %#llx is in no ELF file (JIT code or "
			     "a vanished mapping cannot be recorded)",
			     (unsigned long long) pc);
			return NULL;
		}
	}
	code = code_at(m, pc, &avail);
	if (!code) {
		ierr(im, "%s: no file bytes behind %#llx", m->path,
		     (unsigned long long) pc);
		return NULL;
	}
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(im->zydis, &zc, code,
							avail < 15 ? avail : 15,
							&z))) {
		ierr(im, "%s: cannot decode the instruction at %#llx", m->path,
		     (unsigned long long) pc);
		return NULL;
	}
	if ((im->ncache + 1) * 2 > im->capcache) {
		if (grow(im) < 0)
			return NULL;
		h = slot(im, pc);
	}
	in = &im->cache[h];
	memset(in, 0, sizeof(*in));
	in->pc = pc;
	classify(in, &z);
	in->traced = (uint8_t) is_traced(im, m, pc);
	im->ncache++;
	return in;
}

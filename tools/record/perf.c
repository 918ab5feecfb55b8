/*
 * perf.data writer: the file `perf record -e intel_pt//u --per-thread`
 * writes, or with --cpus N the one `perf record -e intel_pt//u -a` writes
 * on an N-CPU machine, around the traces the recorder made (see README.md,
 * "perf.data").
 *
 * Layout (perf's tools/perf/Documentation/perf.data-file-format.txt):
 *
 *   header      "PERFILE2", sizes, the attrs and data sections, feature bits
 *   ids         the event ids of each attr (one per thread, per-thread mode;
 *               one per CPU, CPU-wide)
 *   attrs       intel_pt//u (the PMU's dynamic type) and dummy:u (sideband)
 *   data        AUXTRACE_INFO, TIME_CONV, COMM, MMAP2 per executable
 *               segment of every module, FORK/COMM of the other threads,
 *               ITRACE_START, FINISHED_ROUND, AUXTRACE + the PT bytes of
 *               each thread (cpu -1, its tid), AUX, EXIT, FINISHED_ROUND;
 *               CPU-wide: AUXTRACE per CPU (that cpu, tid -1), then
 *               ITRACE_START and SWITCH_CPU_WIDE records in time order
 *   features    a section table, then build-ids, hostname, osrelease,
 *               version, arch, nr_cpus, cpudesc, cpuid, total_mem,
 *               cmdline, event_desc, pmu_mappings, auxtrace (the index), clock_data
 *
 * Everything is little-endian (x86-64 only, like the recorder).  The
 * modelled TSC runs at the nominal frequency of the CPU the file names (1.9
 * GHz); the timing words convert it to perf time as a kernel would (see
 * struct tconv), and every sideband record's time is converted with them.
 */
#include "rec_int.h"

#include <elf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* perf's own record types (tools/lib/perf/include/perf/event.h); the
 * kernel's end at 64. */
enum {
	UREC_FINISHED_ROUND = 68,
	UREC_AUXTRACE_INFO = 70,
	UREC_AUXTRACE = 71,
	UREC_TIME_CONV = 79,
};

/* HEADER_* feature bits (tools/perf/util/header.h). */
enum {
	FEAT_BUILD_ID = 2,
	FEAT_HOSTNAME = 3,
	FEAT_OSRELEASE = 4,
	FEAT_VERSION = 5,
	FEAT_ARCH = 6,
	FEAT_NRCPUS = 7,
	FEAT_CPUDESC = 8,
	FEAT_CPUID = 9,
	FEAT_TOTAL_MEM = 10,
	FEAT_CMDLINE = 11,
	FEAT_EVENT_DESC = 12,
	FEAT_PMU_MAPPINGS = 16,
	FEAT_AUXTRACE = 18,
	FEAT_CLOCK_DATA = 29,
	FEAT_BITS = 256,
};

/* The intel_pt PMU as a Kaby Lake's /sys/bus/event_source/devices/intel_pt
 * describes it: its dynamic type and its format bits (config). */
#define PT_PMU_TYPE 8u
#define PT_CFG_PT (1ull << 0)
#define PT_CFG_CYC (1ull << 1)
#define PT_CFG_MTC (1ull << 9)
#define PT_CFG_TSC (1ull << 10)
#define PT_CFG_NORETCOMP (1ull << 11)
#define PT_CFG_BRANCH (1ull << 13)
#define PT_CFG_MTC_PERIOD (0xfull << 14)
#define PT_CFG_PSB_PERIOD_SHIFT 24

/* AUXTRACE_INFO's type for Intel PT, and its private words
 * (tools/perf/util/intel-pt.h). */
#define AUXTRACE_INTEL_PT 1u
enum {
	PRIV_PMU_TYPE,
	PRIV_TIME_SHIFT,
	PRIV_TIME_MULT,
	PRIV_TIME_ZERO,
	PRIV_CAP_USER_TIME_ZERO,
	PRIV_TSC_BIT,
	PRIV_NORETCOMP_BIT,
	PRIV_HAVE_SCHED_SWITCH,
	PRIV_SNAPSHOT_MODE,
	PRIV_PER_CPU_MMAPS,
	PRIV_MTC_BIT,
	PRIV_MTC_FREQ_BITS,
	PRIV_TSC_CTC_N,
	PRIV_TSC_CTC_D,
	PRIV_CYC_BIT,
	PRIV_MAX_NONTURBO_RATIO,
	PRIV_FILTER_STR_LEN,
	PRIV_MAX
};

/* A real CPU with Intel PT (Kaby Lake R, family 6 model 142 stepping 10):
 * perf's decoder applies no erratum workaround to it, nor does libipt. */
#define CPUID_STR "GenuineIntel,6,142,10"
#define CPUDESC_STR "Intel(R) Core(TM) i7-8650U CPU @ 1.90GHz"
/* The modelled TSC runs at that CPU's nominal 1.9 GHz; perf derives the CBR
 * scale from the ratio (TSC frequency / 100 MHz). */
#define TSC_KHZ 1900000u
#define MAX_NONTURBO_RATIO (TSC_KHZ / 100000u)
/* perf time (the kernel's sched_clock, ns) when the TSC read 0: a machine
 * up for an hour or so.  Not a round number, so that a reader that ignores
 * it, or applies it twice, shows. */
#define TIME_ZERO 3612345678901ull

/* The attrs are written as perf 6.1 knows them (PERF_ATTR_SIZE_VER7):
 * a newer linux/perf_event.h must not make perf reject the file. */
#define ATTR_SIZE 128u
#define NAME_ALIGN 64u
#define SAMPLE_TYPE (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | \
		     PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER)

/* ------------------------------------------------------------------ */
/* a growing little-endian buffer */

struct buf {
	uint8_t *p;
	size_t n, cap;
	int oom;
};

static void put(struct buf *b, const void *v, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *p;

		while (cap < b->n + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, v, n);
	b->n += n;
}

static void u8(struct buf *b, uint8_t v) { put(b, &v, 1); }
static void u16(struct buf *b, uint16_t v) { put(b, &v, 2); }
static void u32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct buf *b, uint64_t v) { put(b, &v, 8); }

static void zeros(struct buf *b, size_t n)
{
	static const uint8_t z[64];

	while (n) {
		size_t k = n < sizeof(z) ? n : sizeof(z);

		put(b, z, k);
		n -= k;
	}
}

static void align(struct buf *b, size_t a)
{
	zeros(b, (a - b->n % a) % a);
}

/* perf's header strings: u32 length (NUL included, padded to 64), the
 * bytes, zeros. */
static void str(struct buf *b, const char *s)
{
	size_t n = strlen(s) + 1, len = (n + NAME_ALIGN - 1) / NAME_ALIGN *
		   NAME_ALIGN;

	u32(b, (uint32_t) len);
	put(b, s, n);
	zeros(b, len - n);
}

/* A record's header; its size is patched by end(). */
static size_t begin(struct buf *b, uint32_t type, uint16_t misc)
{
	size_t at = b->n;

	u32(b, type);
	u16(b, misc);
	u16(b, 0);
	return at;
}

static void end(struct buf *b, size_t at)
{
	uint16_t size = (uint16_t) (b->n - at);

	if (!b->oom)
		memcpy(b->p + at + 6, &size, 2);
}

/* ------------------------------------------------------------------ */
/* time */

/* TSC to perf time, as the kernel publishes it in the perf mmap page
 * (time_shift, time_mult, time_zero) and perf applies it:
 * ns = time_zero + (tsc >> shift) * mult + ((tsc & (2^shift - 1)) * mult
 * >> shift). */
struct tconv {
	uint64_t shift, mult, zero;
};

/* The kernel's cyc2ns scale for a TSC of @khz: the largest shift whose
 * multiplier (ns per tick << shift, rounded) fits 32 bits, at most 31
 * (the mmap page's documented bound; a shift of 32 becomes 31 with half
 * the multiplier). */
static void tconv_init(struct tconv *tc, uint64_t khz, uint64_t zero)
{
	uint64_t shift = 32, mult = 0;

	for (; shift > 0; shift--) {
		mult = ((1000000ull << shift) + khz / 2) / khz;
		if (mult >> 32 == 0)
			break;
	}
	if (shift == 32) {
		shift = 31;
		mult >>= 1;
	}
	tc->shift = shift;
	tc->mult = mult;
	tc->zero = zero;
}

static uint64_t tconv_ns(const struct tconv *tc, uint64_t tsc)
{
	uint64_t quot = tsc >> tc->shift;
	uint64_t rem = tsc & ((1ull << tc->shift) - 1);

	return tc->zero + quot * tc->mult + ((rem * tc->mult) >> tc->shift);
}

/* sample_id_all's trailer for SAMPLE_TYPE: pid/tid, time, cpu, id.  @tsc
 * is the modelled clock; the record says perf time. */
static void sample_id(struct buf *b, const struct tconv *tc, uint32_t pid,
		      uint32_t tid, uint64_t tsc, uint32_t cpu, uint64_t id)
{
	u32(b, pid);
	u32(b, tid);
	u64(b, tconv_ns(tc, tsc));
	u32(b, cpu);
	u32(b, 0);
	u64(b, id);
}

/* ------------------------------------------------------------------ */
/* modules */

/* The GNU build-id of the ELF file @m maps, or 0 bytes. */
static size_t build_id(const struct rec_mod *m, uint8_t id[20])
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *) m->map;
	int i;

	for (i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)
			(m->map + eh->e_phoff) + i;
		uint64_t off, endp;

		if (ph->p_type != PT_NOTE || ph->p_offset > m->mapsize ||
		    ph->p_filesz > m->mapsize - ph->p_offset)
			continue;
		off = ph->p_offset;
		endp = off + ph->p_filesz;
		while (off + sizeof(Elf64_Nhdr) <= endp) {
			const Elf64_Nhdr *nh = (const Elf64_Nhdr *)
				(m->map + off);
			uint64_t name = off + sizeof(*nh);
			uint64_t desc = name + ((nh->n_namesz + 3ull) & ~3ull);
			uint64_t next = desc + ((nh->n_descsz + 3ull) & ~3ull);

			if (next > endp)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(m->map + name, "GNU", 4) &&
			    nh->n_descsz > 0 && nh->n_descsz <= 20) {
				memcpy(id, m->map + desc, nh->n_descsz);
				return nh->n_descsz;
			}
			off = next;
		}
	}
	return 0;
}

/* The executable segments of @m as the kernel maps them: page-aligned
 * start, length and file offset. */
struct xseg {
	uint64_t addr, len, pgoff;
	uint64_t off, size;     /* the segment itself, in file offsets */
};

static unsigned xsegs(const struct rec_mod *m, struct xseg *x)
{
	unsigned i, n = 0;

	for (i = 0; i < m->nsegs; i++) {
		const struct rec_seg *s = &m->segs[i];
		uint64_t va = s->vaddr + m->bias;

		if (!(s->flags & PF_X))
			continue;
		x[n].addr = va & ~0xfffull;
		x[n].len = ((va + s->memsz + 0xfff) & ~0xfffull) - x[n].addr;
		x[n].pgoff = s->offset & ~0xfffull;
		x[n].off = s->offset;
		x[n].size = s->memsz;
		n++;
	}
	return n;
}

/* The filter string perf record would have stored for the recorder's
 * --filter options: kernel syntax, file offsets of the traced code. */
static char *filter_string(const struct rec_ctx *c)
{
	struct buf b = { 0 };
	size_t i, k;
	char one[4096 + 64];

	for (i = 0; i < c->im.nmods; i++) {
		const struct rec_mod *m = c->im.mods[i];
		struct xseg x[16];
		unsigned nx = xsegs(m, x), j;

		for (j = 0; j < nx; j++) {
			uint64_t lo = x[j].addr + (x[j].off - x[j].pgoff);
			uint64_t hi = lo + x[j].size;

			for (k = 0; k < c->o->nfilters; k++) {
				const struct rec_filter *f = &c->o->filters[k];
				uint64_t a = lo, e = hi;

				if (f->module && !m->filtered)
					continue;
				if (!f->module) {
					a = f->start > lo ? f->start : lo;
					e = f->end < hi ? f->end : hi;
					if (a >= e)
						continue;
				}
				snprintf(one, sizeof(one), "%sfilter %#llx/%#llx@%s",
					 b.n ? "," : "",
					 (unsigned long long) (a - lo + x[j].off),
					 (unsigned long long) (e - a), m->path);
				put(&b, one, strlen(one));
				if (f->module)
					break;  /* one entry per segment */
			}
		}
	}
	u8(&b, 0);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return (char *) b.p;
}

/* ------------------------------------------------------------------ */
/* the file */

/* Event ids: intel_pt//u 1..n, dummy:u n+1..2n, one per thread
 * (per-thread mode) or per CPU (CPU-wide), as perf opens the events. */
static size_t nevents(const struct rec_ctx *c, size_t nth)
{
	return c->sched.n ? c->sched.n : nth;
}

static uint64_t pt_id(size_t k)
{
	return 1 + k;
}

static uint64_t dummy_id(size_t n, size_t k)
{
	return n + 1 + k;
}

/* The tid of thread index @idx (the scheduler's), 0 for the idle task. */
static uint32_t task_tid(const struct rec_ctx *c, int32_t idx)
{
	int real;

	return idx < 0 ? 0 : (uint32_t) rec_tid(c, (unsigned) idx, &real);
}

static uint64_t psb_period_bits(uint64_t bytes)
{
	/* psb_period=N means 2^(N+11) bytes; the nearest at or below. */
	unsigned n = 0;

	while (n < 15 && (2048ull << (n + 1)) <= bytes)
		n++;
	return (uint64_t) n << PT_CFG_PSB_PERIOD_SHIFT;
}

static void attr_bytes(struct buf *b, const struct perf_event_attr *a)
{
	uint8_t raw[ATTR_SIZE];

	memset(raw, 0, sizeof(raw));
	memcpy(raw, a, sizeof(*a) < ATTR_SIZE ? sizeof(*a) : ATTR_SIZE);
	put(b, raw, ATTR_SIZE);
}

static void make_attrs(const struct rec_ctx *c, struct perf_event_attr *pt,
		       struct perf_event_attr *dummy)
{
	memset(pt, 0, sizeof(*pt));
	pt->type = PT_PMU_TYPE;
	pt->size = ATTR_SIZE;
	pt->config = PT_CFG_PT | PT_CFG_BRANCH | PT_CFG_TSC |
		     psb_period_bits(c->o->psb_period) |
		     (c->o->no_ret_compression ? PT_CFG_NORETCOMP : 0);
	pt->sample_period = 1;
	pt->sample_type = SAMPLE_TYPE;
	pt->disabled = 1;
	pt->enable_on_exec = 1;
	pt->exclude_kernel = 1;
	pt->exclude_hv = 1;
	pt->sample_id_all = 1;

	memset(dummy, 0, sizeof(*dummy));
	dummy->type = PERF_TYPE_SOFTWARE;
	dummy->size = ATTR_SIZE;
	dummy->config = PERF_COUNT_SW_DUMMY;
	dummy->sample_period = 1;
	dummy->sample_type = SAMPLE_TYPE;
	dummy->disabled = 1;
	dummy->enable_on_exec = 1;
	dummy->exclude_kernel = 1;
	dummy->exclude_hv = 1;
	dummy->mmap = 1;
	dummy->comm = 1;
	dummy->task = 1;
	dummy->mmap2 = 1;
	dummy->comm_exec = 1;
	dummy->sample_id_all = 1;
	dummy->build_id = 1;
	/* CPU-wide: perf asks for context-switch records on its tracking
	 * event (record_switch_events) and sets have_sched_switch to 3. */
	dummy->context_switch = c->sched.n ? 1 : 0;
}

struct out {
	FILE *fp;
	uint64_t off;
	int err;
};

static void emit(struct out *o, const void *p, size_t n)
{
	if (o->err)
		return;
	if (n && fwrite(p, 1, n, o->fp) != n)
		o->err = errno ? errno : EIO;
	o->off += n;
}

/* End the records in @b with a round (perf's FINISHED_ROUND: what
 * came before may be sorted) and write them. */
static void emit_round(struct out *o, struct buf *b)
{
	end(b, begin(b, UREC_FINISHED_ROUND, 0));
	if (b->oom)
		o->err = ENOMEM;
	else
		emit(o, b->p, b->n);
}

/* Copy @size bytes from @off of @path to the output. */
static void emit_range(struct out *o, const char *path, uint64_t off,
		       uint64_t size)
{
	FILE *in = fopen(path, "rb");
	uint8_t chunk[1 << 16];
	uint64_t left = size;

	if (!in) {
		o->err = errno;
		return;
	}
	if (off && fseeko(in, (off_t) off, SEEK_SET) != 0)
		o->err = errno ? errno : EIO;
	while (left && !o->err) {
		size_t k = left < sizeof(chunk) ? (size_t) left : sizeof(chunk);

		if (fread(chunk, 1, k, in) != k) {
			o->err = EIO;
			break;
		}
		emit(o, chunk, k);
		left -= k;
	}
	fclose(in);
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t) st.st_size : 0;
}

/* A thread's trace: its file, or (--ring) the pieces of its segments. */
static uint64_t trace_size(const struct rec_perf_thread *t)
{
	uint64_t n = 0;
	size_t i;

	if (!t->pieces)
		return file_size(t->pt_path);
	for (i = 0; i < t->npieces; i++)
		n += t->pieces[i].size;
	return n;
}

/* Copy the thread's trace after its AUXTRACE record, padded to 8 bytes
 * with PAD packets (zeros), as perf record does. */
static void emit_trace(struct out *o, const struct rec_perf_thread *t,
		       uint64_t size)
{
	static const uint8_t pad[8];
	size_t i;

	if (!t->pieces)
		emit_range(o, t->pt_path, 0, size);
	for (i = 0; t->pieces && i < t->npieces; i++)
		emit_range(o, t->pieces[i].path, t->pieces[i].off,
			   t->pieces[i].size);
	emit(o, pad, (8 - size % 8) % 8);
}

/* One AUXTRACE record and the trace after it, padded to 8 bytes; @index
 * gets the record's (file offset, header size).  @offset: where the data
 * starts in the AUX area's stream (snapshot mode: where its head was). */
static void auxtrace(struct out *o, struct buf *index,
		     const struct rec_perf_thread *t, uint64_t offset,
		     uint64_t ref, uint32_t idx, uint32_t tid, uint32_t cpu)
{
	struct buf b = { 0 };
	uint64_t size = trace_size(t);
	size_t at;

	at = begin(&b, UREC_AUXTRACE, 0);
	u64(&b, size + (8 - size % 8) % 8);
	u64(&b, offset);                /* offset in the AUX area */
	/* reference: perf fills a 7-byte TSC's top byte from it */
	u64(&b, ref);
	u32(&b, idx);
	u32(&b, tid);
	u32(&b, cpu);
	u32(&b, 0);
	end(&b, at);
	u64(index, o->off);
	u64(index, b.n);
	if (b.oom) {
		o->err = ENOMEM;
	} else {
		emit(o, b.p, b.n);
		emit_trace(o, t, size);
	}
	free(b.p);
}

/* CPU-wide: the scheduler's context switches as the kernel reports them,
 * in time order: PERF_RECORD_SWITCH_CPU_WIDE (next_prev_pid/tid, then the
 * sample_id of the task switched out or in, on that CPU, from the dummy
 * event's id for it), and ITRACE_START (from intel_pt's id for the CPU)
 * before the first thread a CPU runs, when its trace starts. */
static void switches(struct buf *b, const struct rec_ctx *c,
		     const struct tconv *tc, pid_t pid, size_t nev)
{
	const struct rec_sched *sc = &c->sched;
	size_t i, at;

	for (i = 0; i < sc->nsw; i++) {
		const struct rec_switch *w = &sc->sw[i];
		uint32_t tp = w->task < 0 ? 0 : (uint32_t) pid;
		uint32_t op = w->other < 0 ? 0 : (uint32_t) pid;
		uint32_t tt = task_tid(c, w->task), ot = task_tid(c, w->other);
		uint16_t misc = 0;

		if (w->first) {
			at = begin(b, PERF_RECORD_ITRACE_START, 0);
			u32(b, tp);
			u32(b, tt);
			sample_id(b, tc, tp, tt, w->tsc - 1, w->cpu,
				  pt_id(w->cpu));
			end(b, at);
		}
		if (w->out)
			misc = PERF_RECORD_MISC_SWITCH_OUT |
			       (w->preempt ? PERF_RECORD_MISC_SWITCH_OUT_PREEMPT :
				0);
		at = begin(b, PERF_RECORD_SWITCH_CPU_WIDE, misc);
		u32(b, op);
		u32(b, ot);
		sample_id(b, tc, tp, tt, w->tsc, w->cpu, dummy_id(nev, w->cpu));
		end(b, at);
	}
}

/* The sideband and the AUXTRACE records. @index gets each AUXTRACE
 * record's (file offset, header size). */
static void data_section(struct out *o, const struct rec_ctx *c, pid_t pid,
			 const char *comm, const struct rec_perf_thread *th,
			 size_t nth, const struct rec_perf_snap *snaps,
			 size_t nsnaps, const char *filter, struct buf *index)
{
	const struct rec_sched *sc = &c->sched;
	struct buf b = { 0 };
	uint64_t t0 = REC_TSC_START - 2, tend = 0;
	uint64_t priv[PRIV_MAX];
	struct tconv tc;
	size_t at, i, j, k, flen = strlen(filter), nev = nevents(c, nth);
	char cm[16];

	for (i = 0; i < nth; i++)
		if (th[i].last_tsc > tend)
			tend = th[i].last_tsc;
	if (sc->n && sc->nsw && sc->sw[sc->nsw - 1].tsc > tend)
		tend = sc->sw[sc->nsw - 1].tsc;
	tend += 1;
	tconv_init(&tc, TSC_KHZ, TIME_ZERO);

	memset(priv, 0, sizeof(priv));
	priv[PRIV_PMU_TYPE] = PT_PMU_TYPE;
	priv[PRIV_TIME_SHIFT] = tc.shift;
	priv[PRIV_TIME_MULT] = tc.mult;
	priv[PRIV_TIME_ZERO] = tc.zero;
	priv[PRIV_CAP_USER_TIME_ZERO] = 1;
	priv[PRIV_TSC_BIT] = PT_CFG_TSC;
	priv[PRIV_NORETCOMP_BIT] = PT_CFG_NORETCOMP;
	/* CPU-wide: context-switch records on a CPU-wide target, which perf
	 * calls 3 (1 would be the sched:sched_switch tracepoint, 2 switch
	 * records of a per-thread target). */
	priv[PRIV_HAVE_SCHED_SWITCH] = sc->n ? 3 : 0;
	/* perf record -S: the AUX area in overwrite mode, copied out at
	 * each snapshot. */
	priv[PRIV_SNAPSHOT_MODE] = c->o->perf_snapshot ? 1 : 0;
	priv[PRIV_PER_CPU_MMAPS] = sc->n ? 1 : 0;
	priv[PRIV_MTC_BIT] = PT_CFG_MTC;
	priv[PRIV_MTC_FREQ_BITS] = PT_CFG_MTC_PERIOD;
	/* CPUID 0x15: TSC/core crystal = EBX/EAX, as build.args says. */
	priv[PRIV_TSC_CTC_N] = 1;
	priv[PRIV_TSC_CTC_D] = 1;
	priv[PRIV_CYC_BIT] = PT_CFG_CYC;
	priv[PRIV_MAX_NONTURBO_RATIO] = MAX_NONTURBO_RATIO;
	priv[PRIV_FILTER_STR_LEN] = flen;
	at = begin(&b, UREC_AUXTRACE_INFO, 0);
	u32(&b, AUXTRACE_INTEL_PT);
	u32(&b, 0);
	put(&b, priv, sizeof(priv));
	if (flen) {
		put(&b, filter, flen + 1);
		align(&b, 8);
	}
	u64(&b, 0);     /* cap_event_trace: no event trace packets */
	end(&b, at);

	/* TIME_CONV: perf's own TSC conversion, the same words. */
	at = begin(&b, UREC_TIME_CONV, 0);
	u64(&b, tc.shift);
	u64(&b, tc.mult);
	u64(&b, tc.zero);
	u64(&b, 0);     /* time_cycles: no cap_user_time_short */
	u64(&b, 0);     /* time_mask */
	u8(&b, 1);      /* cap_user_time_zero */
	u8(&b, 0);      /* cap_user_time_short */
	zeros(&b, 6);
	end(&b, at);

	/* The exec of PROG (COMM with the exec flag), then its mappings.
	 * Every mapping is dated before the trace: perf must know a
	 * module's code before it decodes it, and the recorder learns of a
	 * dlopen'ed library only at its first instruction. */
	memset(cm, 0, sizeof(cm));
	snprintf(cm, sizeof(cm), "%s", comm);
	at = begin(&b, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	u32(&b, (uint32_t) pid);
	u32(&b, (uint32_t) pid);
	put(&b, cm, sizeof(cm));
	sample_id(&b, &tc, (uint32_t) pid, (uint32_t) pid, t0, 0,
		  dummy_id(nev, 0));
	end(&b, at);
	for (i = 0; i < c->im.nmods; i++) {
		const struct rec_mod *m = c->im.mods[i];
		struct xseg x[16];
		unsigned nx = xsegs(m, x), j;
		uint8_t id[20];
		size_t idn = build_id(m, id);
		struct stat st;

		if (stat(m->path, &st) < 0)
			memset(&st, 0, sizeof(st));
		for (j = 0; j < nx; j++) {
			at = begin(&b, PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER |
				   (idn ? PERF_RECORD_MISC_MMAP_BUILD_ID : 0));
			u32(&b, (uint32_t) pid);
			u32(&b, (uint32_t) pid);
			u64(&b, x[j].addr);
			u64(&b, x[j].len);
			u64(&b, x[j].pgoff);
			if (idn) {
				u8(&b, (uint8_t) idn);
				u8(&b, 0);
				u16(&b, 0);
				put(&b, id, idn);
				zeros(&b, 20 - idn);
			} else {
				u32(&b, (uint32_t) major(st.st_dev));
				u32(&b, (uint32_t) minor(st.st_dev));
				u64(&b, (uint64_t) st.st_ino);
				u64(&b, 0);
			}
			u32(&b, 5);     /* PROT_READ | PROT_EXEC */
			u32(&b, 2);     /* MAP_PRIVATE */
			put(&b, m->path, strlen(m->path) + 1);
			align(&b, 8);
			sample_id(&b, &tc, (uint32_t) pid, (uint32_t) pid,
				  t0 + 1, 0, dummy_id(nev, 0));
			end(&b, at);
		}
	}
	for (i = 0; i < nth; i++) {
		uint32_t tid = (uint32_t) th[i].tid;
		uint64_t born = th[i].first_tsc > t0 + 2 ?
				th[i].first_tsc - 1 : t0 + 1;

		if (th[i].tid != pid) {
			/* A thread of PROG: FORK (pid, ppid, tid, ptid,
			 * time) and the name it inherits. */
			at = begin(&b, PERF_RECORD_FORK, 0);
			u32(&b, (uint32_t) pid);
			u32(&b, (uint32_t) pid);
			u32(&b, tid);
			u32(&b, (uint32_t) pid);
			u64(&b, tconv_ns(&tc, born));
			sample_id(&b, &tc, (uint32_t) pid, tid, born, 0,
				  dummy_id(nev, sc->n ? 0 : i));
			end(&b, at);
			at = begin(&b, PERF_RECORD_COMM, 0);
			u32(&b, (uint32_t) pid);
			u32(&b, tid);
			put(&b, cm, sizeof(cm));
			sample_id(&b, &tc, (uint32_t) pid, tid, born, 0,
				  dummy_id(nev, sc->n ? 0 : i));
			end(&b, at);
		}
		if (sc->n)
			continue;       /* CPU-wide: with the switches */
		at = begin(&b, PERF_RECORD_ITRACE_START, 0);
		u32(&b, (uint32_t) pid);
		u32(&b, tid);
		sample_id(&b, &tc, (uint32_t) pid, tid, th[i].tid == pid ?
			  t0 + 1 : born, 0, 1 + i);
		end(&b, at);
	}
	emit_round(o, &b);
	if (o->err) {
		free(b.p);
		return;
	}

	/* Snapshot mode (perf record -S): each earlier snapshot as perf
	 * writes it, an AUXTRACE record per thread with new data (the AUX
	 * area's last bytes, which may overlap the previous snapshot's),
	 * an AUX record flagged overwrite each, a round. */
	for (k = 0; k < nsnaps && !o->err; k++) {
		const struct rec_perf_snap *sn = &snaps[k];

		for (j = 0; j < sn->nth && !o->err; j++)
			for (i = 0; i < nth; i++)
				if (th[i].idx == sn->th[j].idx &&
				    trace_size(&sn->th[j]))
					auxtrace(o, index, &sn->th[j],
						 sn->th[j].aux_offset, sn->tsc,
						 (uint32_t) i,
						 (uint32_t) th[i].tid,
						 UINT32_MAX);
		b.n = 0;
		for (j = 0; j < sn->nth; j++)
			for (i = 0; i < nth; i++) {
				uint64_t size = trace_size(&sn->th[j]);

				if (th[i].idx != sn->th[j].idx || !size)
					continue;
				at = begin(&b, PERF_RECORD_AUX, 0);
				u64(&b, sn->th[j].aux_offset);
				u64(&b, size + (8 - size % 8) % 8);
				u64(&b, PERF_AUX_FLAG_OVERWRITE);
				sample_id(&b, &tc, (uint32_t) pid,
					  (uint32_t) th[i].tid, sn->tsc, 0,
					  pt_id(i));
				end(&b, at);
			}
		emit_round(o, &b);
	}

	/* The traces: per-thread mode, one AUXTRACE record per thread (its
	 * own buffer idx, cpu -1); CPU-wide, one per CPU that ran something
	 * (buffer idx = the CPU, as perf's per-CPU mmaps; tid -1). */
	for (i = 0; !sc->n && i < nth && !o->err; i++)
		if (!c->o->perf_snapshot || trace_size(&th[i]))
			auxtrace(o, index, &th[i], th[i].aux_offset,
				 c->o->perf_snapshot ? tend : th[i].first_tsc,
				 (uint32_t) i, (uint32_t) th[i].tid,
				 UINT32_MAX);
	for (i = 0; i < sc->n && !o->err; i++)
		if (file_size(sc->cpus[i].s.path)) {
			struct rec_perf_thread ct;

			memset(&ct, 0, sizeof(ct));
			ct.pt_path = sc->cpus[i].s.path;
			auxtrace(o, index, &ct, 0, sc->cpus[i].s.first_tsc,
				 (uint32_t) i, UINT32_MAX, (uint32_t) i);
		}

	/* The context switches, the kernel's AUX records (all data arrived,
	 * nothing lost), and the threads' exits after everything they ran. */
	b.n = 0;
	switches(&b, c, &tc, pid, nev);
	for (i = 0; !sc->n && i < nth; i++) {
		uint32_t tid = (uint32_t) th[i].tid;
		uint64_t size = trace_size(&th[i]);

		if (c->o->perf_snapshot && !size)
			continue;
		at = begin(&b, PERF_RECORD_AUX, 0);
		u64(&b, th[i].aux_offset);
		u64(&b, c->o->perf_snapshot ? size + (8 - size % 8) % 8 : size);
		u64(&b, c->o->perf_snapshot ? PERF_AUX_FLAG_OVERWRITE : 0);
		sample_id(&b, &tc, (uint32_t) pid, tid, tend, 0, pt_id(i));
		end(&b, at);
	}
	for (i = 0; i < sc->n; i++) {
		uint64_t size = file_size(sc->cpus[i].s.path);

		if (!size)
			continue;
		/* every thread has left its CPU: the idle task's */
		at = begin(&b, PERF_RECORD_AUX, 0);
		u64(&b, 0);
		u64(&b, size);
		u64(&b, 0);
		sample_id(&b, &tc, 0, 0, tend, (uint32_t) i, pt_id(i));
		end(&b, at);
	}
	for (i = nth; i-- > 0;) {
		uint32_t tid = (uint32_t) th[i].tid;
		int cpu = sc->n ? rec_sched_last_cpu(sc, th[i].idx) : 0;

		/* A snapshot of a running program: it goes on. */
		if (th[i].running)
			continue;
		if (cpu < 0)
			cpu = 0;
		at = begin(&b, PERF_RECORD_EXIT, 0);
		u32(&b, (uint32_t) pid);
		u32(&b, (uint32_t) pid);
		u32(&b, tid);
		u32(&b, (uint32_t) pid);
		u64(&b, tconv_ns(&tc, tend + 1));
		sample_id(&b, &tc, (uint32_t) pid, tid, tend + 1, (uint32_t) cpu,
			  dummy_id(nev, sc->n ? (size_t) cpu : i));
		end(&b, at);
	}
	emit_round(o, &b);
	free(b.p);
}

static void build_ids(struct buf *b, const struct rec_ctx *c)
{
	size_t i;

	for (i = 0; i < c->im.nmods; i++) {
		const struct rec_mod *m = c->im.mods[i];
		uint8_t id[20];
		size_t idn = build_id(m, id), n, len, at;

		if (!idn)
			continue;
		n = strlen(m->path) + 1;
		len = (n + NAME_ALIGN - 1) / NAME_ALIGN * NAME_ALIGN;
		/* build_id_event: header, pid (-1: the host), 20 id bytes,
		 * the id's size (PERF_RECORD_MISC_BUILD_ID_SIZE), 3 spare,
		 * the path padded to 64. */
		at = begin(b, 0, PERF_RECORD_MISC_USER | (1u << 15));
		u32(b, UINT32_MAX);
		put(b, id, idn);
		zeros(b, 20 - idn);
		u8(b, (uint8_t) idn);
		zeros(b, 3);
		put(b, m->path, n);
		zeros(b, len - n);
		end(b, at);
	}
}

/* One feature's bytes into @body, its (offset, size) into @table. */
struct feats {
	struct buf table, body;
	uint64_t base;          /* file offset of body */
};

static void feat_done(struct feats *f, size_t start)
{
	u64(&f->table, f->base + start);
	u64(&f->table, f->body.n - start);
}

int rec_perf_write(const char *out, const struct rec_ctx *c, pid_t pid,
		   const char *comm, const struct rec_perf_thread *th,
		   size_t nth, const struct rec_perf_snap *snaps,
		   size_t nsnaps, char *err, size_t errlen)
{
	struct perf_event_attr pt, dummy;
	struct buf head = { 0 }, index = { 0 };
	struct feats f = { { 0 }, { 0 }, 0 };
	struct out o = { NULL, 0, 0 };
	uint64_t ids_off, attrs_off, data_off, data_size, feat_bits[4];
	static const int feats_on[] = {
		FEAT_BUILD_ID, FEAT_HOSTNAME, FEAT_OSRELEASE, FEAT_VERSION,
		FEAT_ARCH, FEAT_NRCPUS, FEAT_CPUDESC, FEAT_CPUID,
		FEAT_TOTAL_MEM, FEAT_CMDLINE, FEAT_EVENT_DESC,
		FEAT_PMU_MAPPINGS, FEAT_AUXTRACE, FEAT_CLOCK_DATA,
	};
	const size_t nfeat = sizeof(feats_on) / sizeof(feats_on[0]);
	char *filter = filter_string(c);
	struct utsname un;
	struct sysinfo si;
	struct tconv tc;
	size_t i, s, nev = nevents(c, nth);
	long ncpu;
	int rc = -1;

	if (!filter) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (nth > 65535) {
		snprintf(err, errlen, "%s: too many threads for one file", out);
		free(filter);
		return -1;
	}
	make_attrs(c, &pt, &dummy);
	o.fp = fopen(out, "wb");
	if (!o.fp) {
		snprintf(err, errlen, "%s: %s", out, strerror(errno));
		free(filter);
		return -1;
	}

	/* header (patched at the end), ids, attrs */
	zeros(&head, 104);
	ids_off = head.n;
	for (i = 0; i < 2 * nev; i++)
		u64(&head, 1 + i);      /* intel_pt: 1..n, dummy: n+1..2n */
	attrs_off = head.n;
	attr_bytes(&head, &pt);
	u64(&head, ids_off);
	u64(&head, nev * 8);
	attr_bytes(&head, &dummy);
	u64(&head, ids_off + nev * 8);
	u64(&head, nev * 8);
	align(&head, 8);
	data_off = head.n;
	if (head.oom)
		goto oom;
	emit(&o, head.p, head.n);
	data_section(&o, c, pid, comm, th, nth, snaps, nsnaps, filter, &index);
	if (index.oom)
		goto oom;
	data_size = o.off - data_off;

	/* features: the section table comes first, right after the data */
	f.base = o.off + nfeat * 16;
	memset(feat_bits, 0, sizeof(feat_bits));
	for (i = 0; i < nfeat; i++) {
		int ft = feats_on[i];
		size_t start = f.body.n;

		feat_bits[ft / 64] |= 1ull << (ft % 64);
		switch (ft) {
		case FEAT_BUILD_ID:
			build_ids(&f.body, c);
			break;
		case FEAT_HOSTNAME:
		case FEAT_OSRELEASE:
			if (uname(&un) < 0)
				memset(&un, 0, sizeof(un));
			str(&f.body, ft == FEAT_HOSTNAME ? un.nodename :
			    un.release);
			break;
		case FEAT_VERSION:
			str(&f.body, "htr record");
			break;
		case FEAT_ARCH:
			str(&f.body, "x86_64");
			break;
		case FEAT_NRCPUS:
			/* available, online: the modelled machine's CPUs
			 * (CPU-wide: perf sizes its per-CPU tables by it),
			 * else the host's */
			ncpu = c->sched.n ? (long) c->sched.n :
			       sysconf(_SC_NPROCESSORS_ONLN);
			u32(&f.body, (uint32_t) (ncpu > 0 ? ncpu : 1));
			u32(&f.body, (uint32_t) (ncpu > 0 ? ncpu : 1));
			break;
		case FEAT_CPUDESC:
			str(&f.body, CPUDESC_STR);
			break;
		case FEAT_CPUID:
			str(&f.body, CPUID_STR);
			break;
		case FEAT_TOTAL_MEM:
			u64(&f.body, sysinfo(&si) == 0 ? (uint64_t) si.totalram *
			    si.mem_unit / 1024 : 0);
			break;
		case FEAT_CMDLINE:
			u32(&f.body, 3);
			str(&f.body, "htr");
			str(&f.body, "record");
			str(&f.body, c->exe);
			break;
		case FEAT_EVENT_DESC:
			/* count, attr size, then per event: attr, number of
			 * ids, name, ids */
			u32(&f.body, 2);
			u32(&f.body, ATTR_SIZE);
			attr_bytes(&f.body, &pt);
			u32(&f.body, (uint32_t) nev);
			str(&f.body, "intel_pt//u");
			for (s = 0; s < nev; s++)
				u64(&f.body, pt_id(s));
			attr_bytes(&f.body, &dummy);
			u32(&f.body, (uint32_t) nev);
			str(&f.body, "dummy:u");
			for (s = 0; s < nev; s++)
				u64(&f.body, dummy_id(nev, s));
			break;
		case FEAT_PMU_MAPPINGS:
			u32(&f.body, 5);
			u32(&f.body, PERF_TYPE_SOFTWARE);
			str(&f.body, "software");
			u32(&f.body, PERF_TYPE_TRACEPOINT);
			str(&f.body, "tracepoint");
			u32(&f.body, PERF_TYPE_RAW);
			str(&f.body, "cpu");
			u32(&f.body, PERF_TYPE_BREAKPOINT);
			str(&f.body, "breakpoint");
			u32(&f.body, PT_PMU_TYPE);
			str(&f.body, "intel_pt");
			break;
		case FEAT_AUXTRACE:
			/* the index: count, then (file offset, header size)
			 * of every AUXTRACE record */
			u64(&f.body, index.n / 16);
			put(&f.body, index.p, index.n);
			break;
		case FEAT_CLOCK_DATA:
			/* version 1, the clock (perf record -k monotonic),
			 * then the wall clock and perf time at one moment:
			 * the start of the modelled clock */
			tconv_init(&tc, TSC_KHZ, TIME_ZERO);
			u32(&f.body, 1);
			u32(&f.body, CLOCK_MONOTONIC);
			u64(&f.body, c->wall_start_ns);
			u64(&f.body, tconv_ns(&tc, REC_TSC_START));
			break;
		}
		feat_done(&f, start);
	}
	if (f.table.oom || f.body.oom)
		goto oom;
	emit(&o, f.table.p, f.table.n);
	emit(&o, f.body.p, f.body.n);

	/* the header, now that every section is known */
	head.n = 0;
	put(&head, "PERFILE2", 8);
	u64(&head, 104);
	u64(&head, ATTR_SIZE + 16);
	u64(&head, attrs_off);
	u64(&head, 2 * (ATTR_SIZE + 16));
	u64(&head, data_off);
	u64(&head, data_size);
	u64(&head, 0);          /* event_types: unused */
	u64(&head, 0);
	put(&head, feat_bits, sizeof(feat_bits));
	if (head.oom)
		goto oom;
	if (!o.err && (fflush(o.fp) != 0 || fseek(o.fp, 0, SEEK_SET) != 0))
		o.err = errno ? errno : EIO;
	if (!o.err && fwrite(head.p, 1, head.n, o.fp) != head.n)
		o.err = errno ? errno : EIO;
	if (fclose(o.fp) != 0 && !o.err)
		o.err = errno ? errno : EIO;
	o.fp = NULL;
	if (o.err) {
		snprintf(err, errlen, "%s: %s", out, strerror(o.err));
		goto out;
	}
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	if (o.fp)
		fclose(o.fp);
	free(head.p);
	free(index.p);
	free(f.table.p);
	free(f.body.p);
	free(filter);
	if (rc < 0)
		unlink(out);
	return rc;
}

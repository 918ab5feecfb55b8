/* perf.data reader: see perfdata.h. */
#include "perfdata.h"
#include "elffile.h"

#include "le.h"
#include "tmpfile.h"

#include <intel-pt.h>

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef HTR_HAVE_ZSTD
#include <zstd.h>
#endif

/* Record types (<linux/perf_event.h>, perf's util/event.h). */
enum {
	REC_MMAP = 1, REC_COMM = 3, REC_EXIT = 4, REC_FORK = 7,
	REC_MMAP2 = 10, REC_AUX = 11, REC_ITRACE_START = 12,
	REC_SWITCH = 14, REC_SWITCH_CPU_WIDE = 15,
	REC_HEADER_ATTR = 64, REC_TRACING_DATA = 66,
	REC_AUXTRACE_INFO = 70, REC_AUXTRACE = 71,
	REC_HEADER_FEATURE = 80, REC_COMPRESSED = 81, REC_COMPRESSED2 = 83,
};

/* header.misc bits */
#define MISC_CPUMODE_MASK 7u
#define MISC_KERNEL 1u
#define MISC_HYPERVISOR 3u
#define MISC_GUEST_KERNEL 4u
#define MISC_MMAP_DATA (1u << 13)
#define MISC_COMM_EXEC (1u << 13)
#define MISC_MMAP_BUILD_ID (1u << 14)
#define MISC_BUILD_ID_SIZE (1u << 15)

/* Feature bits (perf's util/header.h). */
enum { FEAT_BUILD_ID = 2, FEAT_NRCPUS = 7, FEAT_CPUID = 9,
       FEAT_PMU_MAPPINGS = 16, FEAT_COMPRESSED = 27, FEAT_CLOCK_DATA = 29 };

/* HEADER_COMPRESSED's type of perf record -z's streams. */
#define COMP_ZSTD 1u

/* Decompressed records wait here; a record (at most 64 KiB: its size is
 * 16 bits) may straddle two COMPRESSED records. */
#define ZBUF_SIZE (256u << 10)

/* attr.sample_type bits that make up the sample_id trailer. */
#define SAMPLE_TID (1ull << 1)
#define SAMPLE_TIME (1ull << 2)
#define SAMPLE_ID (1ull << 6)
#define SAMPLE_CPU (1ull << 7)
#define SAMPLE_STREAM_ID (1ull << 9)
#define SAMPLE_IDENTIFIER (1ull << 16)
#define ATTR_SAMPLE_ID_ALL (1ull << 18)
#define ATTR_EXCLUDE_KERNEL (1ull << 5)

/* AUXTRACE_INFO: auxtrace type and Intel PT's private words. */
#define AUXTRACE_INTEL_PT 1
enum {
	PT_PMU_TYPE, PT_TIME_SHIFT, PT_TIME_MULT, PT_TIME_ZERO,
	PT_CAP_USER_TIME_ZERO, PT_TSC_BIT, PT_NORETCOMP_BIT,
	PT_HAVE_SCHED_SWITCH, PT_SNAPSHOT_MODE, PT_PER_CPU_MMAPS,
	PT_MTC_BIT, PT_MTC_FREQ_BITS, PT_TSC_CTC_N, PT_TSC_CTC_D,
	PT_CYC_BIT, PT_MAX_NONTURBO_RATIO, PT_FILTER_STR_LEN, PT_FILTER_STR,
};

#define MISC_SWITCH_OUT (1u << 13)

#define AUX_FLAG_TRUNCATED 0x1u
#define AUX_FLAG_PARTIAL 0x4u
#define AUX_FLAG_COLLISION 0x8u

#define ATTR_SIZE_VER0 64u
#define FILE_HEADER_SIZE 104u
#define PIPE_HEADER_SIZE 16u
#define PROT_EXEC_BIT 4u

struct attr {
	uint32_t type;
	uint64_t config, sample_type, flags;
	const uint8_t *ids;        /* u64 ids in the file */
	uint64_t nids;
};

struct proc {                  /* a process: its exec and where it forked */
	uint32_t pid, ppid;
	uint64_t exec_seq, fork_seq;
	int forked;
};

struct bid {                   /* a build-id of the BUILD_ID feature */
	char *path;
	uint8_t id[20];
	uint8_t size;
};

struct htr_perf_priv {
	struct attr *attrs;
	size_t nattrs;
	struct proc *procs;
	size_t nprocs;
	struct bid *bids;
	size_t nbids;
	uint32_t pmu_mapping_type; /* intel_pt's type from pmu_mappings */
	int have_pmu_mapping;
	uint32_t comp_type;        /* HEADER_COMPRESSED's, 0 if absent */
	int have_comp_type;
#ifdef HTR_HAVE_ZSTD
	ZSTD_DStream *zd;          /* perf record -z: one stream, all records */
	uint8_t *zbuf;             /* ZBUF_SIZE bytes */
	size_t zlen;               /* decompressed, not yet a whole record */
#endif
	struct htr_err *err;
};

static uint64_t le(const uint8_t *p, unsigned w)
{
	return htr_disk__get_le(p, w);
}

static int corrupt(struct htr_perfdata *pd, const char *fmt, uint64_t a,
		   uint64_t b)
{
	char what[256];

	snprintf(what, sizeof(what), fmt, (unsigned long long) a,
		 (unsigned long long) b);
	return htr_err__set(pd->priv->err, HTR_ERR_CORRUPT, "%s: corrupt "
			    "perf.data: %s", pd->name, what);
}

static int nomem(struct htr_perfdata *pd)
{
	return htr_err__set(pd->priv->err, HTR_ERR_NOMEM, "%s: out of memory",
			    pd->name);
}

/* Grow *@arr (of *@n items of @sz bytes, capacity a power of two) by one
 * zeroed item; returns it or NULL. */
static void *push(void *arr, size_t *n, size_t sz)
{
	void **a = arr;
	char *p;

	/* Capacity: 16, then doubled each time @n reaches a power of two. */
	if (*n == 0 || (*n >= 16 && (*n & (*n - 1)) == 0)) {
		if (*n > SIZE_MAX / 2 / sz)
			return NULL;
		p = realloc(*a, (*n < 16 ? 16 : *n * 2) * sz);
		if (!p)
			return NULL;
		*a = p;
	}
	p = (char *) *a + *n * sz;
	memset(p, 0, sz);
	(*n)++;
	return p;
}

/* A section (offset, size) within the file. */
static int in_file(const struct htr_perfdata *pd, uint64_t off, uint64_t size)
{
	return off <= pd->size && size <= pd->size - off;
}

static struct htr_perf_thread *thread_get(struct htr_perfdata *pd,
					  uint32_t pid, uint32_t tid,
					  int create)
{
	struct htr_perf_thread *t;
	size_t i;

	for (i = pd->nthreads; i-- > 0;)
		if (pd->threads[i].tid == tid)
			return &pd->threads[i];
	if (!create)
		return NULL;
	t = push(&pd->threads, &pd->nthreads, sizeof(*t));
	if (t) {
		t->pid = pid;
		t->tid = tid;
	}
	return t;
}

static struct proc *proc_get(struct htr_perfdata *pd, uint32_t pid)
{
	struct htr_perf_priv *pv = pd->priv;
	struct proc *p;
	size_t i;

	for (i = 0; i < pv->nprocs; i++)
		if (pv->procs[i].pid == pid)
			return &pv->procs[i];
	p = push(&pv->procs, &pv->nprocs, sizeof(*p));
	if (p)
		p->pid = pid;
	return p;
}

/* A NUL-terminated string in @n bytes at @p; its length or -1. */
static long bounded_str(const uint8_t *p, uint64_t n)
{
	const uint8_t *z = n ? memchr(p, 0, (size_t) n) : NULL;

	return z ? (long) (z - p) : -1;
}

/* perf_header_string: u32 len, then len bytes holding a string. */
static int header_string(struct htr_perfdata *pd, const uint8_t *p,
			 uint64_t n, const char *what, char *out, size_t outsz,
			 uint64_t *used)
{
	uint64_t len;
	long sl;

	*used = 0;
	if (n < 4)
		return htr_err__set(pd->priv->err, HTR_ERR_CORRUPT, "%s: "
				    "corrupt perf.data: %s string cut short",
				    pd->name, what);
	len = le(p, 4);
	if (len > n - 4)
		return htr_err__set(pd->priv->err, HTR_ERR_CORRUPT, "%s: "
				    "corrupt perf.data: %s string of %llu "
				    "bytes past its section", pd->name, what,
				    (unsigned long long) len);
	sl = bounded_str(p + 4, len);
	if (sl < 0)
		sl = (long) len;
	if (outsz) {
		size_t k = (size_t) sl < outsz - 1 ? (size_t) sl : outsz - 1;

		memcpy(out, p + 4, k);
		out[k] = 0;
	}
	*used = 4 + len;
	return 0;
}

static int feat_cpuid(struct htr_perfdata *pd, const uint8_t *p, uint64_t n)
{
	char s[128], vendor[16];
	unsigned f, m, st;
	uint64_t used;
	int rc = header_string(pd, p, n, "cpuid", s, sizeof(s), &used);

	if (rc < 0)
		return rc;
	/* "GenuineIntel,FAMILY,MODEL,STEPPING" on x86; libipt's errata
	 * are Intel's, so another vendor's CPU is no CPU to it. */
	if (sscanf(s, "%15[^,],%u,%u,%u", vendor, &f, &m, &st) == 4 &&
	    !strcmp(vendor, "GenuineIntel") &&
	    f <= 255 && m <= 255 && st <= 255) {
		pd->cpu_family = (int) f;
		pd->cpu_model = (int) m;
		pd->cpu_stepping = (int) st;
	}
	return 0;
}

static int feat_pmu_mappings(struct htr_perfdata *pd, const uint8_t *p,
			     uint64_t n)
{
	uint64_t nr, i, used, off = 4;
	char name[64];
	uint32_t type;
	int rc;

	if (n < 4)
		return corrupt(pd, "pmu_mappings feature of %llu bytes%.0llu",
			       n, 0);
	nr = le(p, 4);
	for (i = 0; i < nr; i++) {
		if (n - off < 4)
			return corrupt(pd, "pmu_mappings: entry %llu of %llu "
				       "past its section", i, nr);
		type = (uint32_t) le(p + off, 4);
		off += 4;
		rc = header_string(pd, p + off, n - off, "pmu_mappings", name,
				   sizeof(name), &used);
		if (rc < 0)
			return rc;
		off += used;
		if (!strcmp(name, "intel_pt")) {
			pd->priv->pmu_mapping_type = type;
			pd->priv->have_pmu_mapping = 1;
		}
	}
	return 0;
}

/* BUILD_ID: build_id records (header, pid, 24 id bytes, filename). */
static int feat_build_id(struct htr_perfdata *pd, const uint8_t *p,
			 uint64_t n)
{
	struct htr_perf_priv *pv = pd->priv;
	uint64_t off = 0, sz;
	struct bid *b;
	unsigned misc;
	long sl;

	while (n - off >= 8) {
		misc = (unsigned) le(p + off + 4, 2);
		sz = le(p + off + 6, 2);
		if (sz < 8 + 4 + 24 || sz > n - off)
			return corrupt(pd, "build-id entry of %llu bytes at "
				       "feature offset %llu", sz, off);
		sl = bounded_str(p + off + 36, sz - 36);
		if (sl < 0)
			return corrupt(pd, "build-id entry at feature offset "
				       "%llu: unterminated path%.0llu", off, 0);
		b = push(&pv->bids, &pv->nbids, sizeof(*b));
		if (!b || !(b->path = strdup((const char *) p + off + 36)))
			return nomem(pd);
		memcpy(b->id, p + off + 12, 20);
		b->size = 20;
		if (misc & MISC_BUILD_ID_SIZE) {
			b->size = p[off + 12 + 20];
			if (b->size > 20)
				b->size = 20;
		}
		off += sz;
	}
	return 0;
}

static int feature(struct htr_perfdata *pd, unsigned bit, const uint8_t *p,
		   uint64_t n)
{
	switch (bit) {
	case FEAT_BUILD_ID:
		return feat_build_id(pd, p, n);
	case FEAT_NRCPUS:
		if (n < 8)
			return corrupt(pd, "nr_cpus feature of %llu "
				       "bytes%.0llu", n, 0);
		pd->nr_cpus_avail = (uint32_t) le(p, 4);
		pd->nr_cpus_online = (uint32_t) le(p + 4, 4);
		return 0;
	case FEAT_CPUID:
		return feat_cpuid(pd, p, n);
	case FEAT_PMU_MAPPINGS:
		return feat_pmu_mappings(pd, p, n);
	case FEAT_COMPRESSED:
		/* u32 version, type, level, ratio, mmap_len. */
		if (n < 8)
			return corrupt(pd, "compressed feature of %llu "
				       "bytes%.0llu", n, 0);
		pd->priv->comp_type = (uint32_t) le(p + 4, 4);
		pd->priv->have_comp_type = 1;
		return 0;
	case FEAT_CLOCK_DATA:
		/* u32 version, u32 clockid, u64 wall ns, u64 clockid ns. */
		if (n < 24)
			return corrupt(pd, "clock_data feature of %llu "
				       "bytes%.0llu", n, 0);
		if (le(p, 4) == 1) {
			pd->have_clock_data = 1;
			pd->clock_wall_ns = le(p + 8, 8);
			pd->clock_ref_ns = le(p + 16, 8);
		}
		return 0;
	default:
		return 0;
	}
}

static int add_attr(struct htr_perfdata *pd, const uint8_t *a, uint64_t asz,
		    const uint8_t *ids, uint64_t idsz)
{
	struct attr *at = push(&pd->priv->attrs, &pd->priv->nattrs,
			       sizeof(*at));

	(void) asz;
	if (!at)
		return nomem(pd);
	at->type = (uint32_t) le(a, 4);
	at->config = le(a + 8, 8);
	at->sample_type = le(a + 24, 8);
	at->flags = le(a + 40, 8);
	at->ids = ids;
	at->nids = idsz / 8;
	return 0;
}

/* The attr a non-sample record belongs to (its sample_id trailer), or
 * NULL when that cannot be told. */
static const struct attr *record_attr(const struct htr_perfdata *pd,
				      const uint8_t *body, uint64_t blen)
{
	const struct htr_perf_priv *pv = pd->priv;
	uint64_t id, j;
	size_t i;

	if (!pv->nattrs)
		return NULL;
	for (i = 1; i < pv->nattrs; i++)
		if (pv->attrs[i].sample_type != pv->attrs[0].sample_type ||
		    (pv->attrs[i].flags ^ pv->attrs[0].flags) &
		    ATTR_SAMPLE_ID_ALL)
			break;
	if (i == pv->nattrs)
		return &pv->attrs[0];
	/* Different layouts: all must end in IDENTIFIER. */
	for (i = 0; i < pv->nattrs; i++)
		if (!(pv->attrs[i].sample_type & SAMPLE_IDENTIFIER) ||
		    !(pv->attrs[i].flags & ATTR_SAMPLE_ID_ALL))
			return NULL;
	if (blen < 8)
		return NULL;
	id = le(body + blen - 8, 8);
	for (i = 0; i < pv->nattrs; i++)
		for (j = 0; j < pv->attrs[i].nids; j++)
			if (le(pv->attrs[i].ids + 8 * j, 8) == id)
				return &pv->attrs[i];
	return NULL;
}

/* A record's sample_id trailer. */
struct sid {
	int has_tid, has_time, has_cpu;
	uint32_t pid, tid, cpu;
	uint64_t time;
};

/* Read the sample_id trailer of a record (after @fixed body bytes) into
 * @s; 0, or -1 when the record has none that can be read. */
static int trailer(const struct htr_perfdata *pd, const uint8_t *body,
		   uint64_t blen, uint64_t fixed, struct sid *s)
{
	const struct attr *a = record_attr(pd, body, blen);
	uint64_t st, n;
	const uint8_t *p;

	memset(s, 0, sizeof(*s));
	if (!a || !(a->flags & ATTR_SAMPLE_ID_ALL))
		return -1;
	st = a->sample_type;
	/* In this order: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER. */
	n = (st & SAMPLE_TID ? 8 : 0) + (st & SAMPLE_TIME ? 8 : 0) +
	    (st & SAMPLE_ID ? 8 : 0) + (st & SAMPLE_STREAM_ID ? 8 : 0) +
	    (st & SAMPLE_CPU ? 8 : 0) + (st & SAMPLE_IDENTIFIER ? 8 : 0);
	if (blen < fixed || blen - fixed < n)
		return -1;
	p = body + blen - n;
	if (st & SAMPLE_TID) {
		s->has_tid = 1;
		s->pid = (uint32_t) le(p, 4);
		s->tid = (uint32_t) le(p + 4, 4);
		p += 8;
	}
	if (st & SAMPLE_TIME) {
		s->has_time = 1;
		s->time = le(p, 8);
		p += 8;
	}
	p += st & SAMPLE_ID ? 8 : 0;
	p += st & SAMPLE_STREAM_ID ? 8 : 0;
	if (st & SAMPLE_CPU) {
		s->has_cpu = 1;
		s->cpu = (uint32_t) le(p, 4);
	}
	return 0;
}

static struct htr_perf_cpu *cpu_get(struct htr_perfdata *pd, uint32_t cpu)
{
	struct htr_perf_cpu *c;
	size_t i;

	for (i = 0; i < pd->ncpus; i++)
		if (pd->cpus[i].cpu == cpu)
			return &pd->cpus[i];
	c = push(&pd->cpus, &pd->ncpus, sizeof(*c));
	if (c)
		c->cpu = cpu;
	return c;
}

static int rec_mmap(struct htr_perfdata *pd, unsigned type, unsigned misc,
		    const uint8_t *b, uint64_t blen, uint64_t off)
{
	uint64_t fixed = type == REC_MMAP2 ? 64 : 32;
	struct htr_perf_module *m;
	unsigned mode = misc & MISC_CPUMODE_MASK;
	long sl;

	if (blen < fixed + 1)
		return corrupt(pd, "MMAP record at offset %llu of %llu bytes",
			       off, blen + 8);
	sl = bounded_str(b + fixed, blen - fixed);
	if (sl < 0)
		return corrupt(pd, "MMAP record at offset %llu: unterminated "
			       "path%.0llu", off, 0);
	if (misc & MISC_MMAP_DATA || mode == MISC_KERNEL ||
	    mode == MISC_HYPERVISOR || mode == MISC_GUEST_KERNEL)
		return 0;
	if (type == REC_MMAP2 && !(le(b + 56, 4) & PROT_EXEC_BIT))
		return 0;
	m = push(&pd->modules, &pd->nmodules, sizeof(*m));
	if (!m || !(m->path = strdup((const char *) b + fixed)))
		return nomem(pd);
	m->pid = (uint32_t) le(b, 4);
	m->tid = (uint32_t) le(b + 4, 4);
	m->addr = le(b + 8, 8);
	m->len = le(b + 16, 8);
	m->pgoff = le(b + 24, 8);
	m->seq = pd->nrecords;
	if (type == REC_MMAP2 && misc & MISC_MMAP_BUILD_ID) {
		m->build_id_size = b[32] > 20 ? 20 : b[32];
		memcpy(m->build_id, b + 36, 20);
	}
	return 0;
}

static int rec_auxtrace_info(struct htr_perfdata *pd, const uint8_t *b,
			     uint64_t blen, uint64_t off)
{
	struct htr_perf_pt *pt = &pd->pt;
	uint64_t n, type, len;
	const uint8_t *w;
	long sl;

	if (blen < 8)
		return corrupt(pd, "AUXTRACE_INFO record at offset %llu of "
			       "%llu bytes", off, blen + 8);
	type = le(b, 4);
	if (type != AUXTRACE_INTEL_PT)
		return htr_err__set(pd->priv->err, HTR_ERR_FORMAT, "%s: not "
				    "an Intel PT recording (auxtrace type "
				    "%llu)", pd->name,
				    (unsigned long long) type);
	w = b + 8;
	n = (blen - 8) / 8;
	if (n < PT_PER_CPU_MMAPS + 1)
		return corrupt(pd, "Intel PT AUXTRACE_INFO at offset %llu has "
			       "%llu private words", off, n);
#define W(i) (n > (i) ? le(w + 8 * (i), 8) : 0)
	pt->present = 1;
	pt->pmu_type = (uint32_t) W(PT_PMU_TYPE);
	pt->time_shift = W(PT_TIME_SHIFT);
	pt->time_mult = W(PT_TIME_MULT);
	pt->time_zero = W(PT_TIME_ZERO);
	pt->cap_user_time_zero = W(PT_CAP_USER_TIME_ZERO) != 0;
	pt->tsc_bit = W(PT_TSC_BIT);
	pt->noretcomp_bit = W(PT_NORETCOMP_BIT);
	pt->have_sched_switch = (int) (W(PT_HAVE_SCHED_SWITCH) & 0xff);
	pt->snapshot_mode = W(PT_SNAPSHOT_MODE) != 0;
	pt->per_cpu_mmaps = W(PT_PER_CPU_MMAPS) != 0;
	pt->mtc_bit = W(PT_MTC_BIT);
	pt->mtc_freq_bits = W(PT_MTC_FREQ_BITS);
	pt->tsc_ctc_n = (uint32_t) W(PT_TSC_CTC_N);
	pt->tsc_ctc_d = (uint32_t) W(PT_TSC_CTC_D);
	pt->cyc_bit = W(PT_CYC_BIT);
	pt->max_nonturbo_ratio = (uint32_t) W(PT_MAX_NONTURBO_RATIO);
	len = W(PT_FILTER_STR_LEN);
#undef W
	if (n > PT_FILTER_STR_LEN && len) {
		if (len > (n - PT_FILTER_STR) * 8 || n <= PT_FILTER_STR)
			return corrupt(pd, "AUXTRACE_INFO at offset %llu: filter "
				       "of %llu bytes past the record", off,
				       len);
		sl = bounded_str(w + 8 * PT_FILTER_STR, len);
		if (sl < 0)
			sl = (long) len;
		free(pt->filter);
		pt->filter = strndup((const char *) w + 8 * PT_FILTER_STR,
				     (size_t) sl);
		if (!pt->filter)
			return nomem(pd);
	}
	return 0;
}

static int rec_auxtrace(struct htr_perfdata *pd, const uint8_t *b,
			uint64_t blen, uint64_t off, uint64_t end,
			uint64_t *payload)
{
	struct htr_perf_thread *t;
	struct htr_perf_chunk *c;
	uint64_t size, at = off + 8 + blen;
	uint32_t tid;

	if (blen < 40)
		return corrupt(pd, "AUXTRACE record at offset %llu of %llu "
			       "bytes", off, blen + 8);
	size = le(b, 8);
	tid = (uint32_t) le(b + 28, 4);
	if (size > end - at)
		return corrupt(pd, "AUXTRACE record at offset %llu: %llu bytes "
			       "of trace run past the data", off, size);
	*payload = size;
	/* Per-CPU buffers name the workload's first thread (or none) as
	 * their tid: only the CPU says whose buffer it is. */
	if (tid == UINT32_MAX || pd->pt.per_cpu_mmaps) {
		struct htr_perf_cpu *pc = cpu_get(pd, (uint32_t) le(b + 32, 4));

		pd->per_cpu_buffers++;
		if (!pc || !(c = push(&pc->chunks, &pc->nchunks, sizeof(*c))))
			return nomem(pd);
		c->offset = at;
		c->size = size;
		pc->pt_bytes += size;
		return 0;
	}
	t = thread_get(pd, UINT32_MAX, tid, 1);
	if (!t)
		return nomem(pd);
	c = push(&t->chunks, &t->nchunks, sizeof(*c));
	if (!c)
		return nomem(pd);
	c->offset = at;
	c->size = size;
	t->pt_bytes += size;
	return 0;
}

/* A context switch: who runs on the CPU from now on.  A switch-out names
 * the next task only in the CPU-wide record; a switch-in names itself. */
static int rec_switch(struct htr_perfdata *pd, unsigned type, unsigned misc,
		      const uint8_t *b, uint64_t blen, uint64_t off)
{
	uint64_t fixed = type == REC_SWITCH_CPU_WIDE ? 8 : 0;
	struct htr_perf_switch *w;
	struct sid sid;

	if (blen < fixed)
		return corrupt(pd, "SWITCH record at offset %llu of %llu "
			       "bytes", off, blen + 8);
	if (trailer(pd, b, blen, fixed, &sid) < 0 || !sid.has_time ||
	    !sid.has_cpu || !sid.has_tid) {
		pd->switches_untimed++;
		return 0;
	}
	w = push(&pd->switches, &pd->nswitches, sizeof(*w));
	if (!w)
		return nomem(pd);
	w->time = sid.time;
	w->cpu = sid.cpu;
	if (!(misc & MISC_SWITCH_OUT)) {
		w->pid = sid.pid;
		w->tid = sid.tid;
	} else if (type == REC_SWITCH_CPU_WIDE) {
		w->pid = (uint32_t) le(b, 4);
		w->tid = (uint32_t) le(b + 4, 4);
	} else {
		w->pid = w->tid = UINT32_MAX;
	}
	/* A thread known only from switches still gets its pid. */
	if (w->tid != UINT32_MAX && w->tid && !thread_get(pd, w->pid, w->tid,
							  1))
		return nomem(pd);
	return 0;
}

static int record(struct htr_perfdata *pd, unsigned type, unsigned misc,
		  const uint8_t *b, uint64_t blen, uint64_t off, uint64_t end,
		  uint64_t *payload);

#ifdef HTR_HAVE_ZSTD
/* The whole records at the start of the decompressed bytes, in order;
 * what is left of one is kept for the next COMPRESSED record.  Only the
 * kernel's side band comes compressed (perf record -z compresses its
 * ring buffers; AUXTRACE records and their trace, and perf's own records,
 * are written plain), so only those kinds are read here: a kind whose
 * bytes follow it, or that would point into this buffer, cannot be. */
static int unpacked(struct htr_perfdata *pd, uint64_t off)
{
	struct htr_perf_priv *pv = pd->priv;
	size_t at = 0;
	int rc;

	while (pv->zlen - at >= 8) {
		const uint8_t *r = pv->zbuf + at;
		unsigned type = (unsigned) le(r, 4);
		unsigned misc = (unsigned) le(r + 4, 2);
		size_t size = (size_t) le(r + 6, 2);
		uint64_t payload = 0;

		if (size < 8)
			return corrupt(pd, "COMPRESSED record at offset %llu: "
				       "a record of %llu bytes inside", off,
				       size);
		if (size > pv->zlen - at)
			break;
		switch (type) {
		case REC_MMAP: case REC_MMAP2: case REC_COMM: case REC_FORK:
		case REC_EXIT: case REC_ITRACE_START: case REC_AUX:
		case REC_SWITCH: case REC_SWITCH_CPU_WIDE:
			rc = record(pd, type, misc, r + 8, size - 8, off, 0,
				    &payload);
			if (rc < 0)
				return rc;
			pd->nrecords++;
			break;
		default:
			break;
		}
		at += size;
	}
	memmove(pv->zbuf, pv->zbuf + at, pv->zlen - at);
	pv->zlen -= at;
	return 0;
}
#endif

/* PERF_RECORD_COMPRESSED (the bytes after the header) and COMPRESSED2
 * (a u64 size first): the next piece of the zstd stream of records. */
static int rec_compressed(struct htr_perfdata *pd, unsigned type,
			  const uint8_t *b, uint64_t blen, uint64_t off)
{
#ifdef HTR_HAVE_ZSTD
	struct htr_perf_priv *pv = pd->priv;
	ZSTD_inBuffer in = { b, (size_t) blen, 0 };

	if (pv->have_comp_type && pv->comp_type != COMP_ZSTD)
		return htr_err__set(pv->err, HTR_ERR_FORMAT, "%s: compressed "
				    "with method %u, not zstd: not supported",
				    pd->name, pv->comp_type);
	if (type == REC_COMPRESSED2) {
		if (blen < 8 || le(b, 8) > blen - 8)
			return corrupt(pd, "COMPRESSED2 record at offset %llu "
				       "of %llu bytes", off, blen + 8);
		in.src = b + 8;
		in.size = (size_t) le(b, 8);
	}
	if (!pv->zd) {
		pv->zd = ZSTD_createDStream();
		pv->zbuf = malloc(ZBUF_SIZE);
		if (!pv->zd || !pv->zbuf)
			return nomem(pd);
	}
	while (in.pos < in.size) {
		ZSTD_outBuffer out = { pv->zbuf, ZBUF_SIZE, pv->zlen };
		size_t r = ZSTD_decompressStream(pv->zd, &out, &in);
		int rc;

		if (ZSTD_isError(r))
			return htr_err__set(pv->err, HTR_ERR_CORRUPT, "%s: "
					    "corrupt perf.data: COMPRESSED "
					    "record at offset %llu: %s",
					    pd->name, (unsigned long long) off,
					    ZSTD_getErrorName(r));
		pv->zlen = out.pos;
		if ((rc = unpacked(pd, off)) < 0)
			return rc;
	}
	return 0;
#else
	(void) type;
	(void) b;
	(void) blen;
	(void) off;
	return htr_err__set(pd->priv->err, HTR_ERR_FORMAT, "%s: compressed "
			    "perf.data (perf record -z), and this htr was "
			    "built without zstd: 'perf inject -i %s -o "
			    "plain.data' writes it uncompressed", pd->name,
			    pd->name);
#endif
}

static int record(struct htr_perfdata *pd, unsigned type, unsigned misc,
		  const uint8_t *b, uint64_t blen, uint64_t off, uint64_t end,
		  uint64_t *payload)
{
	struct htr_perf_thread *t;
	struct proc *p;
	struct sid sid;
	uint32_t pid, tid;
	uint64_t flags;
	long sl;

	switch (type) {
	case REC_MMAP:
	case REC_MMAP2:
		return rec_mmap(pd, type, misc, b, blen, off);
	case REC_COMM:
		if (blen < 9)
			return corrupt(pd, "COMM record at offset %llu of %llu "
				       "bytes", off, blen + 8);
		sl = bounded_str(b + 8, blen - 8);
		if (sl < 0)
			return corrupt(pd, "COMM record at offset %llu: "
				       "unterminated name%.0llu", off, 0);
		pid = (uint32_t) le(b, 4);
		tid = (uint32_t) le(b + 4, 4);
		if (!(t = thread_get(pd, pid, tid, 1)))
			return nomem(pd);
		t->pid = pid;
		snprintf(t->comm, sizeof(t->comm), "%s", (const char *) b + 8);
		if (misc & MISC_COMM_EXEC) {
			if (!(p = proc_get(pd, pid)))
				return nomem(pd);
			p->exec_seq = pd->nrecords;
		}
		return 0;
	case REC_FORK:
	case REC_EXIT:
		if (blen < 24)
			return corrupt(pd, "FORK/EXIT record at offset %llu of "
				       "%llu bytes", off, blen + 8);
		pid = (uint32_t) le(b, 4);
		tid = (uint32_t) le(b + 8, 4);
		if (type == REC_EXIT) {
			if ((t = thread_get(pd, pid, tid, 0)))
				t->exited = 1;
			return 0;
		}
		{
			uint32_t ppid = (uint32_t) le(b + 4, 4);
			uint32_t ptid = (uint32_t) le(b + 12, 4);
			struct htr_perf_thread *pt = thread_get(pd, ppid, ptid,
								0);
			char comm[32] = "";

			if (pt)
				memcpy(comm, pt->comm, sizeof(comm));
			if (!(t = thread_get(pd, pid, tid, 1)))
				return nomem(pd);
			t->pid = pid;
			if (!t->comm[0])
				memcpy(t->comm, comm, sizeof(comm));
			if (pid != ppid) {
				if (!(p = proc_get(pd, pid)))
					return nomem(pd);
				p->ppid = ppid;
				p->forked = 1;
				p->fork_seq = pd->nrecords;
			}
		}
		return 0;
	case REC_ITRACE_START:
		if (blen < 8)
			return corrupt(pd, "ITRACE_START record at offset %llu "
				       "of %llu bytes", off, blen + 8);
		pid = (uint32_t) le(b, 4);
		tid = (uint32_t) le(b + 4, 4);
		if (!(t = thread_get(pd, pid, tid, 1)))
			return nomem(pd);
		t->pid = pid;
		return 0;
	case REC_AUX:
		if (blen < 24)
			return corrupt(pd, "AUX record at offset %llu of %llu "
				       "bytes", off, blen + 8);
		flags = le(b + 16, 8);
		if (trailer(pd, b, blen, 24, &sid) < 0)
			return 0;
		if (pd->pt.per_cpu_mmaps && sid.has_cpu) {
			struct htr_perf_cpu *pc = cpu_get(pd, sid.cpu);

			if (!pc)
				return nomem(pd);
			pc->aux_truncated += !!(flags & AUX_FLAG_TRUNCATED);
			pc->aux_lost += !!(flags & (AUX_FLAG_PARTIAL |
						    AUX_FLAG_COLLISION));
			return 0;
		}
		if (!sid.has_tid || !(t = thread_get(pd, 0, sid.tid, 0)))
			return 0;
		t->aux_truncated += !!(flags & AUX_FLAG_TRUNCATED);
		t->aux_lost += !!(flags & (AUX_FLAG_PARTIAL |
					   AUX_FLAG_COLLISION));
		return 0;
	case REC_SWITCH:
	case REC_SWITCH_CPU_WIDE:
		return rec_switch(pd, type, misc, b, blen, off);
	case REC_HEADER_ATTR:
		if (!pd->pipe)
			return 0;
		if (blen < ATTR_SIZE_VER0 || le(b + 4, 4) < ATTR_SIZE_VER0 ||
		    le(b + 4, 4) > blen)
			return corrupt(pd, "HEADER_ATTR record at offset %llu "
				       "of %llu bytes", off, blen + 8);
		flags = le(b + 4, 4);
		return add_attr(pd, b, flags, b + flags, blen - flags);
	case REC_HEADER_FEATURE:
		if (!pd->pipe)
			return 0;
		if (blen < 8)
			return corrupt(pd, "HEADER_FEATURE record at offset "
				       "%llu of %llu bytes", off, blen + 8);
		flags = le(b, 8);
		return flags < 256 ? feature(pd, (unsigned) flags, b + 8,
					     blen - 8) : 0;
	case REC_TRACING_DATA:
		/* The tracing data follows the record (pipe mode). */
		if (blen < 4)
			return corrupt(pd, "TRACING_DATA record at offset %llu "
				       "of %llu bytes", off, blen + 8);
		*payload = le(b, 4);
		if (*payload > end - (off + 8 + blen))
			return corrupt(pd, "TRACING_DATA record at offset %llu:"
				       " %llu bytes past the data", off,
				       *payload);
		return 0;
	case REC_AUXTRACE_INFO:
		return rec_auxtrace_info(pd, b, blen, off);
	case REC_AUXTRACE:
		return rec_auxtrace(pd, b, blen, off, end, payload);
	case REC_COMPRESSED:
	case REC_COMPRESSED2:
		return rec_compressed(pd, type, b, blen, off);
	default:
		return 0;
	}
}

static int records(struct htr_perfdata *pd, uint64_t off, uint64_t end)
{
	uint64_t size, payload;
	unsigned type, misc;
	int rc;

	while (off < end) {
		if (end - off < 8)
			return corrupt(pd, "record header at offset %llu cut "
				       "short (%llu bytes left)", off,
				       end - off);
		type = (unsigned) le(pd->data + off, 4);
		misc = (unsigned) le(pd->data + off + 4, 2);
		size = le(pd->data + off + 6, 2);
		if (size < 8 || size > end - off)
			return corrupt(pd, "record at offset %llu has size "
				       "%llu", off, size);
		payload = 0;
		rc = record(pd, type, misc, pd->data + off + 8, size - 8, off,
			    end, &payload);
		if (rc < 0)
			return rc;
		pd->nrecords++;
		off += size + payload;
	}
#ifdef HTR_HAVE_ZSTD
	if (pd->priv->zlen)
		return corrupt(pd, "the compressed records end inside a record "
			       "(%llu bytes of it)%.0llu", pd->priv->zlen, 0);
#endif
	return 0;
}

static int file_header(struct htr_perfdata *pd)
{
	const uint8_t *h = pd->data;
	uint64_t hsize, asz, aoff, alen, doff, dlen, ent, i, k, toff;
	int rc;

	hsize = le(h + 8, 8);
	if (hsize < FILE_HEADER_SIZE || hsize > pd->size)
		return corrupt(pd, "header size %llu (file of %llu bytes)",
			       hsize, pd->size);
	asz = le(h + 16, 8);
	aoff = le(h + 24, 8);
	alen = le(h + 32, 8);
	doff = le(h + 40, 8);
	dlen = le(h + 48, 8);
	if (!in_file(pd, aoff, alen))
		return corrupt(pd, "attrs section (offset %llu, %llu bytes) "
			       "past the end", aoff, alen);
	if (!in_file(pd, doff, dlen))
		return corrupt(pd, "data section (offset %llu, %llu bytes) "
			       "past the end", doff, dlen);
	/* attr_size is the size of an attrs entry: the perf_event_attr,
	 * then the (offset, size) of its ids. */
	if (asz < ATTR_SIZE_VER0 + 16 || asz > 4096)
		return corrupt(pd, "attr size %llu%.0llu", asz, 0);
	ent = asz;
	asz -= 16;
	if (alen % ent)
		return corrupt(pd, "attrs section of %llu bytes is no multiple "
			       "of %llu", alen, ent);
	for (i = 0; i < alen / ent; i++) {
		const uint8_t *a = pd->data + aoff + i * ent;
		uint64_t ioff = le(a + asz, 8), ilen = le(a + asz + 8, 8);

		if (!in_file(pd, ioff, ilen))
			return corrupt(pd, "ids of attr %llu past the end "
				       "(%llu bytes)", i, ilen);
		rc = add_attr(pd, a, asz, pd->data + ioff, ilen);
		if (rc < 0)
			return rc;
	}
	/* Feature sections: a table right after the data, one entry per
	 * bit set in adds_features (bits 1..255, in order). */
	toff = doff + dlen;
	for (k = 1; k < 256; k++) {
		uint64_t foff, flen;

		if (!(le(h + 72 + (k / 64) * 8, 8) >> (k % 64) & 1))
			continue;
		if (!in_file(pd, toff, 16))
			return corrupt(pd, "feature table entry %llu past the "
				       "end (offset %llu)", k, toff);
		foff = le(pd->data + toff, 8);
		flen = le(pd->data + toff + 8, 8);
		toff += 16;
		if (k != FEAT_BUILD_ID && k != FEAT_NRCPUS &&
		    k != FEAT_CPUID && k != FEAT_PMU_MAPPINGS &&
		    k != FEAT_CLOCK_DATA)
			continue;
		if (!in_file(pd, foff, flen))
			return corrupt(pd, "feature %llu section past the end "
				       "(%llu bytes)", k, flen);
		rc = feature(pd, (unsigned) k, pd->data + foff, flen);
		if (rc < 0)
			return rc;
	}
	return records(pd, doff, doff + dlen);
}

/* Sort by (cpu, time), keeping record order among equals: a merge sort
 * (qsort is not stable), O(n log n) with one temporary array. */
static int sort_switches(struct htr_perf_switch *v, size_t n)
{
	struct htr_perf_switch *tmp = malloc(n * sizeof(*tmp));
	size_t w, i, lo, mid, hi, a, b;

	if (!tmp)
		return -1;
	for (w = 1; w < n; w *= 2) {
		for (lo = 0; lo < n; lo += 2 * w) {
			mid = lo + w < n ? lo + w : n;
			hi = lo + 2 * w < n ? lo + 2 * w : n;
			for (i = lo, a = lo, b = mid; i < hi; i++) {
				if (a < mid && (b >= hi ||
				    v[a].cpu < v[b].cpu ||
				    (v[a].cpu == v[b].cpu &&
				     v[a].time <= v[b].time)))
					tmp[i] = v[a++];
				else
					tmp[i] = v[b++];
			}
		}
		memcpy(v, tmp, n * sizeof(*v));
	}
	free(tmp);
	return 0;
}

uint64_t htr_perfdata__ns_to_tsc(uint64_t shift, uint64_t mult, uint64_t zero,
				 uint64_t ns)
{
	uint64_t t, quot, rem;

	if (!mult || shift > 63)
		return ns;
	t = ns > zero ? ns - zero : 0;
	quot = t / mult;
	rem = t % mult;
	/* (quot << shift) + (rem << shift) / mult, saturating. */
	if (shift && quot > (UINT64_MAX >> shift))
		return UINT64_MAX;
	{
		__extension__ unsigned __int128 r =
			((unsigned __int128) rem << shift) / mult;
		uint64_t q = quot << shift;

		return r > UINT64_MAX - q ? UINT64_MAX : q + (uint64_t) r;
	}
}

uint64_t htr_perfdata__time_to_tsc(const struct htr_perfdata *pd, uint64_t ns)
{
	const struct htr_perf_pt *pt = &pd->pt;

	if (!pt->present)
		return ns;
	return htr_perfdata__ns_to_tsc(pt->time_shift, pt->time_mult,
				       pt->time_zero, ns);
}

/* After the records: the intel_pt attr, build-ids, derived fields. */
static int finish(struct htr_perfdata *pd)
{
	struct htr_perf_priv *pv = pd->priv;
	struct htr_perf_pt *pt = &pd->pt;
	uint32_t type = pt->present ? pt->pmu_type : pv->pmu_mapping_type;
	size_t i, j;

	if (pt->present || pv->have_pmu_mapping)
		for (i = 0; i < pv->nattrs; i++)
			if (pv->attrs[i].type == type) {
				pt->config = pv->attrs[i].config;
				pt->have_attr = 1;
				pt->kernel = !(pv->attrs[i].flags &
					       ATTR_EXCLUDE_KERNEL);
				break;
			}
	if (pt->have_attr) {
		pt->tsc = pt->tsc_bit && (pt->config & pt->tsc_bit);
		pt->noretcomp = pt->noretcomp_bit &&
				(pt->config & pt->noretcomp_bit);
		pt->mtc = pt->mtc_bit && (pt->config & pt->mtc_bit);
		pt->cyc = pt->cyc_bit && (pt->config & pt->cyc_bit);
		if (pt->mtc && pt->mtc_freq_bits) {
			uint64_t m = pt->mtc_freq_bits, v = pt->config & m;

			while (!(m & 1)) {
				m >>= 1;
				v >>= 1;
			}
			pt->mtc_freq = (uint8_t) (v & 0xff);
		}
		/* cyc_thresh: config bits 22:19 (the PMU's format). */
		pt->cyc_thresh = (uint8_t) ((pt->config >> 19) & 0xf);
	}
	for (i = 0; i < pd->nmodules; i++) {
		struct htr_perf_module *m = &pd->modules[i];

		if (m->build_id_size)
			continue;
		for (j = 0; j < pv->nbids; j++)
			if (!strcmp(pv->bids[j].path, m->path)) {
				memcpy(m->build_id, pv->bids[j].id, 20);
				m->build_id_size = pv->bids[j].size;
				break;
			}
	}
	/* Switches by CPU, then time; equal times keep record order. */
	if (pd->nswitches && sort_switches(pd->switches, pd->nswitches) < 0)
		return nomem(pd);
	/* Threads that only had trace: their pid from the sideband. */
	for (i = 0; i < pd->nthreads; i++)
		if (pd->threads[i].pid == UINT32_MAX)
			pd->threads[i].pid = pd->threads[i].tid;
	return 0;
}

int htr_perfdata__parse(struct htr_perfdata **out, const void *data,
			size_t size, const char *name, struct htr_err *err)
{
	struct htr_perfdata *pd;
	int rc;

	if (!out)
		return htr_err__set(err, HTR_ERR_INVALID, "no output");
	*out = NULL;
	pd = calloc(1, sizeof(*pd));
	if (pd)
		pd->priv = calloc(1, sizeof(*pd->priv));
	if (pd && pd->priv)
		pd->name = strdup(name ? name : "(memory)");
	if (!pd || !pd->priv || !pd->name) {
		htr_perfdata__close(pd);
		return htr_err__set(err, HTR_ERR_NOMEM, "%s: out of memory",
				    name ? name : "(memory)");
	}
	pd->priv->err = err;
	pd->data = data;
	pd->size = size;
	if (size < 8 || memcmp(data, "PERFILE2", 8)) {
		if (size >= 8 && !memcmp(data, "2ELIFREP", 8))
			rc = htr_err__set(err, HTR_ERR_FORMAT, "%s: a "
					  "big-endian perf.data: not "
					  "supported", pd->name);
		else if (size >= 8 && !memcmp(data, "PERFFILE", 8))
			rc = htr_err__set(err, HTR_ERR_FORMAT, "%s: perf.data "
					  "version 1: not supported",
					  pd->name);
		else
			rc = htr_err__set(err, HTR_ERR_FORMAT, "%s: not a "
					  "perf.data file (no PERFILE2 magic)",
					  pd->name);
		goto fail;
	}
	if (size < 16) {
		rc = corrupt(pd, "header cut short at %llu bytes%.0llu",
			     size, 0);
		goto fail;
	}
	if (le(pd->data + 8, 8) == PIPE_HEADER_SIZE) {
		pd->pipe = 1;
		rc = records(pd, PIPE_HEADER_SIZE, pd->size);
	} else if (size < FILE_HEADER_SIZE) {
		rc = corrupt(pd, "header cut short at %llu bytes%.0llu",
			     size, 0);
	} else {
		rc = file_header(pd);
	}
	if (rc < 0)
		goto fail;
	if (!pd->pt.present && !pd->nthreads) {
		rc = htr_err__set(err, HTR_ERR_FORMAT, "%s: no Intel PT in "
				  "this perf.data (record with -e intel_pt//u)",
				  pd->name);
		goto fail;
	}
	rc = finish(pd);
	if (rc < 0)
		goto fail;
	pd->priv->err = NULL;
	*out = pd;
	return 0;
fail:
	pd->priv->err = NULL;
	htr_perfdata__close(pd);
	return rc;
}

int htr_perfdata__open(struct htr_perfdata **out, const char *path,
		       struct htr_err *err)
{
	struct stat st;
	void *map = NULL;
	size_t sz;
	int fd, rc;

	if (!out || !path)
		return htr_err__set(err, HTR_ERR_INVALID, "no file");
	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return htr_err__sys(err, "%s", path);
	if (fstat(fd, &st) < 0) {
		rc = htr_err__sys(err, "%s", path);
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return htr_err__set(err, HTR_ERR_IO, "%s: not a regular file "
				    "(a pipe-format perf.data must be saved "
				    "to a file first)", path);
	}
	sz = (size_t) st.st_size;
	if (sz) {
		map = mmap(NULL, sz, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			rc = htr_err__sys(err, "%s: mmap", path);
			close(fd);
			return rc;
		}
	}
	close(fd);
	rc = htr_perfdata__parse(out, sz ? map : "", sz, path, err);
	if (rc < 0) {
		if (map)
			munmap(map, sz);
		return rc;
	}
	(*out)->map = map;
	(*out)->map_size = sz;
	return 0;
}

void htr_perfdata__close(struct htr_perfdata *pd)
{
	size_t i;

	if (!pd)
		return;
	if (pd->map)
		munmap(pd->map, pd->map_size);
	for (i = 0; i < pd->nthreads; i++)
		free(pd->threads[i].chunks);
	free(pd->threads);
	for (i = 0; i < pd->ncpus; i++)
		free(pd->cpus[i].chunks);
	free(pd->cpus);
	free(pd->switches);
	for (i = 0; i < pd->nmodules; i++)
		free(pd->modules[i].path);
	free(pd->modules);
	free(pd->pt.filter);
	if (pd->priv) {
		for (i = 0; i < pd->priv->nbids; i++)
			free(pd->priv->bids[i].path);
		free(pd->priv->bids);
		free(pd->priv->attrs);
		free(pd->priv->procs);
#ifdef HTR_HAVE_ZSTD
		ZSTD_freeDStream(pd->priv->zd);
		free(pd->priv->zbuf);
#endif
		free(pd->priv);
	}
	free(pd->name);
	free(pd);
}

int htr_perfdata__thread_has(const struct htr_perfdata *pd,
			     const struct htr_perf_thread *t,
			     const struct htr_perf_module *m)
{
	const struct htr_perf_priv *pv = pd->priv;
	uint32_t pid = t->pid;
	uint64_t before = UINT64_MAX;
	unsigned depth;
	size_t i;

	/* Walk up the fork chain: the process's own mappings after its
	 * exec, then its parent's made before the fork (and after the
	 * parent's exec), ... */
	for (depth = 0; depth < 64; depth++) {
		const struct proc *p = NULL;

		for (i = 0; i < pv->nprocs; i++)
			if (pv->procs[i].pid == pid)
				p = &pv->procs[i];
		if (m->pid == pid)
			return m->seq < before &&
			       (!p || m->seq >= p->exec_seq);
		if (!p || !p->forked || (p->exec_seq && p->exec_seq >
					 p->fork_seq))
			return 0;
		before = p->fork_seq < before ? p->fork_seq : before;
		pid = p->ppid;
	}
	return 0;
}

int htr_perfdata__elf_base(const char *path, const struct htr_perf_module *m,
			   uint64_t *base, struct htr_err *err)
{
	uint64_t lowest = UINT64_MAX, link = 0;
	struct htr_elf ef;
	size_t n, i;
	GElf_Phdr ph;
	Elf *elf;
	int best = 0, rc;

	rc = htr_elf__open(&ef, path, NULL, 0, err);
	if (rc < 0)
		return rc;
	elf = ef.elf;
	elf_getphdrnum(elf, &n);       /* checked by htr_elf__open() */
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int) i, &ph)) {
			rc = htr_err__set(err, HTR_ERR_FORMAT, "%s: program "
					  "header %zu: %s", path, i,
					  elf_errmsg(-1));
			goto out;
		}
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_vaddr < lowest)
			lowest = ph.p_vaddr;
		/* The segment mapped there: the loader maps each one from
		 * its offset's page, so the best is an executable segment
		 * starting on pgoff's page, then any starting there, then
		 * one holding pgoff (a mapping split by mprotect).  lld
		 * starts a segment in the page where the previous one ends,
		 * one page higher in memory: two segments hold that page. */
		if (m->pgoff >= (ph.p_offset & ~(uint64_t) 0xfff) &&
		    m->pgoff - (ph.p_offset & ~(uint64_t) 0xfff) <=
		    ph.p_filesz + (ph.p_offset & 0xfff)) {
			int score = 1 + ((ph.p_offset & ~(uint64_t) 0xfff) ==
					 m->pgoff) * 2 + !!(ph.p_flags & PF_X);

			if (score > best) {
				link = ph.p_vaddr - (ph.p_offset - m->pgoff);
				best = score;
			}
		}
	}
	if (!best) {
		rc = htr_err__set(err, HTR_ERR_FORMAT, "%s: no PT_LOAD segment "
				  "holds file offset 0x%llx of the mapping at "
				  "0x%llx", path, (unsigned long long) m->pgoff,
				  (unsigned long long) m->addr);
		goto out;
	}
	/* Modular arithmetic: a mapping below the link address works. */
	*base = lowest + (m->addr - link);
out:
	htr_elf__close(&ef);
	return rc;
}

int htr_perfdata__elf_build_id(const char *path, uint8_t id[20],
			       size_t *size, struct htr_err *err)
{
	struct htr_elf ef;
	int rc = htr_elf__open(&ef, path, NULL, 0, err);

	*size = 0;
	if (rc < 0)
		return rc;
	*size = htr_elf__build_id(ef.elf, id, 20);
	htr_elf__close(&ef);
	return 0;
}

int htr_perfdata__mem_build_id(void *image, size_t n, uint8_t id[20],
			       size_t *size)
{
	struct htr_elf ef;

	*size = 0;
	if (htr_elf__memory(&ef, image, n, NULL) < 0)
		return HTR_ERR_FORMAT;
	*size = htr_elf__build_id(ef.elf, id, 20);
	htr_elf__close(&ef);
	return 0;
}

int htr_perfdata__join(const uint8_t *base, const struct htr_perf_chunk *c,
		       size_t n, struct htr_perf_joined *j,
		       struct htr_err *err)
{
	uint64_t total = 0;
	size_t i;
	int fd;

	memset(j, 0, sizeof(*j));
	for (i = 0; i < n; i++)
		total += c[i].size;
	j->size = total;
	if (n <= 1 || !total) {
		j->data = n ? base + c[0].offset : base;
		return 0;
	}
	fd = htr_tmp__open("trace", err);
	if (fd < 0)
		return err->code;
	for (i = 0; i < n; i++) {
		if (htr_tmp__write(fd, base + c[i].offset, c[i].size) < 0) {
			int rc = htr_err__sys(err, "joining the trace's "
					      "buffers in a temporary file");

			close(fd);
			return rc;
		}
	}
	j->map = mmap(NULL, (size_t) total, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (j->map == MAP_FAILED) {
		j->map = NULL;
		return htr_err__sys(err, "mapping the joined trace");
	}
	j->map_size = (size_t) total;
	j->data = j->map;
	return 0;
}

void htr_perfdata__unjoin(struct htr_perf_joined *j)
{
	if (j->map)
		munmap(j->map, j->map_size);
	memset(j, 0, sizeof(*j));
}

/* Whether the filter's @file is the module at @path: the same name, or
 * the same file under another name (perf record keeps the name the user
 * gave, the kernel records the mapping's full path).  @loose: a relative
 * name that ends @path ("./prog" for "/home/u/prog", when this is not
 * the directory perf record ran in). */
static int same_module(const char *file, const char *path, int loose)
{
	struct stat a, b;
	size_t fl, pl;

	if (loose) {
		while (!strncmp(file, "./", 2))
			file += 2;
		fl = strlen(file);
		pl = strlen(path);
		return file[0] != '/' && fl && fl < pl &&
		       path[pl - fl - 1] == '/' && !strcmp(path + pl - fl, file);
	}
	if (!strcmp(file, path))
		return 1;
	return stat(file, &a) == 0 && stat(path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Place [@off, @off + @size) of @file in @t's address space as the kernel
 * does (perf_addr_filter_vma_adjust): in the last mapping of the file that
 * holds part of it, clipped to that mapping.  A relative name that is no
 * file here stands for the one module whose path it ends.  0 if @t maps
 * none (or, so named, more than one). */
static int place(const struct htr_perfdata *pd, const struct htr_perf_thread *t,
		 const char *file, uint64_t off, uint64_t size,
		 struct htr_addr_filter *r)
{
	const struct htr_perf_module *best = NULL;
	size_t i;
	int loose;

	for (loose = 0; loose < 2 && !best; loose++) {
		for (i = 0; i < pd->nmodules; i++) {
			const struct htr_perf_module *m = &pd->modules[i];

			if (!m->path || !m->len ||
			    m->pgoff > UINT64_MAX - m->len ||
			    m->addr > UINT64_MAX - m->len ||
			    off >= m->pgoff + m->len ||
			    off + size <= m->pgoff ||
			    !htr_perfdata__thread_has(pd, t, m) ||
			    !same_module(file, m->path, loose))
				continue;
			if (best && loose && strcmp(best->path, m->path))
				return 0;
			if (!best || m->seq > best->seq)
				best = m;
		}
	}
	if (!best)
		return 0;
	if (off < best->pgoff) {
		r->start = best->addr;
		size -= best->pgoff - off;
	} else {
		r->start = best->addr + (off - best->pgoff);
	}
	r->end = best->addr + best->len;
	if (size < r->end - r->start)
		r->end = r->start + size;
	return 1;
}

int htr_perfdata__filters(const struct htr_perfdata *pd,
			  const struct htr_perf_thread *t,
			  struct htr_addr_filter *out, unsigned *unplaced,
			  struct htr_err *err)
{
	char *s, *tok, *save = NULL;
	unsigned n = 0;
	int kind = 0, rc = 0;

	*unplaced = 0;
	if (!pd->pt.filter || !pd->pt.filter[0])
		return 0;
	s = strdup(pd->pt.filter);
	if (!s)
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	for (tok = strtok_r(s, " ,\n\t", &save); tok && rc == 0;
	     tok = strtok_r(NULL, " ,\n\t", &save)) {
		struct htr_addr_filter r;
		uint64_t a, size = 0;
		char *e, *file = NULL;

		if (!kind) {
			/* perf names TraceStop "tracestop", the kernel
			 * "stop"; "start" is not Intel PT's */
			if (!strcmp(tok, "filter"))
				kind = HTR_FILTER_TRACE;
			else if (!strcmp(tok, "stop") ||
				 !strcmp(tok, "tracestop"))
				kind = HTR_FILTER_STOP;
			else
				rc = HTR_ERR_FORMAT;
			continue;
		}
		errno = 0;
		a = strtoull(tok, &e, 0);
		if (*e == '/')
			size = strtoull(e + 1, &e, 0);
		if (*e == '@' && e[1])
			file = e + 1;
		else if (*e)
			rc = HTR_ERR_FORMAT;
		if (rc || errno || !size || a > UINT64_MAX - size) {
			rc = HTR_ERR_FORMAT;
			break;
		}
		r.kind = kind;
		kind = 0;
		if (!file) {
			r.start = a;
			r.end = a + size;
		} else if (!place(pd, t, file, a, size, &r)) {
			++*unplaced;
			continue;
		}
		if (n == HTR_ADDR_FILTERS_MAX) {
			free(s);
			return htr_err__set(err, HTR_ERR_FORMAT, "%s: more "
					    "than %d address filter ranges in "
					    "'%s'", pd->name,
					    HTR_ADDR_FILTERS_MAX, pd->pt.filter);
		}
		out[n++] = r;
	}
	free(s);
	if (rc || kind)
		return htr_err__set(err, HTR_ERR_FORMAT, "%s: cannot read the "
				    "address filter '%s'", pd->name,
				    pd->pt.filter);
	return (int) n;
}

/* ------------------------------------------------------------------ */
/* user+kernel traces without the kernel's code: htr_perfdata__user_only */

enum { KS_OFF, KS_USER, KS_KERNEL };

struct kstrip {
	int fd;
	uint8_t buf[1u << 16];
	size_t n;
	uint64_t out;
	int failed;
};

static void ks_put(struct kstrip *k, const uint8_t *p, size_t n)
{
	if (k->failed)
		return;
	if (k->n + n > sizeof(k->buf)) {
		if (htr_tmp__write(k->fd, k->buf, k->n) < 0) {
			k->failed = 1;
			return;
		}
		k->n = 0;
	}
	if (n > sizeof(k->buf)) {
		if (htr_tmp__write(k->fd, p, n) < 0)
			k->failed = 1;
	} else {
		memcpy(k->buf + k->n, p, n);
		k->n += n;
	}
	k->out += n;
}

/* An IP packet (@hdr: 0x0d TIP, 0x11 TIP.PGE, 0x01 TIP.PGD, 0x1d FUP)
 * with @ip uncompressed, or suppressed (@suppress). */
static void ks_ip(struct kstrip *k, uint8_t hdr, uint64_t ip, int suppress)
{
	uint8_t p[9];
	unsigned i, n;

	if (suppress) {
		ks_put(k, &hdr, 1);
		return;
	}
	/* 48 bits sign-extended (IPBytes 011) when that gives @ip. */
	if ((uint64_t) ((int64_t) (ip << 16) >> 16) == ip) {
		p[0] = (uint8_t) (hdr | 3u << 5);
		n = 6;
	} else {
		p[0] = (uint8_t) (hdr | 6u << 5);
		n = 8;
	}
	for (i = 0; i < n; i++)
		p[1 + i] = (uint8_t) (ip >> (8 * i));
	ks_put(k, p, 1 + n);
}

/* The IP of an IP packet @ip after @last (libipt's packet decoder gives
 * the payload; the last-IP rule is the decoder's, not exported). */
static uint64_t ks_ipval(const struct pt_packet_ip *ip, uint64_t last)
{
	switch (ip->ipc) {
	case pt_ipc_update_16: return (last & ~0xffffull) | ip->ip;
	case pt_ipc_update_32: return (last & ~0xffffffffull) | ip->ip;
	case pt_ipc_sext_48:
		return (uint64_t) ((int64_t) (ip->ip << 16) >> 16);
	case pt_ipc_update_48: return (last & ~0xffffffffffffull) | ip->ip;
	case pt_ipc_full: return ip->ip;
	default: return last;
	}
}

/* The offset of the first PSB at or after @from that the packet decoder
 * @d syncs to, or @size. */
static uint64_t ks_next_psb(struct pt_packet_decoder *d, uint64_t from,
			    uint64_t size)
{
	uint64_t off;

	while (pt_pkt_sync_forward(d) >= 0 &&
	       pt_pkt_get_sync_offset(d, &off) >= 0 && off <= size)
		if (off >= from)
			return off;
	return size;
}

#define KS_IS_KERNEL(ip) ((ip) >> 63)

int htr_perfdata__user_only(struct htr_perf_joined *j,
			    struct htr_perf_kstats *ks, struct htr_err *err)
{
	struct htr_perf_kstats st = { 0, 0, 0 };
	const uint8_t *t = j->data;
	uint64_t size = j->size, at = 0, last = 0, ip;
	struct kstrip *k;
	struct htr_perf_joined out;
	uint8_t mode = 0x01, m[2];          /* MODE.Exec: 64-bit */
	int state = KS_OFF, in_psb = 0, after_ovf = 0;
	struct pt_packet_decoder *d;
	struct pt_config cfg;
	size_t n;

	k = malloc(sizeof(*k));
	if (!k)
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	k->n = 0;
	k->out = 0;
	k->failed = 0;
	k->fd = htr_tmp__open("user", err);
	if (k->fd < 0) {
		int rc = err->code;

		free(k);
		return rc;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.begin = (uint8_t *) t;
	cfg.end = (uint8_t *) t + size;
	d = pt_pkt_alloc_decoder(&cfg);
	if (!d) {
		close(k->fd);
		free(k);
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	}
	/* Before the first PSB the decoder reads nothing: copied. */
	at = ks_next_psb(d, 0, size);
	ks_put(k, t, (size_t) at);
	while (at < size && !k->failed) {
		const uint8_t *p = t + at;
		struct pt_packet pkt;
		uint64_t nx;
		int keep = 0, rc = pt_pkt_next(d, &pkt, sizeof(pkt));

		if (rc < 0 || pt_pkt_get_offset(d, &nx) < 0 || nx <= at) {
			/* Not a packet: as it is, up to the next PSB. */
			nx = ks_next_psb(d, at + 1, size);
			st.bad++;
			ks_put(k, p, (size_t) (nx - at));
			at = nx;
			state = KS_OFF;
			in_psb = after_ovf = 0;
			continue;
		}
		n = (size_t) (nx - at);
		switch (pkt.type) {
		case ppt_fup:
		case ppt_tip:
		case ppt_tip_pge:
		case ppt_tip_pgd: {
			int sup = pkt.payload.ip.ipc == pt_ipc_suppressed;

			ip = last = ks_ipval(&pkt.payload.ip, last);
			switch (pkt.type) {
			case ppt_fup:
				if (in_psb || after_ovf) {
					after_ovf = 0;
					state = KS_IS_KERNEL(ip) ? KS_KERNEL
								 : KS_USER;
				}
				if (state == KS_USER && !KS_IS_KERNEL(ip))
					ks_ip(k, 0x1d, ip, 0);
				else
					st.bytes += n;
				break;
			case ppt_tip:
				if (state == KS_USER && !KS_IS_KERNEL(ip)) {
					ks_ip(k, 0x0d, ip, 0);
				} else if (state == KS_USER) {
					ks_ip(k, 0x01, ip, 0);
					state = KS_KERNEL;
					st.stretches++;
					st.bytes += n;
				} else if (!KS_IS_KERNEL(ip)) {
					m[0] = 0x99;
					m[1] = mode;
					ks_put(k, m, 2);
					ks_ip(k, 0x11, ip, 0);
					state = KS_USER;
				} else {
					st.bytes += n;
				}
				break;
			case ppt_tip_pge:
				if (!sup && KS_IS_KERNEL(ip)) {
					state = KS_KERNEL;
					st.bytes += n;
					break;
				}
				if (state != KS_USER) {
					m[0] = 0x99;
					m[1] = mode;
					ks_put(k, m, 2);
				}
				ks_ip(k, 0x11, ip, sup);
				state = KS_USER;
				break;
			default:                    /* TIP.PGD */
				if (state == KS_USER)
					ks_ip(k, 0x01, ip, sup);
				else
					st.bytes += n;
				state = KS_OFF;
				break;
			}
			at = nx;
			continue;
		}
		case ppt_psb:                       /* last IP 0 */
			in_psb = 1;
			last = 0;
			keep = 1;
			break;
		case ppt_psbend:
			in_psb = 0;
			keep = 1;
			break;
		case ppt_ovf:                       /* a FUP says where */
			after_ovf = 1;
			state = KS_OFF;
			keep = 1;
			break;
		case ppt_tnt_8:                     /* the kernel's left out */
		case ppt_tnt_64:
		case ppt_exstop:
		case ppt_mwait:
		case ppt_ptw:
			keep = state == KS_USER;
			break;
		case ppt_pip:
		case ppt_vmcs:
			/* The kernel's CR3 writes: nothing the user code's
			 * decoding needs (the walk would give up on them). */
			keep = in_psb || state == KS_USER;
			break;
		case ppt_mode:
			if (pkt.payload.mode.leaf == pt_mol_exec)
				mode = p[1];
			keep = in_psb || state == KS_USER;
			break;
		default:                            /* timing and the rest */
			keep = 1;
			break;
		}
		if (keep)
			ks_put(k, p, n);
		else
			st.bytes += n;
		at = nx;
	}
	pt_pkt_free_decoder(d);
	if (!k->failed && k->n && htr_tmp__write(k->fd, k->buf, k->n) < 0)
		k->failed = 1;
	memset(&out, 0, sizeof(out));
	if (!k->failed && k->out) {
		out.map = mmap(NULL, (size_t) k->out, PROT_READ, MAP_SHARED,
			       k->fd, 0);
		if (out.map == MAP_FAILED)
			k->failed = 1;
	}
	close(k->fd);
	if (k->failed) {
		free(k);
		return htr_err__sys(err, "writing the user-space trace to a "
				    "temporary file");
	}
	out.size = k->out;
	out.map_size = (size_t) k->out;
	out.data = out.map ? out.map : j->data;
	free(k);
	htr_perfdata__unjoin(j);
	*j = out;
	if (ks)
		*ks = st;
	return 0;
}

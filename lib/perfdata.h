/*
 * perf.data reader (internal): what `htr build FILE.data` needs of a
 * recording made with `perf record -e intel_pt//u` (or `htr record`).
 *
 * Written from perf's documentation (tools/perf/Documentation/
 * perf.data-file-format.txt, intel-pt.txt) and the record layouts of
 * <linux/perf_event.h>.  Both layouts are read: the file format (header,
 * attrs section, data section, feature sections after the data) and the
 * pipe format (a 16-byte header, then records only: HEADER_ATTR and
 * HEADER_FEATURE carry what the file keeps in sections).
 *
 * Every size and offset is checked against the file: a corrupt or
 * truncated file gives HTR_ERR_FORMAT (not a perf.data, or a kind not
 * supported) or HTR_ERR_CORRUPT with a one-line message naming the file.
 *
 * Memory: the file is mapped read-only (or, for
 * htr_perfdata__parse(), the caller's bytes are borrowed); the PT data is
 * never copied: each thread keeps the (offset, size) of its AUXTRACE
 * payloads.  Everything else is O(records of sideband).
 *
 * A struct htr_perfdata is read-only once opened and may be shared by
 * threads; it keeps no global state.
 */
#ifndef HTR_LIB_PERFDATA_H
#define HTR_LIB_PERFDATA_H

#include "err.h"
#include "htr/build.h"

#include <stddef.h>
#include <stdint.h>

/* The intel_pt PMU's recording parameters (AUXTRACE_INFO, the attr). */
struct htr_perf_pt {
	int present;               /* an Intel PT AUXTRACE_INFO was read */
	uint32_t pmu_type;
	uint64_t time_shift, time_mult, time_zero;
	int cap_user_time_zero;
	/* Config bit masks of the PMU (priv words) and the event's config. */
	uint64_t tsc_bit, noretcomp_bit, mtc_bit, mtc_freq_bits, cyc_bit;
	uint64_t config;           /* the intel_pt event's attr.config */
	int have_attr;             /* config is the intel_pt attr's */
	int have_sched_switch, snapshot_mode, per_cpu_mmaps;
	uint32_t tsc_ctc_n, tsc_ctc_d;       /* CPUID 0x15: ebx / eax */
	uint32_t max_nonturbo_ratio;         /* 0: not in the file */
	char *filter;              /* the address filter string or NULL */
	/* Derived from config: */
	uint8_t mtc_freq;          /* MTC period field (0 if mtc is off) */
	uint8_t cyc_thresh;        /* CYC threshold field (config 22:19) */
	int mtc, cyc, tsc, noretcomp;
	int kernel;                /* the intel_pt event traced the kernel
				    * (no exclude_kernel: intel_pt// without
				    * u) */
};

/* One piece of a thread's Intel PT data: @size bytes at file @offset. */
struct htr_perf_chunk {
	uint64_t offset, size;
};

/* An executable mapping (MMAP or MMAP2). */
struct htr_perf_module {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint8_t build_id[20];
	uint8_t build_id_size;     /* 0: none recorded */
	uint64_t seq;              /* record number (ordering) */
	char *path;                /* owned by the htr_perfdata */
};

struct htr_perf_thread {
	uint32_t pid, tid;
	char comm[32];
	struct htr_perf_chunk *chunks;
	size_t nchunks;
	uint64_t pt_bytes;         /* sum of the chunks' sizes */
	uint64_t aux_truncated;    /* AUX records flagged truncated */
	uint64_t aux_lost;         /* ... flagged partial or collision */
	int exited;
};

/* One CPU's Intel PT data (per-CPU buffers: perf record without
 * --per-thread), its pieces in file order. */
struct htr_perf_cpu {
	uint32_t cpu;
	struct htr_perf_chunk *chunks;
	size_t nchunks;
	uint64_t pt_bytes;
	uint64_t aux_truncated, aux_lost;
};

/* From @time on (perf's clock, ns), thread @tid of @pid runs on @cpu
 * (tid UINT32_MAX: a thread left and the sideband does not say which
 * came).  From SWITCH and SWITCH_CPU_WIDE records. */
struct htr_perf_switch {
	uint64_t time;
	uint32_t cpu, pid, tid;
};

struct htr_perfdata {
	const uint8_t *data;       /* the whole file (mapped or borrowed) */
	uint64_t size;
	int pipe;                  /* pipe format */
	char *name;                /* the file's name, for messages */
	/* Features (0 when absent). */
	int cpu_family, cpu_model, cpu_stepping;   /* an Intel CPU's */
	uint32_t nr_cpus_avail, nr_cpus_online;
	/* clock_data (perf record -k): the wall clock read clock_wall_ns when
	 * the events' clock read clock_ref_ns. */
	int have_clock_data;
	uint64_t clock_wall_ns, clock_ref_ns;
	struct htr_perf_pt pt;
	struct htr_perf_thread *threads;
	size_t nthreads;
	struct htr_perf_module *modules;
	size_t nmodules;
	uint64_t per_cpu_buffers;  /* AUXTRACE records with no thread */
	/* Per-CPU trace (pt.per_cpu_mmaps, or AUXTRACE records with no
	 * thread), by CPU number, and the context switches sorted by (cpu,
	 * time, record order). */
	struct htr_perf_cpu *cpus;
	size_t ncpus;
	struct htr_perf_switch *switches;
	size_t nswitches;
	uint64_t switches_untimed; /* switch records without time or cpu */
	uint64_t nrecords;
	/* private */
	void *map;
	size_t map_size;
	struct htr_perf_priv *priv;
};

/*
 * Map and read the perf.data at @path.  On success *@out is a reader to
 * close with htr_perfdata__close().  Returns 0, HTR_ERR_IO (cannot
 * open/map), HTR_ERR_FORMAT (not a perf.data, big-endian, compressed),
 * HTR_ERR_CORRUPT (a size or offset outside the file), HTR_ERR_NOMEM;
 * the one-line message (naming @path) is in @err.
 */
int htr_perfdata__open(struct htr_perfdata **out, const char *path,
		       struct htr_err *err);

/* As htr_perfdata__open() over @size bytes at @data (borrowed: they must
 * outlive the reader).  @name names them in messages. */
int htr_perfdata__parse(struct htr_perfdata **out, const void *data,
			size_t size, const char *name, struct htr_err *err);

/* perf's clock @ns as a TSC value (the inverse of the TSC conversion,
 * rounded down); @ns itself when the file has no conversion. */
uint64_t htr_perfdata__time_to_tsc(const struct htr_perfdata *pd,
				   uint64_t ns);

/* perf's clock @ns as a TSC value with perf's conversion (@shift,
 * @mult, @zero: perf_event_mmap_page), rounded down, saturating; @ns
 * itself when @mult is 0 or @shift above 63. */
uint64_t htr_perfdata__ns_to_tsc(uint64_t shift, uint64_t mult, uint64_t zero,
				 uint64_t ns);

/* Unmap and free.  NULL is fine. */
void htr_perfdata__close(struct htr_perfdata *pd);

/* One thread's or CPU's Intel PT as one contiguous buffer, as libipt
 * decodes it. */
struct htr_perf_joined {
	const uint8_t *data;
	uint64_t size;
	void *map;                 /* set when the chunks were copied */
	size_t map_size;
};

/*
 * The @n chunks at @base (offsets into it) as one buffer in @j: the one
 * chunk itself, or, for several (perf writes an AUXTRACE record per
 * buffer it drains, so a long recording has thousands), a copy in an
 * unlinked file in $TMPDIR (or /tmp), mapped: page cache the kernel can
 * drop, never the trace's size in the process's own memory.  Returns 0,
 * HTR_ERR_IO (the message in @err); htr_perfdata__unjoin() releases it.
 */
int htr_perfdata__join(const uint8_t *base, const struct htr_perf_chunk *c,
		       size_t n, struct htr_perf_joined *j,
		       struct htr_err *err);

/* Release what htr_perfdata__join() made.  Safe on a zeroed @j. */
void htr_perfdata__unjoin(struct htr_perf_joined *j);

/* What htr_perfdata__user_only() left out. */
struct htr_perf_kstats {
	uint64_t stretches;        /* times user code entered the kernel */
	uint64_t bytes;            /* kernel packets left out, in bytes */
	uint64_t bad;              /* packets it could not read (copied) */
};

/*
 * A trace of user and kernel code (intel_pt// without u) whose kernel
 * code is not at hand, as the trace of the user code alone would be:
 * each stretch in the kernel (a TIP into it, an interrupt's FUP + TIP,
 * tracing enabled there) becomes tracing disabled (a TIP.PGD to the
 * kernel address, after the FUP of an interrupt: the decoder names the
 * gap [kernel], HTR_GAP_CODE_KERNEL) until an IP packet returns
 * to user space (MODE.Exec + TIP.PGE there).  The kernel's TNT, TIP and
 * FUP packets are left out; timing, PSB+ and everything else stay, so
 * time and sync points are the trace's own.  IP packets written are
 * uncompressed (48-bit sign extension, or 64 bits).  Without this,
 * libipt stops at the first kernel address and resynchronizes at the
 * next PSB, losing the user code up to it.
 *
 * Kernel addresses are those with bit 63 set (the upper half).  Bytes
 * that are no packet are copied as they are up to the next PSB, so the
 * decoder meets the same damage.  @j (from htr_perfdata__join()) is
 * replaced by the rewritten trace (a mapped temporary file); *@ks (may
 * be NULL) says what was left out.  Returns 0, HTR_ERR_IO (the message in
 * @err; @j is unchanged).
 */
int htr_perfdata__user_only(struct htr_perf_joined *j,
			    struct htr_perf_kstats *ks, struct htr_err *err);

/* Whether @m was mapped in @t's address space: same process, after its
 * last exec, or inherited from the process it forked from. */
int htr_perfdata__thread_has(const struct htr_perfdata *pd,
			     const struct htr_perf_thread *t,
			     const struct htr_perf_module *m);

/*
 * The IP filter ranges pt.filter gave thread @t.  The string is the
 * kernel's syntax, which perf record stores: "filter" or "stop" (perf's
 * "tracestop"), then OFFSET/SIZE@FILE or ADDRESS/SIZE, entries separated
 * by spaces or commas.  An entry with a file is placed as the kernel
 * places it, in the last mapping of the file in @t's address space that
 * holds part of it; one that @t never mapped is left out and counted in
 * *@unplaced.  Returns the number of ranges written to @out (room for
 * HTR_ADDR_FILTERS_MAX), or HTR_ERR_FORMAT (a string it cannot read,
 * more ranges than that) or HTR_ERR_NOMEM with the message in @err.
 */
int htr_perfdata__filters(const struct htr_perfdata *pd,
			  const struct htr_perf_thread *t,
			  struct htr_addr_filter *out, unsigned *unplaced,
			  struct htr_err *err);

/*
 * The ELF at @path mapped at @m->addr from file offset @m->pgoff: the
 * address its lowest PT_LOAD lands at (*@base), for
 * htr_builder_add_elf_at().  Returns 0, HTR_ERR_IO (cannot read),
 * HTR_ERR_FORMAT (not an ELF64 little-endian file, no PT_LOAD holding
 * that offset); the message is in @err.
 */
int htr_perfdata__elf_base(const char *path, const struct htr_perf_module *m,
			   uint64_t *base, struct htr_err *err);

/*
 * The GNU build-id of the ELF at @path (its PT_NOTE segments): up to 20
 * bytes into @id, their number into *@size (0: the file has none).
 * Returns 0, HTR_ERR_IO, HTR_ERR_FORMAT (not an ELF64 little-endian
 * file); the message is in @err.
 */
int htr_perfdata__elf_build_id(const char *path, uint8_t id[20],
			       size_t *size, struct htr_err *err);
/* The same for the @n bytes of an ELF image at @image (writable: libelf
 * may write to it).  Returns 0 or HTR_ERR_FORMAT. */
int htr_perfdata__mem_build_id(void *image, size_t n, uint8_t id[20],
			       size_t *size);

#endif

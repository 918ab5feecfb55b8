/*
 * libFuzzer target: CPU-wide builds (htr/cpuwide.h), the path per-CPU
 * perf.data files and LLDB's per-CPU bundles take.  The input is a few
 * context switches, in any order and with any times and threads, then
 * Intel PT bytes split between two CPUs (decoded against the shipped
 * sample's ELF).  Whatever it holds, the build writes files that open and
 * walk or fails with an error: never a crash, hang or leak.
 *
 * Layout: N (1 byte, at most MAX_SW used), N records of 12 bytes (cpu,
 * flags, tid, next_tid: 1 byte each; time: 8 bytes little-endian), the
 * split point (2 bytes, little-endian), then the trace bytes.
 */
#include "fuzz.h"

#include "htr/htr.h"

#include <stdio.h>
#include <string.h>

#define MAX_SW 32
#define NTHREADS 3

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

static void walk(const char *path)
{
	struct htr_file *f = NULL;
	uint32_t i, n;

	if (htr_file_open(&f, path, NULL) < 0)
		__builtin_trap();       /* a run that succeeded wrote it */
	n = htr_block_count(f);
	for (i = 0; i < n; i++) {
		struct htr_block_info bi;

		bi.size = sizeof(bi);
		if (htr_block_get(f, i, &bi, sizeof(bi)) < 0)
			__builtin_trap();
	}
	htr_file_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[NTHREADS][HTR_FUZZ_PATH];
	struct htr_build_opts opts;
	struct htr_builder *b = NULL;
	struct htr_cpuwide *cw = NULL;
	size_t nsw, i, split;

	if (size < 3)
		return 0;
	nsw = data[0] % (MAX_SW + 1);
	if (size < 1 + 12 * nsw + 2)
		return 0;
	htr_fuzz_sample_opts(&opts);
	if (htr_builder_alloc(&b, &opts) < 0)
		return 0;
	if (htr_builder_add_elf(b, HTR_FUZZ_SAMPLE_ELF) < 0 ||
	    htr_cpuwide_alloc(&cw, b) < 0 ||
	    htr_cpuwide_set_clock(cw, 0, 1, 0) < 0)
		goto out;
	for (i = 0; i < nsw; i++) {
		const uint8_t *r = data + 1 + 12 * i;
		struct htr_switch sw;

		memset(&sw, 0, sizeof(sw));
		sw.size = sizeof(sw);
		sw.cpu = r[0] % 2;
		sw.flags = r[1] & (HTR_SWITCH_OUT | HTR_SWITCH_TSC);
		sw.pid = 1;
		sw.tid = r[2] % (NTHREADS + 1);
		sw.next_pid = 1;
		sw.next_tid = r[3] == 0xff ? HTR_SWITCH_NO_TID :
			      r[3] % (NTHREADS + 1);
		sw.time = le(r + 4, 8);
		if (htr_cpuwide_add_switch(cw, &sw) < 0)
			goto out;
	}
	data += 1 + 12 * nsw;
	size -= 1 + 12 * nsw;
	split = (size_t) le(data, 2);
	data += 2;
	size -= 2;
	if (split > size)
		split = size;
	if (htr_cpuwide_add_trace(cw, 0, data, split) < 0 ||
	    htr_cpuwide_add_trace(cw, 1, data + split, size - split) < 0)
		goto out;
	for (i = 0; i < NTHREADS; i++) {
		struct htr_thread_info ti;
		char name[16];

		memset(&ti, 0, sizeof(ti));
		ti.size = sizeof(ti);
		ti.pid = 1;
		ti.tid = (uint32_t) i + 1;
		snprintf(name, sizeof(name), "t%zu.htr", i + 1);
		if (htr_fuzz_path(name, out[i]) < 0 ||
		    htr_cpuwide_add_thread(cw, &ti, out[i]) < 0)
			goto out;
	}
	if (htr_cpuwide_run(cw) == 0) {
		for (i = 0; i < NTHREADS; i++) {
			struct htr_build_stats st;

			if (htr_cpuwide_thread_stats(cw, (uint32_t) i + 1, &st,
						     sizeof(st)) == 0)
				walk(out[i]);
		}
	}
out:
	htr_cpuwide_free(cw);
	htr_builder_free(b);
	return 0;
}

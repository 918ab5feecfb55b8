/*
 * libFuzzer target: the perf.data reader (lib/perfdata.c), from memory.
 * Any bytes read or fail with a message; when they read, every thread's
 * and CPU's trace chunks must lie in the input, the context switches be
 * sorted, and every module query must answer; the address filter string
 * reads, to non-empty ranges, or fails with a message.
 */
#include "fuzz.h"

#include "perfdata.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct htr_perfdata *pd = NULL;
	struct htr_err err;
	size_t i, j;

	memset(&err, 0, sizeof(err));
	if (htr_perfdata__parse(&pd, data, size, "fuzz.data", &err) < 0) {
		if (pd || !err.msg[0] || strchr(err.msg, '\n'))
			abort();
		return 0;
	}
	for (i = 0; i < pd->nthreads; i++) {
		const struct htr_perf_thread *t = &pd->threads[i];
		uint64_t sum = 0;

		for (j = 0; j < t->nchunks; j++) {
			if (t->chunks[j].offset > size ||
			    t->chunks[j].size > size - t->chunks[j].offset)
				abort();
			sum += t->chunks[j].size;
		}
		if (sum != t->pt_bytes)
			abort();
		for (j = 0; j < pd->nmodules; j++)
			(void) htr_perfdata__thread_has(pd, t, &pd->modules[j]);
		if (pd->pt.filter) {
			struct htr_addr_filter r[HTR_ADDR_FILTERS_MAX];
			unsigned unplaced;
			int n = htr_perfdata__filters(pd, t, r, &unplaced, &err);

			if (n > HTR_ADDR_FILTERS_MAX ||
			    (n < 0 && (!err.msg[0] || strchr(err.msg, '\n'))))
				abort();
			for (j = 0; j < (size_t) (n > 0 ? n : 0); j++)
				if (r[j].start >= r[j].end)
					abort();
		}
	}
	for (i = 0; i < pd->ncpus; i++) {
		const struct htr_perf_cpu *c = &pd->cpus[i];
		uint64_t sum = 0;

		for (j = 0; j < c->nchunks; j++) {
			if (c->chunks[j].offset > size ||
			    c->chunks[j].size > size - c->chunks[j].offset)
				abort();
			sum += c->chunks[j].size;
		}
		if (sum != c->pt_bytes)
			abort();
	}
	/* Sorted by CPU, then time: the CPU-wide build searches them. */
	for (i = 1; i < pd->nswitches; i++) {
		const struct htr_perf_switch *a = &pd->switches[i - 1];
		const struct htr_perf_switch *b = &pd->switches[i];

		if (a->cpu > b->cpu || (a->cpu == b->cpu && a->time > b->time))
			abort();
		(void) htr_perfdata__time_to_tsc(pd, b->time);
	}
	htr_perfdata__close(pd);
	return 0;
}

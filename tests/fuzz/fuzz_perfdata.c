/*
 * libFuzzer target: the perf.data reader (lib/perfdata.c), from memory.
 * Any bytes read or fail with a message; when they read, every thread's
 * trace chunks must lie in the input and every module query must answer.
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
	}
	htr_perfdata__close(pd);
	return 0;
}

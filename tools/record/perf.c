/* perf.data writer: see rec_int.h. */
#include "rec_int.h"

int rec_perf_write(const char *out, const struct rec_ctx *c, pid_t pid,
		   const char *comm, const struct rec_perf_thread *th,
		   size_t nth, char *err, size_t errlen)
{
	(void) c; (void) pid; (void) comm; (void) th; (void) nth;
	snprintf(err, errlen, "%s: perf.data output is not written yet; use "
		 "--raw DIR", out);
	return -1;
}

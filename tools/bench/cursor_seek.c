/*
 * Cursor seek benchmark: open FILE.htr, seek to N random instruction IDs
 * of TRACE and read one instruction at each; prints the time per seek.
 * usage: cursor_seek FILE.htr TRACE N
 */
#include "htr/htr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	struct htr_cursor_opts co;
	struct htr_cursor *c = NULL;
	struct htr_file *f = NULL;
	struct htr_file_info fi;
	struct htr_insn in;
	struct timespec a, b;
	uint64_t rng = 42, i, n, sum = 0;
	double t;

	if (argc != 4)
		return fprintf(stderr, "usage: cursor_seek FILE.htr TRACE N\n"), 2;
	n = strtoull(argv[3], NULL, 0);
	if (htr_file_open(&f, argv[1], NULL) < 0) {
		fprintf(stderr, "%s\n", htr_file_last_error(f));
		return 1;
	}
	fi.size = sizeof(fi);
	htr_file_info(f, &fi, sizeof(fi));
	htr_cursor_opts_init(&co);
	co.trace = argv[2];
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (htr_cursor_alloc(&c, f, &co) < 0) {
		fprintf(stderr, "%s\n", htr_cursor_last_error(c));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("cursor_seek: open (maps the trace, checks its hash): %.3f s\n",
	       (double) (b.tv_sec - a.tv_sec) +
	       (double) (b.tv_nsec - a.tv_nsec) / 1e9);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < n; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		if (htr_cursor_seek(c, (rng >> 11) % fi.ninsns) < 0 ||
		    htr_cursor_next(c, &in, sizeof(in)) < 0) {
			fprintf(stderr, "%s\n", htr_cursor_last_error(c));
			return 1;
		}
		sum += in.ip;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	t = (double) (b.tv_sec - a.tv_sec) + (double) (b.tv_nsec - a.tv_nsec) / 1e9;
	printf("cursor_seek: %" PRIu64 " seeks in %" PRIu64 " instructions "
	       "(%" PRIu64 " sync points, %.0f instructions per PSB): %.1f us "
	       "per seek (checksum %" PRIx64 ")\n", n, fi.ninsns, fi.nsync,
	       fi.nsync ? (double) fi.ninsns / (double) fi.nsync : 0.0,
	       t / (double) n * 1e6, sum & 0xffff);
	htr_cursor_free(c);
	htr_file_close(f);
	return 0;
}

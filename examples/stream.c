/*
 * Build an .htr from a trace held in memory, with progress: read TRACE
 * into a buffer (as a debugger or a perf reader would hold it), add the
 * ELF, build with a progress callback, then open the result.
 *
 *   cc stream.c $(pkg-config --cflags --libs htr) -o stream
 *   ./stream trace.pt prog.elf out.htr
 */
#include <htr/htr.h>

#include <stdio.h>
#include <stdlib.h>

/* On the calling thread about every 2^20 instructions; must return. */
static int on_progress(const struct htr_build_progress *p, void *payload)
{
	unsigned *calls = payload;

	(*calls)++;
	fprintf(stderr, "\rstream: %llu of %llu bytes, %llu insns",
		(unsigned long long) p->offset,
		(unsigned long long) p->trace_size,
		(unsigned long long) p->insns);
	return 0;       /* a positive value would cancel the build */
}

static void *slurp(const char *path, size_t *size)
{
	FILE *fp = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!fp)
		return NULL;
	if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) > 0) {
		rewind(fp);
		buf = malloc((size_t) n);
		if (buf && fread(buf, 1, (size_t) n, fp) != (size_t) n) {
			free(buf);
			buf = NULL;
		}
		*size = (size_t) n;
	}
	fclose(fp);
	return buf;
}

int main(int argc, char **argv)
{
	struct htr_build_opts bo;
	struct htr_build_stats st;
	struct htr_builder *b = NULL;
	struct htr_file *f = NULL;
	unsigned calls = 0;
	size_t size = 0;
	void *trace;
	int rc = 1;

	if (argc != 4) {
		fprintf(stderr, "usage: stream TRACE ELF OUT.htr\n");
		return 2;
	}
	trace = slurp(argv[1], &size);
	if (!trace) {
		fprintf(stderr, "stream: %s: cannot read\n", argv[1]);
		return 1;
	}
	htr_build_opts_init(&bo);
	bo.progress = on_progress;
	bo.payload = &calls;
	st.size = sizeof(st);
	if (htr_builder_alloc(&b, &bo) < 0 ||
	    htr_builder_add_elf_at(b, argv[2], NULL) < 0 ||
	    htr_builder_run_buffer(b, trace, size, argv[3], &st,
				   sizeof(st)) < 0) {
		fprintf(stderr, "stream: %s\n", htr_builder_last_error(b));
		goto out;
	}
	if (calls)
		fprintf(stderr, "\n");
	if (htr_file_open(&f, argv[3], NULL) < 0) {
		fprintf(stderr, "stream: %s\n", htr_file_last_error(f));
		goto out;
	}
	printf("%llu insns, %llu blocks, %llu gaps\n",
	       (unsigned long long) st.insns,
	       (unsigned long long) htr_block_count(f),
	       (unsigned long long) htr_gap_count(f));
	rc = 0;
out:
	htr_file_close(f);
	htr_builder_free(b);
	free(trace);
	return rc;
}

/*
 * Walk the call tree of an .htr file and print its heaviest function: the
 * one whose invocations took the most TSC ticks of their own (local).
 * Shows the embedding shape: one store per sidecar per process, a reader
 * per thread, the built-in analyzers obtained by name (GetOrCreate).
 *
 *   cc heaviest.c $(pkg-config --cflags --libs htr) -o heaviest
 *   ./heaviest trace.htr
 */
#include <htr/htr.h>

#include <stdio.h>
#include <string.h>

struct walk {
	struct htr_analysis *reader;
	const char *best;         /* owned by the reader */
	uint64_t best_local;
	uint64_t blocks;
};

/* Called once per function by htr_func_visit(); must return (no longjmp),
 * 0 goes on. */
static int on_func(const struct htr_func_stats *st, void *payload)
{
	struct walk *w = payload;

	if (!w->best || st->local > w->best_local) {
		w->best = st->name;
		w->best_local = st->local;
	}
	return 0;
}

/* Called once per block by htr_tree_visit(); counts the blocks. */
static int on_block(const struct htr_file *f, uint32_t block, uint32_t parent,
		    uint32_t level, void *payload)
{
	struct walk *w = payload;

	(void) f;
	(void) block;
	(void) parent;
	(void) level;
	w->blocks++;
	return 0;
}

int main(int argc, char **argv)
{
	struct htr_file *f = NULL;
	struct htr_store *store = NULL;
	struct htr_analysis *reader = NULL;
	struct walk w;
	const void *sym = NULL;
	int rc = 1;

	if (argc != 2) {
		fprintf(stderr, "usage: heaviest FILE.htr\n");
		return 2;
	}
	memset(&w, 0, sizeof(w));
	if (htr_file_open(&f, argv[1], NULL) < 0) {
		fprintf(stderr, "heaviest: %s\n", htr_last_error(f));
		goto out;
	}
	/* One store per sidecar per process; it opens FILE.htr.lmdb/ (or
	 * works in memory when it cannot, and says why). */
	if (htr_store_open(&store, f, NULL) < 0) {
		fprintf(stderr, "heaviest: %s\n", htr_store_last_error(store));
		goto out;
	}
	if (htr_store_flags(store) & HTR_STORE_IN_MEMORY)
		fprintf(stderr, "heaviest: in memory: %s\n",
			htr_store_note(store));
	/* A reader for this thread; "sym" (and "tsc", its dependency) are
	 * reloaded or computed once and stored. */
	if (htr_analysis_open_store(&reader, store, NULL) < 0 ||
	    htr_store_get(store, "sym", reader, &sym) < 0) {
		fprintf(stderr, "heaviest: %s\n",
			htr_analysis_last_error(reader));
		goto out;
	}
	w.reader = reader;
	if (htr_tree_visit(f, HTR_NONE, HTR_PREORDER, on_block, &w) < 0 ||
	    htr_func_visit(reader, NULL, HTR_MATCH_EXACT, on_func, &w) < 0) {
		fprintf(stderr, "heaviest: %s\n",
			htr_analysis_last_error(reader));
		goto out;
	}
	printf("%llu blocks; heaviest function: %s (%llu local ticks)\n",
	       (unsigned long long) w.blocks, w.best ? w.best : "-",
	       (unsigned long long) w.best_local);
	rc = 0;
out:
	htr_analysis_close(reader);   /* readers before their store */
	htr_store_close(store);
	htr_file_close(f);
	return rc;
}

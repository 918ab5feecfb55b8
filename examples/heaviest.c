/*
 * Walk the call tree of an .htr file and print its heaviest function: the
 * one whose invocations took the most TSC ticks of their own (local).
 * Shows the embedding shape: one store per sidecar per process shared by
 * two threads, a reader per thread, the built-in analyzers obtained by
 * name (GetOrCreate: whichever thread comes first computes, once).
 *
 *   cc heaviest.c $(pkg-config --cflags --libs htr) -o heaviest
 *   ./heaviest trace.htr
 */
#include <htr/htr.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* One thread's work: its own reader over the shared store. */
struct walk {
	const struct htr_file *f;
	struct htr_store *store;
	const char *analyzer;     /* "sym" or "tsc" */
	struct htr_analysis *reader;
	const char *best;         /* owned by the reader */
	uint64_t best_local;
	uint64_t blocks, root_ticks;
	int failed;
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

/* Called once per block by htr_tree_visit(); counts the blocks and adds
 * up the roots' ticks. */
static int on_block(const struct htr_file *f, uint32_t block, uint32_t parent,
		    uint32_t level, void *payload)
{
	struct walk *w = payload;
	uint64_t total;

	(void) f;
	(void) parent;
	w->blocks++;
	if (!level && htr_tsc_get(w->reader, block, &total, NULL, NULL) == 0)
		w->root_ticks += total;
	return 0;
}

static void *work(void *arg)
{
	struct walk *w = arg;
	const void *result;

	/* A reader per thread; the analyzer (and what it depends on) is
	 * reloaded, or computed once and stored. */
	if (htr_analysis_open_store(&w->reader, w->store, NULL) < 0 ||
	    htr_store_get(w->store, w->analyzer, w->reader, &result) < 0)
		w->failed = 1;
	else if (!strcmp(w->analyzer, "sym"))
		w->failed = htr_func_visit(w->reader, NULL, HTR_MATCH_EXACT,
					   on_func, w) < 0;
	else
		w->failed = htr_tree_visit(w->f, HTR_NONE, HTR_PREORDER,
					   on_block, w) < 0;
	return NULL;
}

int main(int argc, char **argv)
{
	struct htr_file *f = NULL;
	struct htr_store *store = NULL;
	struct walk w[2];
	pthread_t th[2];
	int rc = 1, i, started = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: heaviest FILE.htr\n");
		return 2;
	}
	memset(w, 0, sizeof(w));
	if (htr_file_open(&f, argv[1], NULL) < 0) {
		fprintf(stderr, "heaviest: %s\n", htr_file_last_error(f));
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
	for (i = 0; i < 2; i++) {
		w[i].f = f;
		w[i].store = store;
		w[i].analyzer = i ? "tsc" : "sym";
		if (pthread_create(&th[i], NULL, work, &w[i]) != 0)
			break;
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 2; i++)
		if (i >= started || w[i].failed) {
			fprintf(stderr, "heaviest: %s\n", i < started ?
				htr_analysis_last_error(w[i].reader) :
				"cannot start a thread");
			goto out;
		}
	printf("%llu blocks, %llu ticks; heaviest function: %s (%llu local "
	       "ticks)\n", (unsigned long long) w[1].blocks,
	       (unsigned long long) w[1].root_ticks,
	       w[0].best ? w[0].best : "-",
	       (unsigned long long) w[0].best_local);
	rc = 0;
out:
	for (i = 0; i < 2; i++)
		htr_analysis_close(w[i].reader);   /* readers before the store */
	htr_store_close(store);
	htr_file_close(f);
	return rc;
}

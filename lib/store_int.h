/*
 * The store (store.c): one LMDB environment per sidecar per process
 * (htr/store.h) and the registry of analyzers.  The file map of the
 * store and analyzers is in lib/env.h.
 */
#ifndef HTR_LIB_STORE_INT_H
#define HTR_LIB_STORE_INT_H

#include "analyzer_int.h"
#include "env.h"
#include "err.h"
#include "htr/store.h"

#include <pthread.h>
#include <stdbool.h>

/*
 * Shared by threads: @file, @sidecar and @env's handles never change
 * after open; @lock guards the registry's count (its entries never move
 * or change once counted).
 */
struct htr_store {
	struct htr_err err;          /* open errors only */
	const struct htr_file *file;
	char *sidecar;               /* also when in memory: the path unused */
	char note[512];              /* why in memory */
	unsigned flags;              /* HTR_STORE_* */
	struct htr_env env;          /* env.mdb NULL: in memory */
	/* This store made the sidecar directory (created), and the first
	 * analysis over it failed (discard): closing removes the directory,
	 * so a failed command leaves nothing behind. */
	bool created, discard;
	pthread_mutex_t lock;
	bool lock_ok;
	struct htr_analyzer reg[HTR_AN_MAX];
	unsigned nreg;               /* under lock */
};

/* Registry index of @name, or -1.  Any thread. */
int htr_store__find(struct htr_store *st, const char *name);

#endif

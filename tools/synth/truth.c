#include "truth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int push(void **arr, size_t *n, size_t *cap, size_t elem)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		void *p = realloc(*arr, nc * elem);

		if (!p)
			return -1;
		*arr = p;
		*cap = nc;
	}
	(*n)++;
	return 0;
}

int truth_load(struct truth *t, const char *path, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	char line[512];
	size_t capf = 0, capb = 0, capg = 0, lineno = 0;
	int done = 0;

	memset(t, 0, sizeof(*t));
	if (!fp) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), fp)) {
		char word[32], flags[8], kind[16];
		unsigned long long a, b, c, d, e, f;
		long long pre, parent, func;

		lineno++;
		if (sscanf(line, "%31s", word) != 1)
			continue;
		if (!strcmp(word, "htr-synth-truth")) {
			if (sscanf(line, "htr-synth-truth %llu", &a) != 1 ||
			    a < 1 || a > 2) {
				snprintf(err, errlen, "%s:%zu: unknown truth "
					 "format", path, lineno);
				fclose(fp);
				truth_free(t);
				return -1;
			}
			t->version = (int) a;
		} else if (!strcmp(word, "block")) {
			struct truth_block *bl;

			if (push((void **) &t->blocks, &t->nblocks, &capb,
				 sizeof(*bl)) < 0)
				goto oom;
			bl = &t->blocks[t->nblocks - 1];
			if (sscanf(line, "block %lld %lld %lld %llu %llu %llu %llu %7s",
				   &pre, &parent, &func, &b, &c, &d, &e, flags) != 8 ||
			    func < -1 || func >= (long long) UINT32_MAX)
				goto bad;
			bl->pre = pre;
			bl->parent = parent;
			bl->func = func < 0 ? TRUTH_FUNC_NONE : (uint32_t) func;
			bl->first = b;
			bl->last = c;
			bl->tsc_first = d;
			bl->tsc_last = e;
			bl->flags = (strchr(flags, 'L') ? TRUTH_LATE : 0) |
				    (strchr(flags, 'T') ? TRUTH_TRUNC : 0) |
				    (strchr(flags, 'R') ? TRUTH_RETGAP : 0) |
				    (strchr(flags, 'U') ? TRUTH_UNWOUND : 0) |
				    (strchr(flags, 'C') ? TRUTH_CALLBACK : 0) |
				    (strchr(flags, 'I') ? TRUTH_IRQ : 0) |
				    (strchr(flags, 'G') ? TRUTH_GAP : 0);
		} else if (!strcmp(word, "func")) {
			struct truth_func *fn;

			if (push((void **) &t->funcs, &t->nfuncs, &capf,
				 sizeof(*fn)) < 0)
				goto oom;
			fn = &t->funcs[t->nfuncs - 1];
			if (sscanf(line, "func %llu %llx %llu %63s", &a, &b, &c,
				   fn->name) != 4 || a != t->nfuncs - 1)
				goto bad;
			fn->entry = b;
			fn->size = (uint32_t) c;
		} else if (!strcmp(word, "gap")) {
			struct truth_gap *g;

			if (push((void **) &t->gaps, &t->ngaps, &capg,
				 sizeof(*g)) < 0)
				goto oom;
			g = &t->gaps[t->ngaps - 1];
			if (sscanf(line, "gap %llu %15s", &a, kind) != 2)
				goto bad;
			g->id = a;
			g->overflow = !strcmp(kind, "overflow");
			g->error = !strcmp(kind, "error");
		} else if (!strcmp(word, "seed")) {
			sscanf(line, "seed %llu", &a);
			t->seed = a;
		} else if (!strcmp(word, "scenario")) {
			sscanf(line, "scenario %31s", t->scenario);
		} else if (!strcmp(word, "elf")) {
			sscanf(line, "elf %255s", t->elf);
		} else if (!strcmp(word, "trace")) {
			sscanf(line, "trace %255s", t->trace);
		} else if (!strcmp(word, "base")) {
			sscanf(line, "base %llx", &a);
			t->base = a;
		} else if (!strcmp(word, "decoder")) {
			if (sscanf(line, "decoder cpuid_0x15_eax %llu cpuid_0x15_ebx %llu"
				   " mtc_freq %llu nom_freq %llu", &a, &b, &c, &d) != 4)
				goto bad;
			t->cpuid_eax = (uint32_t) a;
			t->cpuid_ebx = (uint32_t) b;
			t->mtc_freq = (uint32_t) c;
			t->nom_freq = (uint32_t) d;
		} else if (!strcmp(word, "insns")) {
			sscanf(line, "insns %llu", &a);
			t->insns = a;
		} else if (!strcmp(word, "end")) {
			done = 1;
		}
		(void) f;
	}
	fclose(fp);
	if (!done) {
		snprintf(err, errlen, "%s: truncated (no 'end' line)", path);
		truth_free(t);
		return -1;
	}
	return 0;
bad:
	snprintf(err, errlen, "%s:%zu: malformed line", path, lineno);
	fclose(fp);
	truth_free(t);
	return -1;
oom:
	snprintf(err, errlen, "out of memory");
	fclose(fp);
	truth_free(t);
	return -1;
}

int truth_gap_flag(const struct truth *t, const struct truth_block *b)
{
	size_t i;

	if (t->version >= 2)
		return (b->flags & TRUTH_GAP) != 0;
	for (i = 0; i < t->ngaps; i++)
		if (t->gaps[i].id > b->first && t->gaps[i].id <= b->last)
			return 1;
	return 0;
}

void truth_free(struct truth *t)
{
	free(t->funcs);
	free(t->blocks);
	free(t->gaps);
	memset(t, 0, sizeof(*t));
}

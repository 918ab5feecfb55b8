#include "corpus.h"
#include "htr/build.h"

#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int split_tabs(char *line, struct mrow *m)
{
	char *p = line;

	m->n = 0;
	while (m->n < 32) {
		char *t = strchr(p, '\t');

		m->f[m->n++] = p;
		if (!t)
			break;
		*t = 0;
		p = t + 1;
	}
	p = m->f[m->n - 1];
	p[strcspn(p, "\r\n")] = 0;
	return m->n;
}

int manifest_row(char *line, struct mrow *m, struct mcols *c)
{
	int i;

	split_tabs(line, m);
	if (c->v205 >= 0)
		return 1;
	for (i = 0; i < m->n; i++) {
		if (!strcmp(m->f[i], "in_libipt_v2.0.5_tests"))
			c->v205 = i;
		if (!strcmp(m->f[i], "exp_files"))
			c->files = i;
	}
	return 0;
}

int in_v205(const struct mrow *m, const struct mcols *c)
{
	return m->n > c->v205 && !strcmp(m->f[c->v205], "yes");
}

/* Count instructions and decode errors in a -ptxed.exp file. */
int read_exp(const char *path, long *insns, long *errors)
{
	FILE *fp = fopen(path, "r");
	char line[512];

	if (!fp)
		return -1;
	*insns = 0;
	*errors = 0;
	while (fgets(line, sizeof(line), fp)) {
		const char *p = line;
		long n;

		if (p[0] == '?' && p[1] == ' ')
			p += 2;
		if (strspn(p, "0123456789abcdef") == 16)
			(*insns)++;
		else if (line[0] == '[' && strstr(line, ": error: "))
			(*errors)++;
		else if (sscanf(line, "insn: %ld.", &n) == 1)
			*insns = n;
	}
	fclose(fp);
	return 0;
}

const char *corpus_dir(char *buf, size_t len)
{
	const char *root = getenv("HTR_SOURCE_ROOT");
	struct stat st;

	snprintf(buf, len, "%s/../shared/corpus/libipt-ptt", root ? root : ".");
	return stat(buf, &st) == 0 ? buf : NULL;
}

/* Whether libipt knows any erratum for cpu "F/M". */
int has_errata(const char *cpu)
{
	static const struct pt_errata none;
	struct pt_errata er;
	struct pt_cpu c;
	int fam = 0, mod = 0;

	memset(&c, 0, sizeof(c));
	memset(&er, 0, sizeof(er));
	if (sscanf(cpu, "%d/%d", &fam, &mod) != 2)
		return 0;
	c.vendor = pcv_intel;
	c.family = (uint16_t) fam;
	c.model = (uint8_t) mod;
	if (pt_cpu_errata(&er, &c) < 0)
		return 0;
	return memcmp(&er, &none, sizeof(er)) != 0;
}


int ptxed_filter(const char *opt, const char *arg, struct htr_addr_filter *f,
		 unsigned *nf)
{
	unsigned n;
	uint64_t v;

	if (strncmp(opt, "--filter:addr", 13) || !arg || opt[13] < '0' ||
	    opt[13] > '3')
		return 0;
	n = (unsigned) (opt[13] - '0');
	v = strtoull(arg, NULL, 0);
	if (!strcmp(opt + 14, "_cfg"))
		f[n].kind = (int) v;
	else if (!strcmp(opt + 14, "_a"))
		f[n].start = v;
	else if (!strcmp(opt + 14, "_b"))
		f[n].end = v + 1;
	if (*nf <= n)
		*nf = n + 1;
	return 1;
}

void skips_add(struct skips *s, const char *why)
{
	size_t n = strcspn(why, "(:");
	int i;

	while (n && why[n - 1] == ' ')
		n--;
	if (n >= sizeof(s->r[0].why))
		n = sizeof(s->r[0].why) - 1;
	s->total++;
	for (i = 0; i < s->nr; i++)
		if (strlen(s->r[i].why) == n && !strncmp(s->r[i].why, why, n)) {
			s->r[i].n++;
			return;
		}
	if (s->nr == (int) (sizeof(s->r) / sizeof(s->r[0])))
		i = s->nr - 1;          /* the last bucket takes the rest */
	else
		i = s->nr++;
	if (!s->r[i].n)
		snprintf(s->r[i].why, sizeof(s->r[i].why), "%.*s", (int) n, why);
	s->r[i].n++;
}

void skips_print(const struct skips *s, const char *tag)
{
	int i;

	fprintf(stderr, "%s: skipped %d cases", tag, s->total);
	for (i = 0; i < s->nr; i++)
		fprintf(stderr, "%s %d %s", i ? ";" : ":", s->r[i].n,
			s->r[i].why);
	fprintf(stderr, "\n");
}

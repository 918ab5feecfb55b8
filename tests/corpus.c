#include "corpus.h"

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
	c->exp = c->blk205 = -1;
	for (i = 0; i < m->n; i++) {
		if (!strcmp(m->f[i], "exp_insn"))
			c->exp = i;
		if (!strcmp(m->f[i], "iptref205_block_insn"))
			c->blk205 = i;
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

int block205_differs(const struct mrow *m, const struct mcols *c, char *why,
		     size_t wlen)
{
	const char *e, *b;
	char *end1, *end2;
	long ne, nb;

	if (c->exp < 0 || c->blk205 < 0 || m->n <= c->exp || m->n <= c->blk205)
		return 0;
	e = m->f[c->exp];
	b = m->f[c->blk205];
	ne = strtol(e, &end1, 10);
	nb = strtol(b, &end2, 10);
	if (end1 == e || *end1 || end2 == b || *end2 || ne == nb)
		return 0;
	snprintf(why, wlen, "a libipt 2.0.5 block-decoder defect (%ld "
		 "instructions, expected %ld)", nb, ne);
	return 1;
}

int ptxed_filter(const char *tok, const char *arg, uint64_t *cfg,
		 uint64_t a[4], uint64_t b[4])
{
	uint64_t v;
	int n;

	if (strncmp(tok, "--filter:addr", 13))
		return 0;
	if (tok[13] < '0' || tok[13] > '3' || !arg)
		return -1;
	n = tok[13] - '0';
	v = strtoull(arg, NULL, 0);
	if (!strcmp(tok + 14, "_cfg"))
		*cfg |= (v & 0xf) << (4 * n);
	else if (!strcmp(tok + 14, "_a"))
		a[n] = v;
	else if (!strcmp(tok + 14, "_b"))
		b[n] = v;
	else
		return -1;
	return 1;
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

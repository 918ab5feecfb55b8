/*
 * htr record --lldb DIR: the recording as a trace bundle LLDB loads with
 * `trace load DIR/trace.json` (LLDB's Intel PT bundle format, the one
 * `process trace save` writes for per-thread tracing):
 *
 *   DIR/trace.json     type, cpuInfo, one process: its threads (tid and
 *                      raw trace) and modules (path and load address)
 *   DIR/tN.pt          thread N's raw Intel PT (creation order), as --raw
 *                      writes it
 *   DIR/modules/PATH   a copy of each module, at its path on this machine
 *                      (as LLDB's own `trace save` lays them out): the
 *                      bundle stays right when the program is rebuilt
 *
 * Paths in trace.json are relative to DIR, so the bundle can be moved.
 * The bundle is written into a temporary directory beside DIR and renamed
 * into place by the caller, like every output of rec_run().
 */
#define _XOPEN_SOURCE 700
#include "rec_int.h"
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The CPU perf.c's perf.data names (CPUID_STR "GenuineIntel,6,142,10"):
 * the plugin and LLDB decode with its errata, as `htr build` does with the
 * perf.data. */
#define LLDB_CPU_FAMILY 6
#define LLDB_CPU_MODEL 142
#define LLDB_CPU_STEPPING 10

static int lerr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Whether @s is valid UTF-8: LLDB's JSON parser rejects anything else, and
 * a path on Linux is bytes. */
static int is_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *) s;

	while (*p) {
		unsigned n, i;
		uint32_t cp;

		if (*p < 0x80) {
			p++;
			continue;
		}
		if ((*p & 0xe0) == 0xc0) {
			n = 1;
			cp = *p & 0x1f;
		} else if ((*p & 0xf0) == 0xe0) {
			n = 2;
			cp = *p & 0x0f;
		} else if ((*p & 0xf8) == 0xf0) {
			n = 3;
			cp = *p & 0x07;
		} else {
			return 0;
		}
		for (i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		/* Overlong forms, surrogates, past U+10FFFF. */
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
		    (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		p += n + 1;
	}
	return 1;
}

/* @s as a JSON string (RFC 8259: '"', '\\' and control characters
 * escaped; the caller checked it is UTF-8).  The engine does not link the
 * CLI, whose json_string() does the same for its own output. */
static void json_str(FILE *fp, const char *s)
{
	const unsigned char *p = (const unsigned char *) s;

	fputc('"', fp);
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(fp, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(fp, "\\u%04x", *p);
		else
			fputc(*p, fp);
	}
	fputc('"', fp);
}

/* mkdir -p for the directories above @path (not @path itself). */
static int make_parents(const char *path)
{
	char p[PATH_MAX];
	char *s;

	if (snprintf(p, sizeof(p), "%s", path) >= (int) sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (s = p + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return 0;
}

/* Copy @from to the new file @to.  -1 with errno set; @to removed. */
static int copy_file(const char *from, const char *to)
{
	char buf[1 << 16];
	int in, out, e;
	ssize_t n = 0;

	in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0) {
		e = errno;
		close(in);
		errno = e;
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0 || (n < 0 &&
	       errno == EINTR)) {
		char *p = buf;

		while (n > 0) {
			ssize_t w = write(out, p, (size_t) n);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				goto fail;
			p += w;
			n -= w;
		}
	}
	if (n < 0)
		goto fail;
	close(in);
	if (close(out) < 0) {
		e = errno;
		unlink(to);
		errno = e;
		return -1;
	}
	return 0;
fail:
	e = errno ? errno : EIO;
	close(in);
	close(out);
	unlink(to);
	errno = e;
	return -1;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void) st;
	(void) ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void rec_lldb_remove(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int rec_lldb_write(const char *dir, const struct rec_ctx *c, pid_t pid,
		   const struct rec_perf_thread *th, size_t nth, char *err,
		   size_t errlen)
{
	char p[PATH_MAX], q[PATH_MAX];
	FILE *fp;
	size_t i;

	for (i = 0; i < nth; i++) {
		if (snprintf(p, sizeof(p), "%s/t%u.pt", dir, th[i].idx) >=
		    (int) sizeof(p))
			return lerr(err, errlen, "%s: name too long", dir);
		if (copy_file(th[i].pt_path, p) < 0)
			return lerr(err, errlen, "%s: %s", p, strerror(errno));
	}
	for (i = 0; i < c->im.nmods; i++) {
		const char *m = c->im.mods[i]->path;

		if (!is_utf8(m))
			return lerr(err, errlen, "%s: module path is not "
				    "UTF-8, which LLDB's trace.json cannot "
				    "name", m);
		if (snprintf(p, sizeof(p), "%s/modules%s%s", dir,
			     m[0] == '/' ? "" : "/", m) >= (int) sizeof(p))
			return lerr(err, errlen, "%s: name too long", m);
		/* Two modules with one path: the first copy serves both. */
		if (access(p, F_OK) == 0)
			continue;
		if (make_parents(p) < 0 || copy_file(m, p) < 0)
			return lerr(err, errlen, "%s: cannot copy to %s: %s",
				    m, p, strerror(errno));
	}
	snprintf(q, sizeof(q), "%s/trace.json", dir);
	fp = fopen(q, "w");
	if (!fp)
		return lerr(err, errlen, "%s: %s", q, strerror(errno));
	fprintf(fp, "{\n  \"type\": \"intel-pt\",\n"
		"  \"cpuInfo\": { \"vendor\": \"GenuineIntel\", \"family\": "
		"%d, \"model\": %d, \"stepping\": %d },\n"
		"  \"processes\": [\n    {\n      \"pid\": %d,\n"
		"      \"triple\": \"x86_64-unknown-linux-gnu\",\n"
		"      \"threads\": [", LLDB_CPU_FAMILY, LLDB_CPU_MODEL,
		LLDB_CPU_STEPPING, (int) pid);
	for (i = 0; i < nth; i++)
		fprintf(fp, "%s\n        { \"tid\": %d, \"iptTrace\": "
			"\"t%u.pt\" }", i ? "," : "", (int) th[i].tid,
			th[i].idx);
	fprintf(fp, "\n      ],\n      \"modules\": [");
	for (i = 0; i < c->im.nmods; i++) {
		const char *m = c->im.mods[i]->path;

		snprintf(p, sizeof(p), "modules%s%s", m[0] == '/' ? "" : "/",
			 m);
		fprintf(fp, "%s\n        { \"systemPath\": ", i ? "," : "");
		json_str(fp, m);
		fprintf(fp, ", \"file\": ");
		json_str(fp, p);
		fprintf(fp, ", \"loadAddress\": \"%#llx\" }",
			(unsigned long long) c->im.mods[i]->base);
	}
	fprintf(fp, "\n      ]\n    }\n  ]\n}\n");
	if (ferror(fp) | (fclose(fp) != 0))
		return lerr(err, errlen, "%s: cannot write: %s", q,
			    strerror(errno));
	return 0;
}

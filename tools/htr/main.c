/* htr: Intel PT traces to memory-mapped call trees. */
#include "cmd.h"

#include "htr/htr.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const struct htr_cmd cmds[] = {
	{ "build", cmd_build, "decode an Intel PT trace into an .htr call tree" },
	{ "dump", cmd_dump, "print the call tree of an .htr file" },
	{ "info", cmd_info, "print the header and counts of an .htr file" },
	{ "gaps", cmd_gaps, "list where and why the trace lost instructions" },
	{ "export", cmd_export, "the tree for trace viewers and flame graphs" },
	{ "insns", cmd_insns, "the instructions of a block, re-decoded" },
	{ "find", cmd_find, "list the invocations of functions with their ticks" },
	{ "top", cmd_top, "per-function calls and TSC ticks" },
	{ "record", cmd_record, "run a program under qemu-user, write its Intel PT" },
};

static void help(FILE *fp)
{
	size_t i;

	fprintf(fp, "usage: htr COMMAND [options] [args]\n\ncommands:\n");
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(fp, "  %-8s %s\n", cmds[i].name, cmds[i].desc);
	fprintf(fp, "\n'htr COMMAND --help' describes a command.\n"
		"exit status: 0 ok, 1 failure, 2 usage error\n");
}

int fail(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "htr: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return HTR_EXIT_FAIL;
}

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "htr: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (try 'htr %s --help')\n", cmd);
	return HTR_EXIT_USAGE;
}

int option_error(const char *cmd, int c, char **argv)
{
	const char *arg = argv[optind - 1];
	int len;

	/* A short option: getopt says which letter; argv[optind - 1] may
	 * be "-vx", "-x y" or, before getopt moved past the word, the
	 * command's name. */
	if (strncmp(arg, "--", 2))
		return usage_error(cmd, c == ':' ? "-%c needs a value" :
				   "unknown option '-%c'", optopt);
	len = (int) strcspn(arg, "=");
	return usage_error(cmd, c == ':' ? "%.*s needs a value" :
			   "unknown option '%.*s'", len, arg);
}

/* One of three number parsers, each for its own syntax: this one reads
 * the CLI's IDs, counts and frequencies (hex with 0x, else decimal: no
 * octal, signs or spaces); lib/image.c's reads the numbers inside
 * FILE@BASE and FILE:OFF:SIZE@VADDR without copying them; htr-synth's
 * (tools/synth/main.c) takes counts as people type them (1M, 2.5e6). */
int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int hex;

	if (!s)
		return -1;
	hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	if (hex)
		s += 2;
	if (!(hex ? isxdigit((unsigned char) *s) : isdigit((unsigned char) *s)))
		return -1;
	errno = 0;
	v = strtoull(s, &end, hex ? 16 : 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

/* What @path is when it is not an .htr file but something htr reads
 * otherwise, and what to do with it (a format taking @path twice), or
 * NULL. */
static const char *other_input(const char *path)
{
	static const uint8_t psb[4] = { 0x02, 0x82, 0x02, 0x82 };
	uint8_t b[8] = { 0 };
	FILE *fp = fopen(path, "rb");
	size_t n = fp ? fread(b, 1, sizeof(b), fp) : 0;

	if (fp)
		fclose(fp);
	if (n >= 8 && !memcmp(b, "PERFILE2", 8))
		return "%s: a perf.data, not an htr file: 'htr build %s' "
		       "makes one per thread";
	if (n >= 4 && !memcmp(b, psb, 4))
		return "%s: an Intel PT trace, not an htr file: 'htr build %s "
		       "--elf PROG' makes one";
	if (n >= 4 && !memcmp(b, "\x7f" "ELF", 4))
		return "%s: an ELF file, not an htr file: 'htr build TRACE "
		       "--elf %s' decodes a trace of it";
	return NULL;
}

int open_htr(const char *cmd, const char *path,
	     const struct htr_open_opts *oo, struct htr_file **f)
{
	int err = htr_file_open(f, path, oo);
	const char *what;

	if (err >= 0)
		return 0;
	if (err == HTR_ERR_FORMAT && (what = other_input(path)))
		fail(cmd, what, path, path);
	else
		fail(cmd, "%s", *f ? htr_file_last_error(*f) : htr_errstr(err));
	return -1;
}

int parse_duration(const char *s, uint64_t *out, int *unit)
{
	static const struct { const char *name; uint64_t ns; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 },
		{ "s", 1000000000 },
	};
	char num[32];
	size_t n = 0, i;
	uint64_t v;

	while (s && isdigit((unsigned char) s[n]) && n < sizeof(num) - 1)
		n++;
	if (!s || !n || n == sizeof(num) - 1)
		return -1;
	memcpy(num, s, n);
	num[n] = '\0';
	if (parse_u64(num, &v) < 0)
		return -1;
	*unit = s[n] != '\0';
	if (!*unit) {
		*out = v;
		return 0;
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(s + n, units[i].name)) {
			if (v > UINT64_MAX / units[i].ns)
				return -1;
			*out = v * units[i].ns;
			return 0;
		}
	return -1;
}

/* A byte count with an optional K, M or G (powers of 1024). */
int parse_bytes(const char *s, uint64_t *out)
{
	static const char units[] = "KMG";
	size_t n = strlen(s);
	const char *u = n ? strchr(units, s[n - 1] & ~0x20) : NULL;
	char num[32];
	uint64_t v;
	int shift;

	if (!u || !*u)
		return parse_u64(s, out);
	if (n - 1 >= sizeof(num))
		return -1;
	memcpy(num, s, n - 1);
	num[n - 1] = 0;
	shift = 10 * (int) (u - units + 1);
	if (parse_u64(num, &v) < 0 || v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

int parse_range(const char *s, uint64_t *start, uint64_t *end)
{
	const char *dash = strchr(s, '-');
	char a[64];

	if (!dash || (size_t) (dash - s) >= sizeof(a))
		return -1;
	memcpy(a, s, (size_t) (dash - s));
	a[dash - s] = 0;
	return parse_u64(a, start) < 0 || parse_u64(dash + 1, end) < 0 ? -1 : 0;
}

int place_parse(const char *cmd, struct place *p, const char *opt,
		const char *arg)
{
	int block = !strcmp(opt, "block");

	if (p->kind)
		return usage_error(cmd, "--%s: a place was given already "
				   "(one of --block or --insn)", opt);
	if (parse_u64(arg, &p->n) < 0)
		return usage_error(cmd, "--%s: bad value '%s' (%s)", opt, arg,
				   block ? "a block index, as find and top "
				   "print it" : "an instruction ID");
	p->kind = block ? 'b' : 'i';
	return 0;
}

int place_block(const char *cmd, const char *path,
		const struct htr_file *f, const struct place *p,
		uint32_t *block)
{
	uint32_t n = htr_block_count(f);
	int err;

	*block = HTR_NONE;
	if (p->kind == 'b') {
		if (p->n >= n)
			return fail(cmd, "%s: block %" PRIu64 ": no such block "
				    "(the file has %" PRIu32 ", 0 to %" PRIu32
				    ")", path, p->n, n, n ? n - 1 : 0);
		*block = (uint32_t) p->n;
	} else if (p->kind == 'i') {
		err = htr_block_for_insn(f, p->n, block);
		if (err < 0)
			return fail(cmd, "%s: instruction %" PRIu64 ": %s",
				    path, p->n, err == HTR_ERR_NOTFOUND ?
				    "not inside any block" : htr_errstr(err));
	}
	return 0;
}

int analysis_fail(const char *cmd, const struct htr_file *f,
		  const struct htr_analysis *a, int err)
{
	const char *msg = a && htr_analysis_last_error(a)[0] ?
			  htr_analysis_last_error(a) : htr_errstr(err);
	const char *path = htr_file_path(f);

	/* Messages about blocks do not say which file; those about the
	 * sidecar name it already. */
	if (path && path[0] && !strstr(msg, path))
		return fail(cmd, "%s: %s", path, msg);
	return fail(cmd, "%s", msg);
}

int open_analysis(const char *cmd, struct htr_file *f, unsigned what,
		  struct htr_analysis **a)
{
	struct htr_analysis_opts ao;
	int err;

	htr_analysis_opts_init(&ao);
	ao.analyzers = what;
	err = htr_analysis_open(a, f, &ao);
	if (err < 0) {
		analysis_fail(cmd, f, *a, err);
		htr_analysis_close(*a);
		*a = NULL;
		return -1;
	}
	if (htr_analysis_flags(*a) & HTR_ANALYSIS_IN_MEMORY)
		fprintf(stderr, "htr: %s: results computed in memory, not "
			"saved (%s)\n", cmd, htr_analysis_note(*a));
	else if (htr_analysis_flags(*a) & HTR_ANALYSIS_SYMS_PARTIAL)
		fprintf(stderr, "htr: %s: some names are missing (%s)\n", cmd,
			htr_analysis_note(*a));
	return 0;
}

void units_init(struct units *u, const struct htr_file *f, int ticks)
{
	uint64_t ns;

	u->f = f;
	u->ns = !ticks && htr_ticks_to_ns(f, 0, &ns) == 0;
}

uint64_t units_of(const struct units *u, uint64_t ticks)
{
	uint64_t ns;

	return u->ns && htr_ticks_to_ns(u->f, ticks, &ns) == 0 ? ns : ticks;
}

const char *units_name(const struct units *u)
{
	return u->ns ? "ns" : "ticks";
}

void thread_line(const struct htr_file *f, const struct units *u)
{
	struct htr_thread_info ti;

	if (htr_file_thread(f, &ti, sizeof(ti)) < 0)
		return;
	printf("# thread %u (pid %u, %s)%s%s\n", ti.tid, ti.pid,
	       ti.comm[0] ? ti.comm : "?", u ? ", times in " : "",
	       u ? (u->ns ? "ns" : "TSC ticks") : "");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		help(stderr);
		return HTR_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		help(stdout);
		return HTR_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("htr %s\n", htr_version());
		return HTR_EXIT_OK;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "htr: '%s' is not a command (try 'htr --help')\n",
		argv[1]);
	return HTR_EXIT_USAGE;
}


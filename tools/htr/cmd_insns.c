/* htr insns: the instructions of a block or a stretch of the trace. */
#include "cmd.h"

#include "htr/htr.h"

#include <Zydis/Zydis.h>

#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_text[] =
"usage: htr insns [--trace TRACE] [--insn ID | --block N] [--count N]\n"
"                 [--syntax att|intel] [--bytes] [--ticks] FILE.htr\n"
"\n"
"Print instructions by re-decoding the raw trace the file was built from\n"
"(a seek costs at most two PSB periods of decoding), one per line, under\n"
"a header line (starting with '#') that names the columns and the unit:\n"
"  ID  ADDRESS  WHERE  TIME  INSTRUCTION\n"
"ID the instruction ID (as dump, gaps and --insn take it), WHERE the\n"
"function it belongs to and the offset into it, FUNC+0xOFF (FUNC alone\n"
"at its entry; names as htr find prints them, MODULE+0xOFFSET where no\n"
"symbol covers it), TIME the time the build knew there, counted from the\n"
"trace's first time point ('-' before it): ns when the file knows perf's\n"
"clock (built from a perf.data), else TSC ticks; INSTRUCTION Zydis'\n"
"disassembly, branch targets as absolute addresses with <FUNC+0xOFF>.\n"
"A line '-- gap (KIND)' stands where the decoder lost instructions.  A\n"
"file built from a perf.data starts with '# thread TID (pid PID, COMM)'.\n"
"\n"
"The .htr file records its trace's size and hash, not where it was.\n"
"Without --trace the trace is looked for next to FILE.htr: STEM.pt,\n"
"STEM.data, STEM (STEM: FILE without .htr, and without a thread's .TID),\n"
"then any other file there of the recorded size or, for a file built\n"
"from a perf.data, any perf.data there.  The first whose identity\n"
"matches is used.  The code comes from the image the file records (moved\n"
"files are looked for next to FILE.htr).  For a file built from a\n"
"perf.data, the thread's trace is read from the perf.data (per-thread\n"
"recordings; a CPU-wide one cannot be re-decoded).\n"
"\n"
"  -t, --trace TRACE   the raw trace or perf.data FILE.htr was built\n"
"                      from (its size and hash are checked)\n"
"  -i, --insn ID       start at instruction ID (default 0; --from ID:\n"
"                      the same)\n"
"  -b, --block N       the instructions of block N (its span; an index\n"
"                      as find, top and dump --json print it)\n"
"  -n, --count N       print N instructions at most (default 20; 0: all)\n"
"  -s, --syntax S      att (default, as objdump and perf print it) or\n"
"                      intel\n"
"      --bytes         a column BYTES (the instruction's bytes in hex)\n"
"                      before INSTRUCTION\n"
"      --ticks         times in TSC ticks even when ns are known\n"
"  -h, --help          show this help\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

/* The disassembler: Zydis' decoders for the three modes and its
 * formatter. */
struct dis {
	ZydisDecoder z64, z32, z16;
	ZydisFormatter fmt;
	const struct htr_names *syms;    /* NULL: no names */
};

static int dis_init(struct dis *d, int intel, const struct htr_names *syms)
{
	memset(d, 0, sizeof(*d));
	d->syms = syms;
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&d->z64, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64)) ||
	    !ZYAN_SUCCESS(ZydisDecoderInit(&d->z32,
					   ZYDIS_MACHINE_MODE_LONG_COMPAT_32,
					   ZYDIS_STACK_WIDTH_32)) ||
	    !ZYAN_SUCCESS(ZydisDecoderInit(&d->z16,
					   ZYDIS_MACHINE_MODE_LONG_COMPAT_16,
					   ZYDIS_STACK_WIDTH_16)) ||
	    !ZYAN_SUCCESS(ZydisFormatterInit(&d->fmt, intel ?
					     ZYDIS_FORMATTER_STYLE_INTEL :
					     ZYDIS_FORMATTER_STYLE_ATT)))
		return -1;
	/* Numbers as objdump and perf print them: lowercase hex, no
	 * padding ("0x40132f", "$0x7", not "0x000000000040132F"). */
	if (!ZYAN_SUCCESS(ZydisFormatterSetProperty(&d->fmt,
			ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE)) ||
	    !ZYAN_SUCCESS(ZydisFormatterSetProperty(&d->fmt,
			ZYDIS_FORMATTER_PROP_ADDR_PADDING_ABSOLUTE,
			ZYDIS_PADDING_DISABLED)) ||
	    !ZYAN_SUCCESS(ZydisFormatterSetProperty(&d->fmt,
			ZYDIS_FORMATTER_PROP_DISP_PADDING,
			ZYDIS_PADDING_DISABLED)) ||
	    !ZYAN_SUCCESS(ZydisFormatterSetProperty(&d->fmt,
			ZYDIS_FORMATTER_PROP_IMM_PADDING,
			ZYDIS_PADDING_DISABLED)) ||
	    /* As encoded, the address it reaches in a comment. */
	    !ZYAN_SUCCESS(ZydisFormatterSetProperty(&d->fmt,
			ZYDIS_FORMATTER_PROP_FORCE_RELATIVE_RIPREL,
			ZYAN_TRUE)))
		return -1;
	return 0;
}

/* The text of @in into @out ("(bad)" where Zydis cannot decode it), a
 * branch target (a relative immediate, the instruction's last operand)
 * as its absolute address and " <FUNC+0xOFF>", as objdump prints it.
 * Appended to the formatted text rather than through a formatter hook:
 * Zydis' hooks write through Zycore's string functions, a library of
 * its own that htr does not link. */
static void dis_text(const struct dis *d, const struct htr_insn *in,
		     char *out, size_t size)
{
	const ZydisDecoder *z = in->mode == 16 ? &d->z16 :
				in->mode == 32 ? &d->z32 : &d->z64;
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZyanU64 to;
	size_t n;
	unsigned k;
	char name[512];

	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(z, in->raw, in->len, &zi,
						 ops)) ||
	    !ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&d->fmt, &zi, ops,
			zi.operand_count_visible, out, size, in->ip, NULL))) {
		snprintf(out, size, "(bad)");
		return;
	}
	for (k = 0; k < zi.operand_count_visible; k++) {
		int branch = ops[k].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
			     ops[k].imm.is_relative;
		int riprel = ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY &&
			     ops[k].mem.base == ZYDIS_REGISTER_RIP;

		if ((!branch && !riprel) ||
		    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, &ops[k],
							   in->ip, &to)))
			continue;
		n = strlen(out);
		if (riprel)
			n += (size_t) snprintf(out + n, size - n, "  # %#" PRIx64,
					       (uint64_t) to);
		if (n >= size || !d->syms)
			continue;
		htr_names_at(d->syms, to, name, sizeof(name));
		if (strncmp(name, "0x", 2))     /* inside a module */
			snprintf(out + n, size - n, " <%s>", name);
	}
}

/* Finding the trace: candidates are tried with the cursor itself, which
 * checks size and hash (and for a perf.data the thread) and refuses the
 * others with HTR_ERR_FORMAT. */
struct finder {
	const struct htr_file *f;
	struct htr_cursor_opts *co;
	struct htr_cursor *cur;         /* the match */
	struct htr_file_info fi;
	int thread;                     /* built from a perf.data */
	/* Tried already (a name candidate seen again in the scan). */
	dev_t dev[8];
	ino_t ino[8];
	unsigned ntried;
	/* Why the first candidate named after the .htr was refused ("" if
	 * none was there). */
	char why[600];
};

/* Try @cand.  Returns 1 (a match: f->cur), 0 (not it), or -1 (out of
 * memory). */
static int try_trace(struct finder *fd, const char *cand, int named)
{
	struct htr_cursor *cur = NULL;
	struct stat st;
	unsigned i;
	int err;

	if (stat(cand, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	for (i = 0; i < fd->ntried && i < 8; i++)
		if (fd->dev[i] == st.st_dev && fd->ino[i] == st.st_ino)
			return 0;
	if (fd->ntried < 8) {
		fd->dev[fd->ntried] = st.st_dev;
		fd->ino[fd->ntried] = st.st_ino;
	}
	fd->ntried++;
	fd->co->trace = cand;
	err = htr_cursor_alloc(&cur, fd->f, fd->co);
	if (err == 0) {
		fd->cur = cur;
		return 1;
	}
	if (named && !fd->why[0])
		snprintf(fd->why, sizeof(fd->why), "%s",
			 cur && htr_cursor_last_error(cur)[0] ?
			 htr_cursor_last_error(cur) : htr_errstr(err));
	htr_cursor_free(cur);
	fd->co->trace = NULL;
	return err == HTR_ERR_NOMEM ? -1 : 0;
}

/* Worth hashing: a file of the trace's size, or for a file built from a
 * perf.data a perf.data (its magic; the thread's trace is inside). */
static int plausible(const struct finder *fd, const char *cand)
{
	struct stat st;
	char magic[8];
	int fdes;
	ssize_t n;

	if (stat(cand, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	if ((uint64_t) st.st_size == fd->fi.trace_size)
		return 1;
	if (!fd->thread)
		return 0;
	fdes = open(cand, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fdes < 0)
		return 0;
	n = read(fdes, magic, sizeof(magic));
	close(fdes);
	return n == (ssize_t) sizeof(magic) && !memcmp(magic, "PERFILE2", 8);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Every other file in @dir (sorted, for a stable choice between copies)
 * that is plausible.  Returns 1, 0 or -1 as try_trace(). */
static int scan_dir(struct finder *fd, const char *dir)
{
	DIR *dp = opendir(*dir ? dir : ".");
	struct dirent *de;
	char **names = NULL, *cand = NULL;
	size_t n = 0, cap = 0, i, len;
	int rc = 0;

	if (!dp)
		return 0;
	while ((de = readdir(dp))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **p = realloc(names, (cap = cap ? 2 * cap : 64) *
					   sizeof(*names));

			if (!p) {
				rc = -1;
				break;
			}
			names = p;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = -1;
			break;
		}
		n++;
	}
	closedir(dp);
	if (rc == 0)
		qsort(names, n, sizeof(*names), by_name);
	for (i = 0; rc == 0 && i < n; i++) {
		len = strlen(dir) + strlen(names[i]) + 1;
		free(cand);
		if (!(cand = malloc(len))) {
			rc = -1;
			break;
		}
		snprintf(cand, len, "%s%s", dir, names[i]);
		if (plausible(fd, cand))
			rc = try_trace(fd, cand, 0);
		if (rc == 1) {
			/* The cursor keeps the pointer (its copy of the
			 * opts): the name lives as long as the cursor. */
			fd->co->trace = cand;
			cand = NULL;
		}
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(cand);
	return rc;
}

/* The cursor over @path's trace without --trace, in *@cur; on failure one
 * line on stderr.  *@found is set to the trace's name (malloc'ed; the
 * caller frees it).  Returns 0 or HTR_EXIT_FAIL. */
static int find_trace(const char *path, const struct htr_file *f,
		      struct htr_cursor_opts *co, struct htr_cursor **cur,
		      char **found)
{
	static const char *const exts[] = { ".pt", ".data", "" };
	struct finder fd;
	const char *slash = strrchr(path, '/');
	size_t dl = slash ? (size_t) (slash - path + 1) : 0, sl, len, e, k;
	char *dir = NULL, *stem = NULL, *cand = NULL, tried[400];
	int rc = 0, tlen = 0;

	memset(&fd, 0, sizeof(fd));
	fd.f = f;
	fd.co = co;
	fd.fi.size = sizeof(fd.fi);
	if (htr_file_info(f, &fd.fi, sizeof(fd.fi)) < 0)
		return fail("insns", "%s: %s", path, htr_file_last_error(f));
	{
		struct htr_thread_info ti;

		ti.size = sizeof(ti);
		fd.thread = htr_file_thread(f, &ti, sizeof(ti)) == 0;
	}
	dir = malloc(dl + 1);
	stem = strdup(path + dl);
	if (!dir || !stem)
		goto nomem;
	memcpy(dir, path, dl);
	dir[dl] = 0;
	sl = strlen(stem);
	if (sl > 4 && !strcmp(stem + sl - 4, ".htr"))
		stem[sl -= 4] = 0;
	tried[0] = 0;
	/* STEM, then for a thread's file NAME.TID the recording's NAME. */
	for (k = 0; k < 2 && rc == 0; k++) {
		if (k == 1) {
			char *dot = strrchr(stem, '.');

			if (!fd.thread || !dot || dot == stem || !dot[1] ||
			    strspn(dot + 1, "0123456789") != strlen(dot + 1))
				break;
			*dot = 0;
		}
		for (e = 0; e < sizeof(exts) / sizeof(exts[0]) && rc == 0;
		     e++) {
			len = dl + strlen(stem) + strlen(exts[e]) + 1;
			free(cand);
			if (!(cand = malloc(len)))
				goto nomem;
			snprintf(cand, len, "%s%s%s", dir, stem, exts[e]);
			if (tlen < (int) sizeof(tried) - 1)
				tlen += snprintf(tried + tlen,
						 sizeof(tried) - (size_t) tlen,
						 "%s, ", cand);
			rc = try_trace(&fd, cand, 1);
		}
	}
	if (rc == 0)
		rc = scan_dir(&fd, dir);
	else if (rc == 1) {
		co->trace = cand;
		cand = NULL;
	}
	if (rc < 0)
		goto nomem;
	if (rc == 1) {
		*cur = fd.cur;
		*found = (char *) co->trace;
		rc = 0;
	} else if (fd.why[0]) {
		rc = fail("insns", "%s: no trace found for it; %s (give "
			  "--trace)", path, fd.why);
	} else {
		if (tlen >= 2)
			tried[tlen - 2] = 0;    /* the last ", " */
		rc = fail("insns", "%s: its trace (%" PRIu64 " bytes, hash "
			  "%016" PRIx64 ") is not at %s, nor %s in %s: give "
			  "--trace", path, fd.fi.trace_size, fd.fi.trace_hash,
			  tried, fd.thread ? "in any perf.data" :
			  "any file of that size", *dir ? dir : "./");
	}
	free(dir);
	free(stem);
	free(cand);
	return rc;
nomem:
	free(dir);
	free(stem);
	free(cand);
	return fail("insns", "out of memory");
}

int cmd_insns(int argc, char **argv)
{
	enum { O_BYTES = 256, O_TICKS };
	static const struct option lopts[] = {
		{ "trace", required_argument, NULL, 't' },
		{ "block", required_argument, NULL, 'b' },
		{ "insn", required_argument, NULL, 'i' },
		{ "from", required_argument, NULL, 'f' },
		{ "count", required_argument, NULL, 'n' },
		{ "syntax", required_argument, NULL, 's' },
		{ "bytes", no_argument, NULL, O_BYTES },
		{ "ticks", no_argument, NULL, O_TICKS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_cursor_opts co;
	struct htr_cursor *cur = NULL;
	struct htr_file *f = NULL;
	struct htr_names *syms = NULL;
	const char *why;
	struct units u;
	struct dis d;
	const char *path;
	char *found = NULL;
	struct place at = { 0, 0 };
	uint64_t from = 0, count = 20, last = UINT64_MAX, i, id0, t0 = 0;
	uint64_t ns0 = 0;
	uint32_t block;
	int c, rc = HTR_EXIT_FAIL, err, intel = 0, bytes = 0, ticks = 0;
	int have_t0;

	htr_cursor_opts_init(&co);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":t:b:i:f:n:s:h", lopts,
				NULL)) != -1) {
		switch (c) {
		case 't': co.trace = optarg; break;
		case 'b':
		case 'i':
		case 'f':
			if (place_parse("insns", &at, c == 'b' ? "block" :
					c == 'i' ? "insn" : "from", optarg))
				return HTR_EXIT_USAGE;
			break;
		case 'n':
			if (parse_u64(optarg, &count) < 0)
				return usage_error("insns", "--count: bad value "
						   "'%s'", optarg);
			break;
		case 's':
			if (!strcmp(optarg, "intel"))
				intel = 1;
			else if (!strcmp(optarg, "att"))
				intel = 0;
			else
				return usage_error("insns", "--syntax: bad "
						   "value '%s' (att or intel)",
						   optarg);
			break;
		case O_BYTES: bytes = 1; break;
		case O_TICKS: ticks = 1; break;
		case 'h': fputs(usage_text, stdout); return HTR_EXIT_OK;
		default:
			return option_error("insns", c, argv);
		}
	}
	if (optind + 1 != argc)
		return usage_error("insns", optind == argc ? "no FILE given" :
				   "more than one FILE given");
	path = argv[optind];
	if (open_htr("insns", path, NULL, &f) < 0)
		goto out;
	if (at.kind == 'i') {
		from = at.n;
	} else if (at.kind == 'b') {
		struct htr_block_info bi;

		if (place_block("insns", path, f, &at, &block))
			goto out;
		bi.size = sizeof(bi);
		err = htr_block_get(f, block, &bi, sizeof(bi));
		if (err < 0) {
			rc = fail("insns", "%s: block %" PRIu32 ": %s", path,
				  block, htr_errstr(err));
			goto out;
		}
		from = bi.first;
		last = bi.last;
	}
	if (co.trace) {
		err = htr_cursor_alloc(&cur, f, &co);
		if (err < 0) {
			rc = fail("insns", "%s (--trace for %s)", cur &&
				  htr_cursor_last_error(cur)[0] ?
				  htr_cursor_last_error(cur) :
				  htr_errstr(err), path);
			goto out;
		}
	} else if (find_trace(path, f, &co, &cur, &found)) {
		goto out;
	}
	err = htr_cursor_seek(cur, from);
	if (err < 0) {
		rc = fail("insns", "%s: %s", path,
			  htr_cursor_last_error(cur)[0] ?
			  htr_cursor_last_error(cur) : htr_errstr(err));
		goto out;
	}
	/* Names as find prints them (the symbol analyzer's own lookup);
	 * without symbols MODULE+0xOFFSET. */
	if (htr_names_open(&syms, f) < 0) {
		rc = fail("insns", "out of memory");
		goto out;
	}
	if (htr_names_skipped(syms, &why))
		fprintf(stderr, "htr: insns: some names are missing (%s)\n",
			why);
	if (dis_init(&d, intel, syms) < 0) {
		rc = fail("insns", "cannot set up Zydis' formatter");
		goto out;
	}
	units_init(&u, f, ticks);
	have_t0 = htr_tsc_point(f, 0, &id0, &t0) == 0;
	if (have_t0 && u.ns && htr_tsc_to_ns(f, t0, &ns0) < 0)
		u.ns = 0;
	thread_line(f, &u);
	printf("# ID  ADDRESS  WHERE  TIME  %sINSTRUCTION  (TIME in %s from "
	       "the first time point, %s syntax)\n", bytes ? "BYTES  " : "",
	       units_name(&u), intel ? "Intel" : "AT&T");
	for (i = 0; !count || i < count; i++) {
		struct htr_insn in;
		char where[512], text[800];
		unsigned k;

		err = htr_cursor_next(cur, &in, sizeof(in));
		if (err == HTR_ERR_ITEROVER || (err == 0 && in.id > last))
			break;
		if (err < 0) {
			rc = fail("insns", "%s: %s", path,
				  htr_cursor_last_error(cur));
			goto out;
		}
		if (in.gap && in.id != from)
			printf("-- gap (%s)\n", htr_gap_kind_str(in.gap));
		htr_names_at(syms, in.ip, where, sizeof(where));
		printf("%" PRIu64 "  %#" PRIx64 "  %s  ", in.id, in.ip, where);
		if (in.has_tsc && have_t0 && in.tsc >= t0) {
			uint64_t t = in.tsc - t0, ns;

			/* Both ends on perf's clock, as export does. */
			if (u.ns && htr_tsc_to_ns(f, in.tsc, &ns) == 0)
				t = ns - ns0;
			printf("%" PRIu64, t);
		} else {
			putchar('-');
		}
		fputs("  ", stdout);
		if (bytes) {
			for (k = 0; k < in.len; k++)
				printf("%02x", in.raw[k]);
			fputs("  ", stdout);
		}
		dis_text(&d, &in, text, sizeof(text));
		fputs(text, stdout);
		putchar('\n');
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		rc = fail("insns", "writing output failed");
		goto out;
	}
	rc = HTR_EXIT_OK;
out:
	htr_names_free(syms);
	htr_cursor_free(cur);
	free(found);
	htr_file_close(f);
	return rc;
}

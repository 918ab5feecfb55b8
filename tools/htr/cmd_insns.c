/* htr insns: the instructions of a block or a stretch of the trace. */
#include "cmd.h"

#include "htr/htr.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

static const char usage_text[] =
"usage: htr insns --trace TRACE [--insn ID | --block N] [--count N] FILE.htr\n"
"\n"
"Print instructions by re-decoding the raw trace the file was built from\n"
"(a seek costs at most two PSB periods of decoding), one per line:\n"
"  ID  ADDRESS  BYTES  CLASS  TSC\n"
"with a line '-- gap (KIND)' where the decoder lost instructions.  The\n"
"code comes from the image the file records (moved files are looked for\n"
"next to FILE.htr).  For a file built from a perf.data, TRACE is that\n"
"perf.data: the thread's trace is read from it (per-thread recordings;\n"
"a CPU-wide one cannot be re-decoded).\n"
"\n"
"  -t, --trace TRACE   the raw trace or perf.data FILE.htr was built\n"
"                      from (required)\n"
"  -i, --insn ID       start at instruction ID (default 0; --from ID:\n"
"                      the same)\n"
"  -b, --block N       the instructions of block N (its span; an index\n"
"                      as find, top and dump --json print it)\n"
"  -n, --count N       print N instructions at most (default 20; 0: all)\n"
"  -h, --help          show this help\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

static const char *cls_name(enum htr_insn_class k)
{
	switch (k) {
	case HTR_INSN_CALL: return "call";
	case HTR_INSN_RET: return "ret";
	case HTR_INSN_JUMP: return "jump";
	case HTR_INSN_COND: return "cond";
	case HTR_INSN_FAR_CALL: return "far-call";
	case HTR_INSN_FAR_RET: return "far-ret";
	case HTR_INSN_FAR_JUMP: return "far-jump";
	default: return "-";
	}
}

int cmd_insns(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "trace", required_argument, NULL, 't' },
		{ "block", required_argument, NULL, 'b' },
		{ "insn", required_argument, NULL, 'i' },
		{ "from", required_argument, NULL, 'f' },
		{ "count", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_cursor_opts co;
	struct htr_cursor *cur = NULL;
	struct htr_file *f = NULL;
	const char *path;
	struct place at = { 0, 0 };
	uint64_t from = 0, count = 20, last = UINT64_MAX, i;
	uint32_t block;
	int c, rc = HTR_EXIT_FAIL, err;

	htr_cursor_opts_init(&co);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":t:b:i:f:n:h", lopts, NULL)) != -1) {
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
		case 'h': fputs(usage_text, stdout); return HTR_EXIT_OK;
		default:
			return option_error("insns", c, argv);
		}
	}
	if (optind + 1 != argc)
		return usage_error("insns", "expected one FILE.htr");
	if (!co.trace)
		return usage_error("insns", "--trace is required");
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
	err = htr_cursor_alloc(&cur, f, &co);
	if (err == 0)
		err = htr_cursor_seek(cur, from);
	if (err < 0) {
		rc = fail("insns", "%s", cur && htr_cursor_last_error(cur)[0] ?
			  htr_cursor_last_error(cur) : htr_errstr(err));
		goto out;
	}
	for (i = 0; !count || i < count; i++) {
		struct htr_insn in;
		unsigned k;

		err = htr_cursor_next(cur, &in, sizeof(in));
		if (err == HTR_ERR_ITEROVER || (err == 0 && in.id > last))
			break;
		if (err < 0) {
			rc = fail("insns", "%s", htr_cursor_last_error(cur));
			goto out;
		}
		if (in.gap && in.id != from)
			printf("-- gap (%s)\n", htr_gap_kind_str(in.gap));
		printf("%" PRIu64 "  %#" PRIx64 "  ", in.id, in.ip);
		for (k = 0; k < in.len; k++)
			printf("%02x", in.raw[k]);
		printf("  %s", cls_name(in.cls));
		if (in.has_tsc)
			printf("  %" PRIu64, in.tsc);
		putchar('\n');
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		rc = fail("insns", "writing output failed");
		goto out;
	}
	rc = HTR_EXIT_OK;
out:
	htr_cursor_free(cur);
	htr_file_close(f);
	return rc;
}

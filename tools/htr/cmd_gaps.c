/* htr gaps: where and why a trace lost instructions. */
#include "cmd.h"

#include "htr/htr.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

static const char usage_text[] =
"usage: htr gaps [--json] [--limit N] FILE.htr\n"
"\n"
"List the gaps of a build, one per line, in trace order:\n"
"  ID  KIND  OFFSET  REASON\n"
"ID is the first instruction after the gap, KIND disabled (tracing was\n"
"off: untraced code, a syscall, an interrupt), overflow (the processor\n"
"lost packets) or error (the decoder could not follow the trace and\n"
"resynchronized at the next PSB), OFFSET the trace offset where it was\n"
"noticed and REASON libipt's message for errors ('no memory mapped at\n"
"this address': the image lacks code the trace ran, or is loaded at the\n"
"wrong address; 'runaway': the image does not match the recording) and\n"
"for a stretch of kernel code a user+kernel trace ran without the\n"
"kernel's code at hand ('[kernel]'; htr build --kcore or --vmlinux\n"
"decodes it).  A last line counts the gaps of each kind.\n"
"\n"
"  -j, --json      a JSON array of {id, kind, offset, reason}\n"
"  -n, --limit N   list the first N gaps only (the counts cover all)\n"
"  -h, --help      show this help\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

int cmd_gaps(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "limit", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_file *f = NULL;
	uint64_t i, n, limit = UINT64_MAX, count[4] = { 0 };
	int c, json = 0, rc = HTR_EXIT_FAIL, err;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":jn:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 'n':
			if (parse_u64(optarg, &limit) < 0)
				return usage_error("gaps", "--limit: bad value "
						   "'%s'", optarg);
			break;
		case 'h':
			fputs(usage_text, stdout);
			return HTR_EXIT_OK;
		default:
			return option_error("gaps", c, argv);
		}
	}
	if (optind + 1 != argc)
		return usage_error("gaps", optind == argc ? "no FILE given" :
				   "more than one FILE given");
	if (open_htr("gaps", argv[optind], NULL, &f) < 0)
		goto out;
	n = htr_gap_count(f);
	if (json)
		printf("[");
	for (i = 0; i < n; i++) {
		struct htr_gap_info g;

		g.size = sizeof(g);
		err = htr_gap_get(f, i, &g, sizeof(g));
		if (err < 0) {
			rc = fail("gaps", "%s: gap %" PRIu64 ": %s", argv[optind],
				  i, htr_errstr(err));
			goto out;
		}
		count[g.kind & 3]++;
		if (i >= limit)
			continue;
		if (json) {
			printf("%s\n  {\"id\": %" PRIu64 ", \"kind\": \"%s\", "
			       "\"offset\": %" PRIu64 ", \"reason\": ",
			       i ? "," : "", g.id, htr_gap_kind_str(g.kind),
			       g.offset);
			json_string(stdout, htr_gap_reason(&g));
			printf("}");
		} else {
			printf("%" PRIu64 "  %s  0x%" PRIx64 "  %s\n", g.id,
			       htr_gap_kind_str(g.kind), g.offset,
			       htr_gap_reason(&g));
		}
	}
	if (json)
		printf("%s]\n", n && limit ? "\n" : "");
	else
		printf("%" PRIu64 " gaps: %" PRIu64 " disabled, %" PRIu64
		       " overflow, %" PRIu64 " error\n", n,
		       count[HTR_GAP_DISABLED], count[HTR_GAP_OVERFLOW],
		       count[HTR_GAP_ERROR]);
	rc = HTR_EXIT_OK;
out:
	htr_file_close(f);
	return rc;
}

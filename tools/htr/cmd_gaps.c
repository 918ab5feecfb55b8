/* htr gaps: where and why a trace lost instructions. */
#include "cmd.h"

#include "htr/htr.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

static const char usage_text[] =
"usage: htr gaps [--json] [--limit N] [--ticks] FILE.htr\n"
"\n"
"List the gaps of a build, one per line, in trace order, under a header\n"
"line (starting with '#') that names the columns and the time unit:\n"
"  ID  KIND  OFFSET  LASTED  WHERE  REASON\n"
"ID is the first instruction after the gap, KIND disabled (tracing was\n"
"off: untraced code, a syscall, an interrupt), overflow (the processor\n"
"lost packets) or error (the decoder could not follow the trace and\n"
"resynchronized at the next PSB), OFFSET the trace offset where it was\n"
"noticed, LASTED the time from the last instruction before the gap to\n"
"the first time the trace gives after it (at most the gap's length plus\n"
"the run of instructions up to that timing packet; '-' where no time is\n"
"known), WHERE the function that ran the last\n"
"instruction before the gap, and '-> FUNC' when the trace went on in\n"
"another one ('-' outside every block; names as htr dump --tsc prints\n"
"them), and REASON what happened: libipt's message for errors ('no\n"
"memory mapped at this address': the image lacks code the trace ran, or\n"
"is loaded at the wrong address; 'runaway': the image does not match the\n"
"recording), '[kernel]' for a stretch of kernel code a user+kernel trace\n"
"ran without the kernel's code at hand (htr build --kcore or --vmlinux\n"
"decodes it).  Times are in ns when the file knows perf's clock (built\n"
"from a perf.data), else TSC ticks.  Names come from the sidecar\n"
"FILE.htr.lmdb/, computed on first use.  A last line counts the gaps of\n"
"each kind.\n"
"\n"
"  -j, --json      a JSON array of {id, kind, offset, lasted (ticks, null\n"
"                  where unknown; lasted_ns too with perf's clock),\n"
"                  before, after (function names, null outside every\n"
"                  block), reason}\n"
"  -n, --limit N   list the first N gaps only (the counts cover all)\n"
"      --ticks     times in TSC ticks even when ns are known\n"
"  -h, --help      show this help\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

/* The name of the function that ran instruction @id into *@name (NULL
 * outside every block).  Returns 0 or a negative HTR_ERR_*. */
static int func_at(const struct htr_file *f, struct htr_analysis *an,
		   uint64_t id, const char **name)
{
	uint32_t block;
	int err = htr_block_for_insn(f, id, &block);

	*name = NULL;
	if (err == HTR_ERR_NOTFOUND || err == HTR_ERR_RANGE)
		return 0;
	return err < 0 ? err : htr_block_name(an, block, name);
}

/* Ticks from the last instruction before gap @g to the first time the
 * trace tells after it (the first time point at or past the gap: the
 * time a point holds is known from its instruction on, and the first
 * instructions after a gap often share the time from before it) into
 * *@ticks.  Returns 0, or -1 where no time is known. */
static int gap_lasted(const struct htr_file *f, const struct htr_gap_info *g,
		      uint64_t *ticks)
{
	uint64_t lo = 0, hi = htr_tsc_count(f), mid, id, before, after;

	if (!g->id || htr_tsc_for_insn(f, g->id - 1, &before) < 0)
		return -1;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (htr_tsc_point(f, mid, &id, &after) < 0)
			return -1;
		if (id < g->id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (htr_tsc_point(f, lo, &id, &after) < 0 || after < before)
		return -1;
	*ticks = after - before;
	return 0;
}

int cmd_gaps(int argc, char **argv)
{
	enum { O_TICKS = 256 };
	static const struct option lopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "limit", required_argument, NULL, 'n' },
		{ "ticks", no_argument, NULL, O_TICKS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_file *f = NULL;
	struct htr_analysis *an = NULL;
	struct units u;
	const char *path;
	uint64_t i, n, limit = UINT64_MAX, count[4] = { 0 };
	int c, json = 0, ticks = 0, rc = HTR_EXIT_FAIL, err;

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
		case O_TICKS: ticks = 1; break;
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
	path = argv[optind];
	if (open_htr("gaps", path, NULL, &f) < 0)
		goto out;
	n = htr_gap_count(f);
	/* Names only for the gaps printed: no sidecar for an empty list. */
	if (n && limit && open_analysis("gaps", f, HTR_ANALYZE_SYMS, &an) < 0)
		goto out;
	units_init(&u, f, ticks);
	if (json) {
		printf("[");
	} else {
		thread_line(f, NULL);
		printf("# ID  KIND  OFFSET  LASTED  WHERE  REASON  (LASTED in "
		       "%s)\n", units_name(&u));
	}
	for (i = 0; i < n; i++) {
		struct htr_gap_info g;
		const char *before, *after;
		uint64_t lasted;
		int timed;

		g.size = sizeof(g);
		err = htr_gap_get(f, i, &g, sizeof(g));
		if (err < 0) {
			rc = fail("gaps", "%s: gap %" PRIu64 ": %s", path, i,
				  htr_errstr(err));
			goto out;
		}
		count[g.kind & 3]++;
		if (i >= limit)
			continue;
		err = g.id ? func_at(f, an, g.id - 1, &before) : 0;
		if (!g.id)
			before = NULL;
		if (err == 0)
			err = func_at(f, an, g.id, &after);
		if (err < 0) {
			rc = analysis_fail("gaps", f, an, err);
			goto out;
		}
		timed = gap_lasted(f, &g, &lasted) == 0;
		if (json) {
			printf("%s\n  {\"id\": %" PRIu64 ", \"kind\": \"%s\", "
			       "\"offset\": %" PRIu64 ", \"lasted\": ",
			       i ? "," : "", g.id, htr_gap_kind_str(g.kind),
			       g.offset);
			if (timed)
				printf("%" PRIu64, lasted);
			else
				printf("null");
			if (u.ns) {
				printf(", \"lasted_ns\": ");
				if (timed)
					printf("%" PRIu64, units_of(&u, lasted));
				else
					printf("null");
			}
			printf(", \"before\": ");
			before ? htr_json_string(stdout, before) : (void) printf("null");
			printf(", \"after\": ");
			after ? htr_json_string(stdout, after) : (void) printf("null");
			printf(", \"reason\": ");
			htr_json_string(stdout, htr_gap_reason(&g));
			printf("}");
			continue;
		}
		printf("%" PRIu64 "  %s  0x%" PRIx64 "  ", g.id,
		       htr_gap_kind_str(g.kind), g.offset);
		if (timed)
			printf("%" PRIu64, units_of(&u, lasted));
		else
			printf("-");
		printf("  %s", before ? before : "-");
		if (after && (!before || strcmp(before, after)))
			printf(" -> %s", after);
		printf("  %s\n", htr_gap_reason(&g));
	}
	if (json)
		printf("%s]\n", n && limit ? "\n" : "");
	else
		printf("%" PRIu64 " gaps: %" PRIu64 " disabled, %" PRIu64
		       " overflow, %" PRIu64 " error\n", n,
		       count[HTR_GAP_DISABLED], count[HTR_GAP_OVERFLOW],
		       count[HTR_GAP_ERROR]);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		rc = fail("gaps", "writing output failed");
		goto out;
	}
	rc = HTR_EXIT_OK;
out:
	htr_analysis_close(an);
	htr_file_close(f);
	return rc;
}

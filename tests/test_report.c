/* htr/report.h's text lines against what docs/ and `htr dump --help`
 * promise: the columns, the indentation rule, "?" for an untraced entry,
 * one-decimal shares, and snprintf()'s contract when a line is cut. */
#include "htr/export.h"
#include "htr/report.h"

#include <criterion/criterion.h>
#include <string.h>

static struct htr_block_info block(uint64_t first, uint64_t last,
				   uint64_t entry, uint32_t func, uint32_t flags)
{
	struct htr_block_info bi;

	memset(&bi, 0, sizeof(bi));
	bi.size = sizeof(bi);
	bi.first = first;
	bi.last = last;
	bi.entry = entry;
	bi.func = func;
	bi.flags = flags;
	return bi;
}

Test(report, block_line_columns)
{
	struct htr_block_info bi = block(7, 1234, 0x401000, 3, 0);
	char buf[128];
	char flags[64];

	cr_assert_eq(htr_text_block(buf, sizeof(buf), 0, &bi),
		     strlen("7..1234  0x401000  -"));
	cr_assert_str_eq(buf, "7..1234  0x401000  -", "'-': no flags");
	bi = block(0, 0, 0, HTR_NONE, HTR_BLOCK_LATE | HTR_BLOCK_TRUNCATED);
	htr_text_block(buf, sizeof(buf), 2, &bi);
	htr_block_flags_str(bi.flags, flags, sizeof(flags));
	cr_assert_str_eq(buf + 4, strcat(strcpy((char[96]){ 0 },
						"0..0  ?  "), flags));
	cr_assert_eq(strspn(buf, " "), 4, "two spaces a level");
}

Test(report, indentation_stops_at_level_64)
{
	struct htr_block_info bi = block(1, 2, 0x10, 0, 0);
	char buf[512];
	size_t n;

	htr_text_block(buf, sizeof(buf), 63, &bi);
	cr_assert_eq(strspn(buf, " "), 126);
	cr_assert_eq(buf[126], '1');
	n = htr_text_block(buf, sizeof(buf), 100000, &bi);
	cr_assert_eq(strspn(buf, " "), 128);
	cr_assert_str_eq(buf + 128, "[100000] 1..2  0x10  -");
	cr_assert_eq(n, strlen(buf));
}

Test(report, times_line_and_share)
{
	char buf[128];

	htr_text_times(buf, sizeof(buf), 1, "main", 5, 900, 900, 1800);
	cr_assert_str_eq(buf, "  main  5  900  50.0%");
	htr_text_times(buf, sizeof(buf), 0, "f", 0, 0, 0, 0);
	cr_assert_str_eq(buf, "f  0  0  100.0%", "nothing above: all of it");
	htr_text_times(buf, sizeof(buf), 0, "g", 1, 1, 1, 3);
	cr_assert_str_eq(buf, "g  1  1  33.3%");
	htr_text_times(buf, sizeof(buf), 0, "h", 2, 2, 2, 3);
	cr_assert_str_eq(buf, "h  2  2  66.7%", "rounded, not cut");
	htr_text_times(buf, sizeof(buf), 0, NULL, 1, 1, 1, 1);
	cr_assert_str_eq(buf, "?  1  1  100.0%");
}

Test(report, cut_lines_keep_snprintf_contract)
{
	char buf[8], full[64];
	size_t need = htr_text_times(full, sizeof(full), 0, "function",
				     10, 20, 1, 2);

	cr_assert_eq(htr_text_times(buf, sizeof(buf), 0, "function", 10, 20,
				    1, 2), need);
	cr_assert_eq(strlen(buf), sizeof(buf) - 1);
	cr_assert_eq(strncmp(buf, full, sizeof(buf) - 1), 0);
	cr_assert_eq(htr_text_times(NULL, 0, 0, "function", 10, 20, 1, 2),
		     need, "a size query writes nothing");
}

Test(report, block_where)
{
	struct htr_block_info bi = block(1, 2, 0x40, 1, 0);

	cr_assert_eq(htr_block_where(&bi), 0x40);
	bi = block(1, 2, 0, HTR_NONE, HTR_BLOCK_LATE);
	bi.anchor = 0x55;
	bi.anchor_func = 4;
	cr_assert_eq(htr_block_where(&bi), 0x55, "a late block: where it ran");
	bi.anchor_func = HTR_NONE;
	cr_assert_eq(htr_block_where(&bi), 0);
	cr_assert_eq(htr_block_where(NULL), 0);
}

Test(report, visits_refuse_bad_arguments)
{
	cr_assert_eq(htr_top_visit(NULL, NULL, HTR_MATCH_GLOB, HTR_TOP_LOCAL,
				   0, NULL, NULL), HTR_ERR_INVALID);
	cr_assert_eq(htr_find_visit(NULL, NULL, "x", HTR_MATCH_EXACT,
				    HTR_FIND_TIME, 0, NULL, NULL),
		     HTR_ERR_INVALID);
}

Test(report, json_string_escapes_as_rfc_8259)
{
	char buf[64] = "";
	FILE *fp = fmemopen(buf, sizeof(buf), "w");

	cr_assert_not_null(fp);
	htr_json_string(fp, "a\"b\\c\n\x01\xc3\xa9");
	fclose(fp);
	cr_assert_str_eq(buf, "\"a\\\"b\\\\c\\u000a\\u0001\xc3\xa9\"");
}

Test(report, export_format_names)
{
	cr_assert_eq(htr_export_format_of("chrome"), HTR_EXPORT_CHROME);
	cr_assert_eq(htr_export_format_of("folded"), HTR_EXPORT_FOLDED);
	cr_assert_eq(htr_export_format_of("perfetto"), HTR_EXPORT_PERFETTO);
	cr_assert_eq(htr_export_format_of("Chrome"), HTR_ERR_NOTFOUND);
	cr_assert_eq(htr_export_format_of(""), HTR_ERR_NOTFOUND);
	cr_assert_eq(htr_export_format_of(NULL), HTR_ERR_NOTFOUND);
}

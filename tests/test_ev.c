/*
 * lib/ev.c on its own: the decoder's events packed by htr_ev__sink() and
 * replayed by htr_ev__apply_n() must build the very tree (and times) the
 * builder gets from the same events directly, for every kind of event
 * and field (run classes, empty interrupt runs, gaps with async, IP and
 * negative codes, resumes, times, syncs).
 */
#include "ev.h"
#include "treebuild_script.h"
#include "htr/tree.h"
#include "tmpdir.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

HTR_TEST_TMPDIR(ev);

static const char *const scripts[] = {
	/* every run class, an interrupt no run carries */
	"run 0x1000 2; call 0x1002 1; run 0x2000 4; fcall 0x2004 1;"
	"run 0xffff0000 2; fret 0xffff0002 1; ret 0x2005 1; run 0x1003 1;"
	"call 0x1004 1; irq 0x3000; run 0xffff0000 1; fret 0xffff0001 1;"
	"run 0x3000 1; jmp 0x3001 1; run 0x1005 1",
	/* gaps of each kind, async with an IP, a TIP.PGD's IP, resumes */
	"call 0x1000 1; gap disabled 0x7000; resume 0x3000; run 0x3000 2;"
	"ret 0x3002 1; gap disabled 0x7100; resume 0x1001; run 0x1001 3;"
	"gap disabled async 0x1004; resume 0x1004; run 0x1004 1;"
	"gap overflow; resume 0x1010; run 0x1010 1; gap error;"
	"resume 0x1020; run 0x1020 1; gap runaway; resume 0x1030;"
	"run 0x1030 1",
	/* times and syncs, around an error */
	"time 50; sync 0; run 0x1000 2; time 100; call 0x1002 1;"
	"run 0x2000 1; time 120; gap error; sync 4096; time 200;"
	"resume 0x2000; run 0x2000 2; time 300; ret 0x2002 1;"
	"run 0x1003 1",
	/* symbols, a longjmp, a late caller */
	"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
	"fn 0x4000 0x100; call 0x1000 1; call 0x2000 1; call 0x3000 1;"
	"run 0x4000 1; jmp 0x4001 1; run 0x2050 1; ret 0x2051 1;"
	"run 0x1001 1; gap error; resume 0x3000; run 0x3000 1;"
	"ret 0x3001 1; run 0x4050 1",
};

static void same(const char *script)
{
	static unsigned n;
	struct tbs_result *direct = malloc(sizeof(*direct));
	struct tbs_result *packed = malloc(sizeof(*packed));
	char path[256];
	uint64_t i;

	cr_assert(direct && packed);
	snprintf(path, sizeof(path), "%s/d%u.htr", dir, n);
	cr_assert_eq(tbs_run(script, path, TBS_ANCHOR, direct), 0, "%s",
		     direct->err);
	snprintf(path, sizeof(path), "%s/e%u.htr", dir, n++);
	cr_assert_eq(tbs_run(script, path, TBS_ANCHOR | TBS_VIA_EV, packed),
		     0, "%s", packed->err);
	cr_assert_str_neq(direct->tree, "");
	cr_assert_str_eq(packed->tree, direct->tree,
			 "ev.c replayed a different tree for\n%s", script);
	cr_assert_eq(packed->ninsns, direct->ninsns);
	cr_assert_eq(packed->gaps, direct->gaps);
	cr_assert_eq(packed->errors, direct->errors);
	cr_assert_eq(packed->runaways, direct->runaways);
	cr_assert_eq(packed->ntsc, direct->ntsc);
	for (i = 0; i < direct->ntsc && i < 16; i++) {
		cr_assert_eq(packed->tsc_id[i], direct->tsc_id[i]);
		cr_assert_eq(packed->tsc_val[i], direct->tsc_val[i]);
	}
	free(direct);
	free(packed);
}

Test(ev, replay_builds_the_same_tree, .timeout = 2.0)
{
	size_t i;

	for (i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++)
		same(scripts[i]);
}

static struct htr_ev last;

static int keep(void *ctx, const struct htr_ev *e)
{
	(void) ctx;
	last = *e;
	return 0;
}

Test(ev, sink_packs_every_field)
{
	struct htr_decode_sink sink;
	struct htr_ev_sink k = { keep, NULL };
	struct htr_decode_gap g = { HTR_GAP_ERROR, -7, 0x1234, 1, 0xabcdef };

	memset(&sink, 0, sizeof(sink));
	htr_ev__sink(&sink, &k);
	cr_assert_eq(sink.ctx, &k);
	cr_assert_eq(sink.run(sink.ctx, 0x1000, 7, HTR_IC_JUMP, 0x1006, 1, 99),
		     0);
	cr_assert_eq(last.type, HTR_EV_RUN);
	cr_assert_eq(last.cls, HTR_IC_JUMP);
	cr_assert_eq(last.n, 7);
	cr_assert_eq(last.a, 0x1000);
	cr_assert_eq(last.b, 0x1006);
	cr_assert_eq(last.timed, 1);
	cr_assert_eq(last.t, 99);
	/* An untimed run carries no time. */
	sink.run(sink.ctx, 0x1000, 1, HTR_IC_OTHER, 0, 0, 99);
	cr_assert_eq(last.timed, 0);
	cr_assert_eq(last.t, 0);
	cr_assert_eq(sink.gap(sink.ctx, &g), 0);
	cr_assert_eq(last.type, HTR_EV_GAP);
	cr_assert_eq(last.kind, HTR_GAP_ERROR);
	cr_assert_eq(last.code, -7);
	cr_assert_eq(last.cls, 1);     /* async */
	cr_assert_eq(last.a, 0x1234);  /* offset */
	cr_assert_eq(last.b, 0xabcdef);
	sink.resume(sink.ctx, 0x4000);
	cr_assert_eq(last.type, HTR_EV_RESUME);
	cr_assert_eq(last.a, 0x4000);
	sink.time(sink.ctx, 555);
	cr_assert_eq(last.type, HTR_EV_TIME);
	cr_assert_eq(last.a, 555);
	sink.sync(sink.ctx, 8192);
	cr_assert_eq(last.type, HTR_EV_SYNC);
	cr_assert_eq(last.a, 8192);
}

Test(ev, apply_n_stops_at_the_first_failure)
{
	struct htr_ev ev[3];

	/* An unknown type fails before the builder is touched. */
	memset(ev, 0, sizeof(ev));
	ev[0].type = 200;
	cr_assert_eq(htr_ev__apply(NULL, &ev[0]), HTR_ERR_INVALID);
	cr_assert_eq(htr_ev__apply_n(NULL, ev, 3), HTR_ERR_INVALID);
	cr_assert_eq(htr_ev__apply_n(NULL, ev, 0), 0);
}

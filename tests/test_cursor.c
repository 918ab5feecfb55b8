/*
 * The instruction cursor against libipt's instruction-flow decoder run
 * once from the start of the trace: at every instruction of small traces
 * of every kind, and after random seeks, the cursor gives the same
 * address, the file's time and the gaps where the file has them.
 */
#include "htr/htr.h"
#include "build_truth.h"
#include "synth.h"
#include "tmpdir.h"

#include <criterion/criterion.h>
#include <intel-pt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

HTR_TEST_TMPDIR(cursor);

/* Every instruction address a plain decode of @trace delivers. */
static uint64_t *plain_decode(const char *trace, const char *elf,
			      uint64_t base, size_t *n)
{
	struct pt_config cfg;
	struct pt_insn_decoder *d;
	struct pt_image *img;
	uint8_t *buf;
	uint64_t *ips = NULL;
	size_t cap = 0;
	long size;
	FILE *fp = fopen(trace, "rb");
	int st;

	cr_assert_not_null(fp);
	fseek(fp, 0, SEEK_END);
	size = ftell(fp);
	rewind(fp);
	buf = malloc((size_t) size);
	cr_assert_eq(fread(buf, 1, (size_t) size, fp), (size_t) size);
	fclose(fp);
	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + size;
	cfg.cpuid_0x15_eax = 1;
	cfg.cpuid_0x15_ebx = 2;
	cfg.mtc_freq = 6;
	cfg.nom_freq = 16;
	d = pt_insn_alloc_decoder(&cfg);
	cr_assert_not_null(d);
	img = pt_insn_get_image(d);
	/* The synthesizer's ELF is one PT_LOAD from offset 0 at its base. */
	fp = fopen(elf, "rb");
	cr_assert_not_null(fp);
	fseek(fp, 0, SEEK_END);
	size = ftell(fp);
	fclose(fp);
	cr_assert_geq(pt_image_add_file(img, elf, 0, (uint64_t) size, NULL,
					base), 0);
	*n = 0;
	for (st = pt_insn_sync_forward(d); st >= 0;
	     st = pt_insn_sync_forward(d)) {
		for (;;) {
			struct pt_insn in;

			while (st >= 0 && (st & pts_event_pending)) {
				struct pt_event ev;

				st = pt_insn_event(d, &ev, sizeof(ev));
			}
			if (st < 0)
				break;
			st = pt_insn_next(d, &in, sizeof(in));
			if (st < 0)
				break;
			if (*n == cap) {
				cap = cap ? cap * 2 : 4096;
				ips = realloc(ips, cap * sizeof(*ips));
				cr_assert_not_null(ips);
			}
			ips[(*n)++] = in.ip;
		}
		if (st == -pte_eos)
			break;
	}
	pt_insn_free_decoder(d);
	free(buf);
	return ips;
}

static void one(enum synth_scenario sc, uint64_t seed)
{
	char prefix[256], path[300], trace[300], elf[300], out[300], err[512];
	struct synth_opts o;
	struct truth t;
	struct htr_file *f = NULL;
	struct htr_cursor *c = NULL;
	struct htr_cursor_opts co;
	struct htr_file_info fi;
	struct htr_insn in;
	uint64_t *ips, id, rng = seed * 0x9e3779b97f4a7c15ull, ngap = 0, i;
	size_t n;

	synth_opts_init(&o);
	o.scenario = sc;
	o.seed = seed;
	o.insns = 4000;
	o.psb_period = 512;     /* many sync points to seek from */
	snprintf(prefix, sizeof(prefix), "%s/%s-%" PRIu64, dir,
		 synth_scenario_name(sc), seed);
	cr_assert_eq(synth_run(&o, prefix, NULL, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(&t, path, err, sizeof(err)), 0, "%s", err);
	snprintf(trace, sizeof(trace), "%s.pt", prefix);
	snprintf(elf, sizeof(elf), "%s.elf", prefix);
	snprintf(out, sizeof(out), "%s.htr", prefix);
	build_with_truth(&t, elf, trace, out, NULL);
	cr_assert_eq(htr_file_open(&f, out, NULL), 0);
	fi.size = sizeof(fi);
	cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
	ips = plain_decode(trace, elf, t.base, &n);
	cr_assert_geq(n, fi.ninsns, "%s: plain decode %zu < %" PRIu64, prefix,
		      n, fi.ninsns);

	htr_cursor_opts_init(&co);
	co.trace = trace;
	cr_assert_eq(htr_cursor_alloc(&c, f, &co), 0, "%s",
		     htr_cursor_last_error(c));
	/* Every instruction in order. */
	for (id = 0; id < fi.ninsns; id++) {
		uint64_t tsc;

		cr_assert_eq(htr_cursor_next(c, &in, sizeof(in)), 0, "%s: %s",
			     prefix, htr_cursor_last_error(c));
		cr_assert_eq(in.id, id);
		cr_assert_eq(in.ip, ips[id], "%s: insn %" PRIu64 " at %#" PRIx64
			     ", libipt %#" PRIx64, prefix, id, in.ip, ips[id]);
		cr_assert_eq(in.has_tsc, htr_tsc_for_insn(f, id, &tsc) == 0);
		if (in.has_tsc)
			cr_assert_eq(in.tsc, tsc);
		if (in.gap)
			ngap++;
	}
	cr_assert_eq(htr_cursor_next(c, &in, sizeof(in)), HTR_ERR_ITEROVER);
	/* Every gap inside the trace is seen, at its ID. */
	for (i = 0; i < fi.ngaps; i++) {
		struct htr_gap_info g;

		g.size = sizeof(g);
		cr_assert_eq(htr_gap_get(f, i, &g, sizeof(g)), 0);
		if (g.id >= fi.ninsns)
			ngap++;          /* at the end: no instruction after */
	}
	cr_assert_eq(ngap, fi.ngaps, "%s: %" PRIu64 " gaps seen of %" PRIu64,
		     prefix, ngap, fi.ngaps);
	/* Random seeks. */
	for (i = 0; i < 200 && fi.ninsns; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		id = (rng >> 11) % fi.ninsns;
		cr_assert_eq(htr_cursor_seek(c, id), 0, "%s: seek %" PRIu64
			     ": %s", prefix, id, htr_cursor_last_error(c));
		cr_assert_eq(htr_cursor_next(c, &in, sizeof(in)), 0);
		cr_assert_eq(in.id, id);
		cr_assert_eq(in.ip, ips[id], "%s: after seek %" PRIu64, prefix,
			     id);
	}
	cr_assert_eq(htr_cursor_seek(c, fi.ninsns), HTR_ERR_RANGE);
	htr_cursor_free(c);
	htr_file_close(f);
	free(ips);
	truth_free(&t);
}

Test(cursor, every_instruction_of_every_scenario, .timeout = 120)
{
	unsigned s;

	for (s = 0; s < SYNTH_NSCENARIOS; s++) {
		/* 32-bit sysenter code needs the ELF's mode; the plain
		 * decode above maps the 64-bit ELF the same way. */
		one((enum synth_scenario) s, 1);
		one((enum synth_scenario) s, 2);
	}
}

Test(cursor, wrong_or_missing_trace)
{
	char prefix[256], trace[300], elf[300], out[300], other[300], err[512];
	struct synth_opts o;
	struct truth t;
	struct htr_file *f = NULL;
	struct htr_cursor *c = NULL;
	struct htr_cursor_opts co;
	char path[300];

	synth_opts_init(&o);
	o.insns = 2000;
	snprintf(prefix, sizeof(prefix), "%s/w", dir);
	cr_assert_eq(synth_run(&o, prefix, NULL, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(&t, path, err, sizeof(err)), 0);
	snprintf(trace, sizeof(trace), "%s.pt", prefix);
	snprintf(elf, sizeof(elf), "%s.elf", prefix);
	snprintf(out, sizeof(out), "%s.htr", prefix);
	build_with_truth(&t, elf, trace, out, NULL);
	cr_assert_eq(htr_file_open(&f, out, NULL), 0);

	htr_cursor_opts_init(&co);
	cr_assert_eq(htr_cursor_alloc(&c, f, &co), HTR_ERR_INVALID);
	cr_assert(strstr(htr_cursor_last_error(c), "no trace"));
	htr_cursor_free(c);
	co.trace = elf;         /* not the trace */
	cr_assert_eq(htr_cursor_alloc(&c, f, &co), HTR_ERR_FORMAT);
	cr_assert(strstr(htr_cursor_last_error(c), elf));
	htr_cursor_free(c);
	snprintf(other, sizeof(other), "%s/none.pt", dir);
	co.trace = other;
	cr_assert_eq(htr_cursor_alloc(&c, f, &co), HTR_ERR_IO);
	htr_cursor_free(c);
	htr_file_close(f);
	truth_free(&t);
}

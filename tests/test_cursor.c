/*
 * The instruction cursor against libipt's instruction-flow decoder run
 * once from the start of the trace: at every instruction of small traces
 * of every kind, and after random seeks, the cursor gives the same
 * address, the file's time and the gaps where the file has them.
 */
#include "htr/htr.h"
#include "build_truth.h"
#include "same_htr.h"
#include "slurp.h"
#include "synth.h"
#include "tmpdir.h"

#include <criterion/criterion.h>
#include <elf.h>
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
	size_t cap = 0, size;
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	FILE *fp;
	int st;

	buf = htr_test_slurp(trace, &size);
	cr_assert_not_null(buf, "%s: unreadable", trace);
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
	/* The synthesizer's ELF is one PT_LOAD from offset 0 at its base
	 * (its errors scenario leaves code out of it: map only that). */
	fp = fopen(elf, "rb");
	cr_assert_not_null(fp);
	cr_assert_eq(fread(&eh, sizeof(eh), 1, fp), 1);
	cr_assert_eq(fseek(fp, (long) eh.e_phoff, SEEK_SET), 0);
	cr_assert_eq(fread(&ph, sizeof(ph), 1, fp), 1);
	size = ph.p_filesz;
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

/*
 * Code that spins where the traced code should be: the build's runaway
 * guard stops decoding and the build goes on at the next PSB.  So
 * must the cursor, walking through the runaway or seeking past it: the
 * instructions after the gap are those libipt's instruction decoder,
 * started at that PSB, delivers.
 */
Test(cursor, goes_on_after_a_runaway, .timeout = 300)
{
	static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
					 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };
	char prefix[256], trace[300], spin[300], spec[340], out[300], err[512];
	struct synth_opts o;
	struct truth t;
	struct htr_build_opts bo;
	struct htr_builder *b = NULL;
	struct htr_file *f = NULL;
	struct htr_cursor *c = NULL;
	struct htr_cursor_opts co;
	struct htr_gap_info g;
	struct htr_insn in;
	struct pt_config cfg;
	struct pt_insn_decoder *d;
	uint64_t want[8], id, i, ng, at = UINT64_MAX, off = 0;
	uint8_t code[16384], *buf;
	size_t n, size;
	FILE *fp;
	int st;

	synth_opts_init(&o);
	o.scenario = SYNTH_MIXED;
	o.seed = 5;
	o.insns = 20000;
	snprintf(prefix, sizeof(prefix), "%s/runaway", dir);
	cr_assert_eq(synth_run(&o, prefix, NULL, err, sizeof(err)), 0, "%s", err);
	snprintf(spin, sizeof(spin), "%s.truth", prefix);
	cr_assert_eq(truth_load(&t, spin, err, sizeof(err)), 0, "%s", err);
	snprintf(trace, sizeof(trace), "%s.pt", prefix);
	snprintf(out, sizeof(out), "%s.htr", prefix);
	/* Where the code should be, nops into a "jmp .": whatever address
	 * the trace names is an instruction, and none consumes trace. */
	memset(code, 0x90, sizeof(code));
	code[sizeof(code) - 2] = 0xeb;
	code[sizeof(code) - 1] = 0xfe;
	snprintf(spin, sizeof(spin), "%s.spin", prefix);
	fp = fopen(spin, "wb");
	cr_assert_not_null(fp);
	cr_assert_eq(fwrite(code, 1, sizeof(code), fp), sizeof(code));
	fclose(fp);
	snprintf(spec, sizeof(spec), "%s@%#" PRIx64, spin, t.base);
	htr_build_opts_init(&bo);
	bo.cpuid_0x15_eax = t.cpuid_eax;
	bo.cpuid_0x15_ebx = t.cpuid_ebx;
	bo.mtc_freq = (uint8_t) t.mtc_freq;
	bo.nom_freq = (uint8_t) t.nom_freq;
	cr_assert_eq(htr_builder_alloc(&b, &bo), 0);
	cr_assert_eq(htr_builder_add_raw(b, spec), 0, "%s",
		     htr_builder_last_error(b));
	cr_assert_eq(htr_builder_run(b, trace, out, NULL, 0), 0, "%s",
		     htr_builder_last_error(b));
	htr_builder_free(b);
	cr_assert_eq(htr_file_open(&f, out, NULL), 0);
	ng = htr_gap_count(f);
	for (i = 0; i < ng && at == UINT64_MAX; i++) {
		g.size = sizeof(g);
		cr_assert_eq(htr_gap_get(f, i, &g, sizeof(g)), 0);
		if (g.kind == HTR_GAP_ERROR && g.code == HTR_GAP_CODE_RUNAWAY) {
			at = g.id;
			off = g.offset;
		}
	}
	cr_assert_neq(at, UINT64_MAX, "the build did not run away");

	/* The first PSB at or past where the runaway was noticed, and the
	 * instructions libipt decodes from there. */
	buf = htr_test_slurp(trace, &size);
	cr_assert_not_null(buf, "%s: unreadable", trace);
	while (off + sizeof(psb) <= (uint64_t) size &&
	       memcmp(buf + off, psb, sizeof(psb)) != 0)
		off++;
	cr_assert_leq(off + sizeof(psb), (uint64_t) size, "no PSB after it");
	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + size;
	cfg.cpuid_0x15_eax = t.cpuid_eax;
	cfg.cpuid_0x15_ebx = t.cpuid_ebx;
	cfg.mtc_freq = (uint8_t) t.mtc_freq;
	cfg.nom_freq = (uint8_t) t.nom_freq;
	d = pt_insn_alloc_decoder(&cfg);
	cr_assert_not_null(d);
	cr_assert_geq(pt_image_add_file(pt_insn_get_image(d), spin, 0,
					sizeof(code), NULL, t.base), 0);
	st = pt_insn_sync_set(d, off);
	for (n = 0; n < 8; n++) {
		struct pt_insn pi;

		while (st >= 0 && (st & pts_event_pending)) {
			struct pt_event ev;

			st = pt_insn_event(d, &ev, sizeof(ev));
		}
		cr_assert_geq(st, 0, "libipt: %s", pt_errstr(pt_errcode(st)));
		st = pt_insn_next(d, &pi, sizeof(pi));
		cr_assert_geq(st, 0, "libipt: %s", pt_errstr(pt_errcode(st)));
		want[n] = pi.ip;
	}
	pt_insn_free_decoder(d);
	free(buf);

	htr_cursor_opts_init(&co);
	co.trace = trace;
	cr_assert_eq(htr_cursor_alloc(&c, f, &co), 0, "%s",
		     htr_cursor_last_error(c));
	/* Seeking to the gap, then walking into it from just before. */
	cr_assert_eq(htr_cursor_seek(c, at), 0, "%s", htr_cursor_last_error(c));
	cr_assert_eq(htr_cursor_next(c, &in, sizeof(in)), 0);
	cr_assert_eq(in.id, at);
	cr_assert_eq(in.ip, want[0], "after seeking to the runaway: %#" PRIx64
		     ", libipt %#" PRIx64, in.ip, want[0]);
	cr_assert_eq(in.gap, HTR_GAP_ERROR);
	cr_assert_eq(htr_cursor_seek(c, at - 2), 0);
	for (id = at - 2; id < at + 8; id++) {
		cr_assert_eq(htr_cursor_next(c, &in, sizeof(in)), 0, "%s",
			     htr_cursor_last_error(c));
		cr_assert_eq(in.id, id);
		if (id >= at)
			cr_assert_eq(in.ip, want[id - at], "insn %" PRIu64
				     " at %#" PRIx64 ", libipt %#" PRIx64, id,
				     in.ip, want[id - at]);
	}
	/* Seeking past it. */
	cr_assert_eq(htr_cursor_seek(c, at + 5), 0, "%s",
		     htr_cursor_last_error(c));
	cr_assert_eq(htr_cursor_next(c, &in, sizeof(in)), 0, "%s",
		     htr_cursor_last_error(c));
	cr_assert_eq(in.id, at + 5);
	cr_assert_eq(in.ip, want[5]);
	htr_cursor_free(c);
	htr_file_close(f);
	truth_free(&t);
}

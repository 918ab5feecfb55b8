/*
 * htr build over Intel's libipt test corpus (../shared/corpus/libipt-ptt):
 * every test Debian's libipt 2.0.5 supports builds to the expected
 * instruction count and decode errors, and its blocks agree with the calls
 * and returns listed in the expected disassembled flow (-insn.out): a
 * block starts right after every call whose callee ran, at the callee's
 * address, and a block ends at every return.
 */
#include "corpus.h"
#include "same_htr.h"

#include "htr/htr.h"

#include "tmpdir.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

HTR_TEST_TMPDIR(corpus);

/* What the expected flow says. */
struct flow {
	uint64_t n;                 /* instructions */
	long errors;
	uint64_t *call_next;        /* IDs right after a call whose callee ran */
	uint64_t *call_entry;       /* ... and the callee's address */
	size_t ncall;
	uint64_t *rets;
	size_t nret;
};

static int read_flow(const char *path, struct flow *fl)
{
	FILE *fp = fopen(path, "r");
	char line[512];
	int after_call = 0;
	size_t cap = 0;

	memset(fl, 0, sizeof(*fl));
	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp)) {
		const char *p = line, *mn;
		uint64_t ip;

		if (!strncmp(line, "[block]", 7))
			continue;           /* ptxed's block marker */
		if (line[0] == '[') {
			if (strstr(line, ": error: "))
				fl->errors++;
			after_call = 0;     /* the callee did not run next */
			continue;
		}
		if (p[0] == '?' && p[1] == ' ')
			p += 2;
		if (strspn(p, "0123456789abcdef") != 16)
			continue;
		ip = strtoull(p, NULL, 16);
		mn = p + 16;
		while (*mn == ' ')
			mn++;
		if (fl->ncall == cap || fl->nret == cap) {
			cap = cap ? cap * 2 : 64;
			fl->call_next = realloc(fl->call_next, cap * 8);
			fl->call_entry = realloc(fl->call_entry, cap * 8);
			fl->rets = realloc(fl->rets, cap * 8);
			cr_assert(fl->call_next && fl->call_entry && fl->rets);
		}
		if (after_call) {
			fl->call_next[fl->ncall] = fl->n;
			fl->call_entry[fl->ncall++] = ip;
		}
		after_call = !strncmp(mn, "call", 4);
		if (!strncmp(mn, "ret", 3) && (mn[3] == ' ' || mn[3] == '\n' ||
					       mn[3] == 0))
			fl->rets[fl->nret++] = fl->n;
		fl->n++;
	}
	fclose(fp);
	return 0;
}

static void flow_free(struct flow *fl)
{
	free(fl->call_next);
	free(fl->call_entry);
	free(fl->rets);
}

/* Build @trace into @out over the raw image @spec (and @extra, ptxed's
 * extra --raw, over it, if not empty).  Returns htr_builder_run()'s. */
static int build_raw(const struct htr_build_opts *bo, const char *spec,
		     const char *extra, const char *trace, const char *out,
		     struct htr_build_stats *st)
{
	struct htr_builder *b = NULL;
	int rc;

	cr_assert_eq(htr_builder_alloc(&b, bo), 0);
	cr_assert_eq(htr_builder_add_raw(b, spec), 0, "%s", spec);
	if (extra[0])
		cr_assert_eq(htr_builder_add_raw(b, extra), 0, "%s: %s", extra,
			     htr_builder_last_error(b));
	rc = htr_builder_run(b, trace, out, st, st ? sizeof(*st) : 0);
	htr_builder_free(b);
	return rc;
}

/* Builds the walk decoded itself (the others fell back). */
static int walked;

/* Build one test; 1 pass, 0 fail (with @why), -1 skip (with @why). */

static int build_one(const char *cdir, struct mrow *m, const char *cpu,
		     const char *insn_out, char *why, size_t wlen)
{
	char path[2200], spec[2300], extra[2300], out[300];
	char *opts = strdup(m->f[5]);
	char *tok, *save;
	struct htr_build_opts bo;
	struct htr_file *f = NULL;
	struct flow fl;
	uint8_t *starts = NULL, *ends = NULL;
	uint64_t *entry_at = NULL;
	uint32_t i, nblocks;
	int res = 1, rc;
	long nerr = 0;

	cr_assert_not_null(opts);
	htr_build_opts_init(&bo);
	if (cpu)
		sscanf(cpu, "%d/%d", &bo.cpu_family, &bo.cpu_model);
	extra[0] = 0;
	for (tok = strtok_r(opts, " ", &save); tok && res == 1;
	     tok = strtok_r(NULL, " ", &save)) {
		char *arg = NULL;

		if (!strcmp(tok, "-") || !strcmp(tok, "--block-decoder") ||
		    !strcmp(tok, "--insn-decoder") || !strncmp(tok, "--event:", 8) ||
		    !strncmp(tok, "--block:", 8))
			continue;       /* how ptxed prints, not what it decodes */
		if (!strcmp(tok, "--quiet") || !strncmp(tok, "--stat", 6)) {
			snprintf(why, wlen, "the expectation lists no "
				 "instructions (ptxed %s)", tok);
			res = -1;
			break;
		}
		if (strncmp(tok, "--", 2) ||
		    !(arg = strtok_r(NULL, " ", &save))) {
			snprintf(why, wlen, "a ptxed option that htr build "
				 "lacks (%s)", tok);
			res = -1;
		} else if (ptxed_filter(tok, arg, bo.filters, &bo.nfilters)) {
			continue;
		} else if (!strcmp(tok, "--raw")) {
			/* ptxed's FILE:OFFSET:VADDR or FILE:VADDR */
			char *c1 = strchr(arg, ':'), *c2;

			cr_assert_not_null(c1);
			*c1 = 0;
			c2 = strchr(c1 + 1, ':');
			if (c2)
				*c2 = 0;
			snprintf(extra, sizeof(extra), "%s/%s/%s%s%s@%s", cdir,
				 m->f[0], arg, c2 ? ":" : "", c2 ? c1 + 1 : "",
				 c2 ? c2 + 1 : c1 + 1);
		} else if (!strcmp(tok, "--mtc-freq")) {
			bo.mtc_freq = (uint8_t) strtoul(arg, NULL, 0);
		} else if (!strcmp(tok, "--nom-freq")) {
			bo.nom_freq = (uint8_t) strtoul(arg, NULL, 0);
		} else if (!strcmp(tok, "--cpuid-0x15.eax")) {
			bo.cpuid_0x15_eax = (uint32_t) strtoul(arg, NULL, 0);
		} else if (!strcmp(tok, "--cpuid-0x15.ebx")) {
			bo.cpuid_0x15_ebx = (uint32_t) strtoul(arg, NULL, 0);
		} else if (strcmp(tok, "--cpu")) {
			snprintf(why, wlen, "a ptxed option that htr build "
				 "lacks (%s)", tok);
			res = -1;
		}
	}
	free(opts);
	if (res < 0)
		return res;
	snprintf(spec, sizeof(spec), "%s/%s@%s", cdir, m->f[2], m->f[3]);
	snprintf(path, sizeof(path), "%s/%s/%s", cdir, m->f[0], insn_out);
	cr_assert_eq(read_flow(path, &fl), 0, "%s", path);
	snprintf(path, sizeof(path), "%s/%s", cdir, m->f[1]);
	snprintf(out, sizeof(out), "%s/%s.htr", dir, m->f[0]);
	rc = build_raw(&bo, spec, extra, path, out, NULL);
	/* With either decoder, on one thread or on three with a chunk
	 * boundary at every PSB, the file must be the same, byte for byte,
	 * as the default's (the walk's, or the block decoder's where the
	 * walk gives up: these tests hold VMX, ptwrite, 16-bit code and
	 * decode errors, so no htr_check_walk_kept() here). */
	for (i = 0; i < 4; i++) {
		struct htr_build_opts po = bo;
		struct htr_build_stats st;
		char out2[sizeof(out) + 4];
		int rc2;

		snprintf(out2, sizeof(out2), "%s.%u", out, i);
		po.decoder = i < 2 ? HTR_DECODER_BLOCK : HTR_DECODER_WALK;
		po.threads = i % 2 ? 3 : 1;
		po.chunk_size = 1;
		memset(&st, 0, sizeof(st));
		rc2 = build_raw(&po, spec, extra, path, out2, &st);
		walked += i == 2 && rc2 == 0 && st.decoder == HTR_DECODER_WALK;
		cr_assert_eq(rc2, rc, "%s: decoder %d -j%u: %d, default -j1: "
			     "%d", path, po.decoder, po.threads, rc2, rc);
		cr_assert(rc < 0 || htr_files_same(out, out2), "%s: decoder "
			  "%d -j%u built another file than the default -j1",
			  path, po.decoder, po.threads);
		unlink(out2);
	}
	if (rc == HTR_ERR_DECODE && fl.n == 0) {
		flow_free(&fl);
		return 1;           /* no PSB: nothing expected either */
	}
	if (rc < 0) {
		snprintf(why, wlen, "build failed: %s", htr_errstr(rc));
		flow_free(&fl);
		return 0;
	}
	cr_assert_eq(htr_file_open(&f, out, NULL), 0);
	{
		struct htr_file_info fi;

		fi.size = sizeof(fi);
		cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
		if (fi.ninsns != fl.n) {
			snprintf(why, wlen, "%" PRIu64 " insns, expected %" PRIu64,
				 fi.ninsns, fl.n);
			res = 0;
		}
	}
	for (i = 0; i < htr_gap_count(f); i++) {
		struct htr_gap_info g;

		g.size = sizeof(g);
		cr_assert_eq(htr_gap_get(f, i, &g, sizeof(g)), 0);
		nerr += g.kind == HTR_GAP_ERROR;
	}
	if (res && nerr != fl.errors) {
		snprintf(why, wlen, "%ld error gaps, expected %ld", nerr,
			 fl.errors);
		res = 0;
	}
	nblocks = htr_block_count(f);
	starts = calloc(fl.n + 1, 1);
	ends = calloc(fl.n + 1, 1);
	entry_at = calloc(fl.n + 1, sizeof(*entry_at));
	cr_assert(starts && ends && entry_at);
	for (i = 0; i < nblocks; i++) {
		struct htr_block_info bi;

		bi.size = sizeof(bi);
		cr_assert_eq(htr_block_get(f, i, &bi, sizeof(bi)), 0);
		cr_assert_leq(bi.last, fl.n);
		if (!(bi.flags & HTR_BLOCK_LATE)) {
			starts[bi.first] = 1;
			entry_at[bi.first] = bi.entry;
		}
		ends[bi.last] = 1;
	}
	for (i = 0; res && i < fl.ncall; i++)
		if (!starts[fl.call_next[i]] ||
		    entry_at[fl.call_next[i]] != fl.call_entry[i]) {
			snprintf(why, wlen, "no block for the call before "
				 "instruction %" PRIu64, fl.call_next[i]);
			res = 0;
		}
	for (i = 0; res && i < fl.nret; i++)
		if (!ends[fl.rets[i]]) {
			snprintf(why, wlen, "no block ends at the return %"
				 PRIu64, fl.rets[i]);
			res = 0;
		}
	free(starts);
	free(ends);
	free(entry_at);
	flow_free(&fl);
	htr_file_close(f);
	return res;
}

Test(corpus, build, .timeout = 300)
{
	char cbuf[1024], path[1100], line[8192], why[512];
	const char *cdir = corpus_dir(cbuf, sizeof(cbuf));
	struct mcols mc = { -1, -1 };
	int built = 0, failed = 0, skipped = 0;
	struct skips sk;
	FILE *fp;

	memset(&sk, 0, sizeof(sk));
	if (!cdir) {
		cr_skip_test("../shared/corpus is absent");
	}
	snprintf(path, sizeof(path), "%s/manifest.tsv", cdir);
	fp = fopen(path, "r");
	cr_assert_not_null(fp);
	while (fgets(line, sizeof(line), fp)) {
		struct mrow m;
		char files[4096], *fn, *save;

		if (!manifest_row(line, &m, &mc)) {
			cr_assert(mc.v205 >= 0 && mc.files >= 0);
			continue;
		}
		if (!in_v205(&m, &mc)) {
			skipped++;
			skips_add(&sk, "test is newer than libipt 2.0.5");
			continue;
		}
		snprintf(files, sizeof(files), "%s", m.f[mc.files]);
		for (fn = strtok_r(files, ",", &save); fn;
		     fn = strtok_r(NULL, ",", &save)) {
			char cpu[32] = "", insn_out[512], *c = strstr(fn, "-ptxed");
			int res, fam, mod;

			/* NAME-ptxed[-cpu_F_M].exp has NAME-ptxed[...]-insn.out */
			if (!c || strcmp(fn + strlen(fn) - 4, ".exp"))
				continue;
			snprintf(insn_out, sizeof(insn_out), "%.*s-insn.out",
				 (int) (strlen(fn) - 4), fn);
			if (sscanf(c, "-ptxed-cpu_%d_%d", &fam, &mod) == 2) {
				snprintf(cpu, sizeof(cpu), "%d/%d", fam, mod);
				/* Expectations for CPUs whose errata 2.0.5
				 * does not know come from a newer libipt. */
				if (strcmp(m.f[4], "-") && !has_errata(cpu) &&
				    has_errata(m.f[4]))
					continue;
			} else if (strcmp(c, "-ptxed.exp")) {
				continue;
			}
			why[0] = 0;
			res = build_one(cdir, &m, cpu[0] ? cpu : NULL, insn_out,
					why, sizeof(why));
			if (res < 0) {
				skipped++;
				skips_add(&sk, why);
				fprintf(stderr, "corpus: skip %s: %s\n", m.f[0], why);
			} else if (!res) {
				failed++;
				fprintf(stderr, "corpus: FAIL %s (%s): %s\n", m.f[0],
					cpu[0] ? cpu : "no cpu", why);
			} else {
				built++;
			}
		}
	}
	fclose(fp);
	fprintf(stderr, "corpus: %d builds agree with the expected flow, %d "
		"failed, %d skipped; the walk decoded %d itself\n", built,
		failed, skipped, walked);
	skips_print(&sk, "corpus");
	cr_assert_gt(built, 100);
	cr_assert_eq(failed, 0);
}

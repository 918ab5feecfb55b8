/*
 * The tree rules on hand-made traces: each case is a few bytes of code and
 * the packets a processor emits for one execution of it, with the tree the
 * README's "Tree rules" give, worked out by hand from the code (the
 * comments walk through it).  These are the patterns real user-only and
 * filtered traces are full of and that went wrong before: calls and
 * syscalls into untraced code, overflows without an IP, sysenter, frames
 * abandoned by a longjmp, callbacks from untraced code, gaps under a late
 * start.
 */
#include "htr/htr.h"
#include "same_htr.h"
#include "tmpdir.h"

#include <criterion/criterion.h>
#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

HTR_TEST_TMPDIR(rules);

#define MAXPKT 64

struct trace {
	struct pt_packet pkt[MAXPKT];
	int n;
};

static struct pt_packet *add(struct trace *t, enum pt_packet_type type)
{
	struct pt_packet *p;

	cr_assert_lt(t->n, MAXPKT);
	p = &t->pkt[t->n++];
	memset(p, 0, sizeof(*p));
	p->type = type;
	return p;
}

/* PSB+ announcing @bits-bit code (64 or 32). */
static void start(struct trace *t, int bits)
{
	struct pt_packet *p;

	add(t, ppt_psb);
	p = add(t, ppt_mode);
	p->payload.mode.leaf = pt_mol_exec;
	p->payload.mode.bits.exec.csl = bits == 64;
	p->payload.mode.bits.exec.csd = bits == 32;
	add(t, ppt_psbend);
}

/* TIP, TIP.PGE, TIP.PGD or FUP to @ip; 0 suppresses the IP. */
static void ip(struct trace *t, enum pt_packet_type type, uint64_t to)
{
	struct pt_packet *p = add(t, type);

	p->payload.ip.ipc = to ? pt_ipc_sext_48 : pt_ipc_suppressed;
	p->payload.ip.ip = to;
}

struct blk {
	uint64_t first, last, entry;
	uint32_t parent, flags, func;
};

struct tree {
	struct blk b[32];
	uint32_t n;
	uint64_t ninsns, ngaps;
	uint32_t depth;
};

/* The tree goes to stderr, for the test log when an assertion fails. */
static void show(const struct tree *t)
{
	uint32_t i;

	fprintf(stderr, "%llu insns, %llu gaps, %u blocks:\n",
		(unsigned long long) t->ninsns, (unsigned long long) t->ngaps,
		t->n);
	for (i = 0; i < t->n; i++)
		fprintf(stderr, "  %u: %llu..%llu entry 0x%llx parent %d "
			"flags 0x%x\n", i, (unsigned long long) t->b[i].first,
			(unsigned long long) t->b[i].last,
			(unsigned long long) t->b[i].entry, (int) t->b[i].parent,
			t->b[i].flags);
}

/* Write @code as DIR/code.bin and @t as DIR/trace.pt, after a @hole of
 * bytes without a PSB (a sparse file). */
static void write_case(const uint8_t *code, size_t size, const struct trace *t,
		       off_t hole)
{
	char path[256];
	uint8_t buf[4096];
	struct pt_encoder *enc;
	struct pt_config cfg;
	uint64_t len = 0;
	FILE *fp;
	int k;

	snprintf(path, sizeof(path), "%s/code.bin", dir);
	fp = fopen(path, "wb");
	cr_assert_not_null(fp);
	cr_assert_eq(fwrite(code, 1, size, fp), size);
	fclose(fp);
	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + sizeof(buf);
	enc = pt_alloc_encoder(&cfg);
	cr_assert_not_null(enc);
	for (k = 0; k < t->n; k++)
		cr_assert_geq(pt_enc_next(enc, &t->pkt[k]), 0, "packet %d", k);
	cr_assert_geq(pt_enc_get_offset(enc, &len), 0);
	pt_free_encoder(enc);
	snprintf(path, sizeof(path), "%s/trace.pt", dir);
	fp = fopen(path, "wb");
	cr_assert_not_null(fp);
	cr_assert_eq(fseeko(fp, hole, SEEK_SET), 0);
	cr_assert_eq(fwrite(buf, 1, len, fp), len);
	fclose(fp);
}

/* Build DIR/trace.pt over DIR/code.bin at @base into DIR/trace.htr;
 * asserts success. */
static void run_case(uint64_t base, const struct htr_build_opts *opts,
		     struct htr_build_stats *st)
{
	char img[256], pt[256], htr[256], spec[300];
	struct htr_builder *b;

	snprintf(img, sizeof(img), "%s/code.bin", dir);
	snprintf(pt, sizeof(pt), "%s/trace.pt", dir);
	snprintf(htr, sizeof(htr), "%s/trace.htr", dir);
	snprintf(spec, sizeof(spec), "%s@0x%llx", img, (unsigned long long) base);
	cr_assert_eq(htr_builder_alloc(&b, opts), 0);
	cr_assert_eq(htr_builder_add_raw(b, spec), 0);
	if (st)
		memset(st, 0, sizeof(*st));
	cr_assert_eq(htr_builder_run(b, pt, htr, st, st ? sizeof(*st) : 0), 0,
		     "%s", htr_builder_last_error(b));
	htr_builder_free(b);
	htr_check_parallel(opts, NULL, spec, pt, htr);
}

/* Build @code at @base under @t, read the tree back. */
static void build(const uint8_t *code, size_t size, uint64_t base,
		  const struct trace *t, struct tree *out)
{
	char htr[256];
	struct htr_file *f;
	struct htr_file_info fi;
	uint32_t i;

	write_case(code, size, t, 0);
	run_case(base, NULL, NULL);
	snprintf(htr, sizeof(htr), "%s/trace.htr", dir);
	cr_assert_eq(htr_file_open(&f, htr, NULL), 0, "%s", htr_file_last_error(f));
	fi.size = sizeof(fi);
	cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
	memset(out, 0, sizeof(*out));
	out->n = htr_block_count(f);
	out->ninsns = fi.ninsns;
	out->ngaps = fi.ngaps;
	out->depth = fi.max_depth;
	cr_assert_leq(out->n, 32);
	for (i = 0; i < out->n; i++) {
		struct htr_block_info bi;

		bi.size = sizeof(bi);
		cr_assert_eq(htr_block_get(f, i, &bi, sizeof(bi)), 0);
		out->b[i] = (struct blk) { bi.first, bi.last, bi.entry,
					   bi.parent, bi.flags, bi.func };
	}
	htr_file_close(f);
	show(out);
}

/* The block entered at @entry (asserts there is exactly one). */
static const struct blk *at_entry(const struct tree *t, uint64_t entry)
{
	const struct blk *found = NULL;
	uint32_t i;

	for (i = 0; i < t->n; i++)
		if (t->b[i].func != HTR_NONE && t->b[i].entry == entry) {
			cr_assert_null(found, "two blocks entered at 0x%llx",
				       (unsigned long long) entry);
			found = &t->b[i];
		}
	cr_assert_not_null(found, "no block entered at 0x%llx",
			   (unsigned long long) entry);
	return found;
}

/*
 * 0x1000 call *%rax       -> untraced (TIP.PGD 0x9000), back at 0x1002
 * 0x1002 call 0x1010
 * 0x1007 call *%rax       -> untraced again, back at 0x1009
 * 0x1009 ret              -> leaves (TIP.PGD, IP suppressed)
 * 0x1010 ret              -> 0x1007 (TIP)
 * IDs: 0 call*, 1 call, 2 ret@0x1010, 3 call*, 4 ret@0x1009.  The two
 * untraced callees ran nothing traced: no blocks.  The ret at 0x1009 has
 * no open frame: a late root adopts the one real block.
 */
Test(rules, untraced_indirect_calls)
{
	static const uint8_t code[] = {
		0xff, 0xd0,                     /* 0x1000 call *%rax */
		0xe8, 0x09, 0, 0, 0,            /* 0x1002 call 0x1010 */
		0xff, 0xd0,                     /* 0x1007 call *%rax */
		0xc3,                           /* 0x1009 ret */
		0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
		0xc3,                           /* 0x1010 ret */
	};
	struct trace t = { .n = 0 };
	struct tree r;
	const struct blk *callee;

	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip_pgd, 0x9000);
	ip(&t, ppt_tip_pge, 0x1002);
	ip(&t, ppt_tip, 0x1007);
	ip(&t, ppt_tip_pgd, 0x9000);
	ip(&t, ppt_tip_pge, 0x1009);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ngaps, 2, "both untraced calls lose instructions");
	cr_assert_eq(r.n, 2, "blocks: %u", r.n);
	cr_assert_eq(r.depth, 2);
	callee = at_entry(&r, 0x1010);
	cr_assert_eq(callee->first, 2);
	cr_assert_eq(callee->last, 2);
	cr_assert_eq(callee->flags, 0);
	cr_assert_eq(r.b[1].flags & HTR_BLOCK_LATE, HTR_BLOCK_LATE);
	cr_assert_eq(r.b[1].first, 0);
}

/* The same with syscalls (user-only tracing: TIP.PGD without an IP). */
static const uint8_t syscall_code[] = {
	0x0f, 0x05,                     /* 0x1000 syscall */
	0xe8, 0x09, 0, 0, 0,            /* 0x1002 call 0x1010 */
	0x0f, 0x05,                     /* 0x1007 syscall */
	0xc3,                           /* 0x1009 ret */
	0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	0xc3,                           /* 0x1010 ret */
};

Test(rules, syscalls_user_only)
{
	struct trace t = { .n = 0 };
	struct tree r;
	const struct blk *callee;

	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1002);
	ip(&t, ppt_tip, 0x1007);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1009);
	ip(&t, ppt_tip_pgd, 0);
	build(syscall_code, sizeof(syscall_code), 0x1000, &t, &r);

	cr_assert_eq(r.ngaps, 2);
	cr_assert_eq(r.n, 2, "blocks: %u", r.n);
	cr_assert_eq(r.depth, 2);
	callee = at_entry(&r, 0x1010);
	cr_assert_eq(callee->first, 2);
	cr_assert_eq(callee->last, 2);
}

/* The same with three PSB+ while the first syscall runs (tracing off: no
 * FUP in them).  A parallel build cut at any of them (run_case checks one
 * cut at each) must still see both gaps: a chunk's decoder that starts at
 * one of them does not know that tracing was off. */
Test(rules, syscall_spans_psbs)
{
	struct trace t = { .n = 0 };
	struct tree r;

	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip_pgd, 0);
	start(&t, 64);
	start(&t, 64);
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1002);
	ip(&t, ppt_tip, 0x1007);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1009);
	ip(&t, ppt_tip_pgd, 0);
	build(syscall_code, sizeof(syscall_code), 0x1000, &t, &r);

	cr_assert_eq(r.ngaps, 2);
	cr_assert_eq(r.n, 2, "blocks: %u", r.n);
	cr_assert_eq(at_entry(&r, 0x1010)->first, 2);
}

/*
 * 0x1000 call 0x1010; 0x1010 jmp *%rax -> 0x1012 (TIP); then the buffer
 * overflows and resolves while tracing is off (OVF, no FUP): TIP.PGE at
 * 0x1005, the call's return address.  The callee returned unseen: it ends
 * before the overflow (implicit return).  0x1005 ret -> 0x1030 (TIP) has
 * no open frame (late start); 0x1030 nop; 0x1031 jmp *%rax leaves
 * (TIP.PGD).  libipt reports the overflow at the TIP's target, so nothing
 * after 0x1012 is delivered before it.
 * IDs: 0 call, 1 jmp, [overflow], 2 ret, 3 nop, 4 jmp.
 */
Test(rules, overflow_without_ip)
{
	uint8_t code[0x40];
	struct trace t = { .n = 0 };
	struct tree r;
	const struct blk *callee;
	uint32_t i;

	memset(code, 0x90, sizeof(code));
	memcpy(code + 0x00, "\xe8\x0b\x00\x00\x00", 5);    /* call 0x1010 */
	code[0x05] = 0xc3;                                 /* ret */
	memcpy(code + 0x10, "\xff\xe0", 2);                /* jmp *%rax */
	memcpy(code + 0x13, "\xff\xe0", 2);                /* jmp *%rax */
	memcpy(code + 0x31, "\xff\xe0", 2);                /* jmp *%rax */
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip, 0x1012);
	add(&t, ppt_ovf);
	ip(&t, ppt_tip_pge, 0x1005);
	ip(&t, ppt_tip, 0x1030);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 5);
	cr_assert_eq(r.ngaps, 1);
	callee = at_entry(&r, 0x1010);
	cr_assert_eq(callee->first, 1);
	cr_assert_eq(callee->last, 1, "the callee swallowed the caller's ret");
	/* It ends before the gap, but it was open when the gap began: some
	 * of its execution is missing. */
	cr_assert_eq(callee->flags, HTR_BLOCK_IMPLICIT | HTR_BLOCK_GAP);
	/* The late block that the ret closes spans the gap too. */
	for (i = 0; i < r.n; i++)
		if (r.b[i].last == 2 && r.b[i].first == 0) {
			cr_assert_eq(r.b[i].flags, HTR_BLOCK_LATE | HTR_BLOCK_GAP);
			return;
		}
	cr_assert_fail("no block ends at the ret");
}

/*
 * A gap, then a return with no open frame: the late block that adopts
 * what ran before carries the gap.  0x1000 nop; FUP 0x1001 + TIP.PGD (an
 * interrupt; tracing stops); TIP.PGE 0x1002 (elsewhere: instructions were
 * lost); 0x1002 ret -> 0x1010 (TIP); 0x1010 jmp *%rax leaves.
 * IDs: 0 nop, [gap], 1 ret, 2 jmp.
 */
Test(rules, late_start_keeps_gap)
{
	uint8_t code[0x20];
	struct trace t = { .n = 0 };
	struct tree r;
	uint32_t i, late = 0;

	memset(code, 0x90, sizeof(code));
	code[0x02] = 0xc3;
	memcpy(code + 0x10, "\xff\xe0", 2);
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_fup, 0x1001);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1002);
	ip(&t, ppt_tip, 0x1010);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 3);
	cr_assert_eq(r.ngaps, 1);
	for (i = 0; i < r.n; i++)
		if (r.b[i].flags & HTR_BLOCK_LATE) {
			late++;
			cr_assert(r.b[i].flags & HTR_BLOCK_GAP,
				  "late block %u lost the gap flag", i);
		}
	cr_assert_eq(late, 2);
}

/*
 * An asynchronous disable that resumes at the very IP where it stopped
 * (an interrupt handled in the untraced kernel) loses nothing: no gap.
 */
Test(rules, interrupt_resumed_in_place)
{
	uint8_t code[0x20];
	struct trace t = { .n = 0 };
	struct tree r;

	memset(code, 0x90, sizeof(code));
	memcpy(code + 0x04, "\xff\xe0", 2);
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_fup, 0x1002);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1002);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 5);
	cr_assert_eq(r.ngaps, 0);
}

/*
 * 0x1000 call 0x1010; 0x1010 nop; 0x1011 ret -> 0x1005 (TIP); 0x1005 ret
 * leaves (TIP.PGD).  The thread is preempted between the call and the
 * callee's first instruction (FUP 0x1010, TIP.PGD) and runs again there
 * at TSC 5000 (TIP.PGE 0x1010): nothing is lost, and the callee starts
 * at 5000, not at the call's 1000 (the time off the CPU is the caller's,
 * README "What the ticks mean"; perf dates the nop 5000 too).
 */
Test(rules, preempted_before_callee)
{
	static const uint8_t code[0x20] = {
		[0x00] = 0xe8, 0x0b, 0, 0, 0, 0xc3,
		[0x10] = 0x90, 0xc3,
	};
	struct trace t = { .n = 0 };
	struct tree r;
	struct htr_file *f;
	char path[256];
	uint64_t tsc = 0;

	add(&t, ppt_psb);
	add(&t, ppt_tsc)->payload.tsc.tsc = 1000;
	add(&t, ppt_mode)->payload.mode.bits.exec.csl = 1;
	add(&t, ppt_psbend);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_fup, 0x1010);
	ip(&t, ppt_tip_pgd, 0);
	add(&t, ppt_tsc)->payload.tsc.tsc = 5000;
	ip(&t, ppt_tip_pge, 0x1010);
	ip(&t, ppt_tip, 0x1005);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 4);
	cr_assert_eq(r.ngaps, 0);
	cr_assert_eq(at_entry(&r, 0x1010)->first, 1);
	snprintf(path, sizeof(path), "%s/trace.htr", dir);
	cr_assert_eq(htr_file_open(&f, path, NULL), 0);
	cr_assert_eq(htr_tsc_for_insn(f, 1, &tsc), 0);
	cr_assert_eq(tsc, 5000, "the callee starts at %llu",
		     (unsigned long long) tsc);
	htr_file_close(f);
}

/*
 * 32-bit code: 0x1000 call 0x1010; 0x1010 sysenter (tracing stops, IP
 * suppressed); the kernel returns to the fixed landing address 0x1020, not
 * after the sysenter: TIP.PGE 0x1020.  The sysenter's frame closes there;
 * 0x1020 nop; 0x1021 ret -> 0x1005 (TIP) closes the callee; 0x1005 ret
 * leaves (TIP.PGD).  IDs: 0 call, 1 sysenter, [gap], 2 nop, 3 ret, 4 ret.
 */
Test(rules, sysenter_lands_elsewhere)
{
	uint8_t code[0x30];
	struct trace t = { .n = 0 };
	struct tree r;
	const struct blk *callee;

	memset(code, 0x90, sizeof(code));
	memcpy(code + 0x00, "\xe8\x0b\x00\x00\x00", 5);    /* call 0x1010 */
	code[0x05] = 0xc3;
	memcpy(code + 0x10, "\x0f\x34", 2);                /* sysenter */
	code[0x21] = 0xc3;
	start(&t, 32);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1020);
	ip(&t, ppt_tip, 0x1005);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 5);
	cr_assert_eq(r.ngaps, 1);
	callee = at_entry(&r, 0x1010);
	cr_assert_eq(callee->first, 1);
	cr_assert_eq(callee->last, 3, "callee ends at %llu",
		     (unsigned long long) callee->last);
	cr_assert_eq(callee->flags, HTR_BLOCK_GAP);
}

/*
 * longjmp: 0x1000 call f; f: 0x1010 call g; g: 0x1020 call h;
 * h: 0x1030 jmp *%rax -> 0x1015 (TIP), f's code after its call to g:
 * the return address of g's frame.  Rule 3a, also without symbols: the
 * jump left g and h (f goes on right after its call to g), which close
 * unwound at the jump.  0x1015 ret -> 0x1005 (TIP), f's return address:
 * f closes.  0x1005 nop; 0x1006 jmp *%rax leaves.
 * IDs: 0 call f, 1 call g, 2 call h, 3 jmp, 4 ret, 5 nop, 6 jmp.
 */
Test(rules, longjmp_unwinds)
{
	uint8_t code[0x40];
	struct trace t = { .n = 0 };
	struct tree r;
	const struct blk *f, *g, *h;

	memset(code, 0x90, sizeof(code));
	memcpy(code + 0x00, "\xe8\x0b\x00\x00\x00", 5);    /* call 0x1010 */
	memcpy(code + 0x06, "\xff\xe0", 2);
	memcpy(code + 0x10, "\xe8\x0b\x00\x00\x00", 5);    /* call 0x1020 */
	code[0x15] = 0xc3;
	memcpy(code + 0x20, "\xe8\x0b\x00\x00\x00", 5);    /* call 0x1030 */
	code[0x25] = 0xc3;
	memcpy(code + 0x30, "\xff\xe0", 2);
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip, 0x1015);
	ip(&t, ppt_tip, 0x1005);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 7);
	f = at_entry(&r, 0x1010);
	g = at_entry(&r, 0x1020);
	h = at_entry(&r, 0x1030);
	cr_assert_eq(h->first, 3);
	cr_assert_eq(h->last, 3);
	cr_assert_eq(h->flags, HTR_BLOCK_UNWOUND);
	cr_assert_eq(g->last, 3);
	cr_assert_eq(g->flags, HTR_BLOCK_UNWOUND, "g: flags %#x: the jump "
		     "left it", g->flags);
	cr_assert_eq(f->first, 1);
	cr_assert_eq(f->last, 4);
	cr_assert_eq(f->flags, 0);
	cr_assert_eq(r.depth, 4);
}

/*
 * Callbacks from untraced code: 0x1000 call 0x2000 (untraced: TIP.PGD
 * names it); it calls back 0x1100 twice (TIP.PGE there; 0x1100 nop;
 * 0x1101 ret leaves again); it returns to 0x1005 (TIP.PGE); 0x1005 nop;
 * 0x1006 jmp *%rax leaves.  IDs: 0 call, 1 nop, 2 ret, 3 nop, 4 ret,
 * 5 nop, 6 jmp.  The untraced callee is a block (entry 0x2000) holding
 * both callbacks.
 */
Test(rules, callbacks_from_untraced_code)
{
	uint8_t code[0x110];
	struct trace t = { .n = 0 };
	struct tree r;
	const struct blk *q;
	uint32_t i, ncb = 0;

	memset(code, 0x90, sizeof(code));
	memcpy(code + 0x00, "\xe8\xfb\x0f\x00\x00", 5);    /* call 0x2000 */
	memcpy(code + 0x06, "\xff\xe0", 2);
	code[0x101] = 0xc3;
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip_pgd, 0x2000);
	ip(&t, ppt_tip_pge, 0x1100);
	ip(&t, ppt_tip_pgd, 0x2040);
	ip(&t, ppt_tip_pge, 0x1100);
	ip(&t, ppt_tip_pgd, 0x2040);
	ip(&t, ppt_tip_pge, 0x1005);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 7);
	cr_assert_eq(r.ngaps, 3);
	q = at_entry(&r, 0x2000);
	cr_assert_eq(q->first, 1);
	cr_assert_eq(q->last, 4);
	cr_assert_eq(q->flags, HTR_BLOCK_IMPLICIT | HTR_BLOCK_GAP);
	for (i = 0; i < r.n; i++)
		if (r.b[i].func != HTR_NONE && r.b[i].entry == 0x1100) {
			cr_assert_eq(&r.b[r.b[i].parent], q);
			cr_assert_eq(r.b[i].last, r.b[i].first + 1);
			ncb++;
		}
	cr_assert_eq(ncb, 2);
}

/* A trace that enters the image at 0x1000 and stops there: an unread TNT
 * keeps libipt from calling this the trace's end (it would hold the
 * blocks as the trace's tail, bounded separately). */
static void enter_at_0x1000(struct trace *t)
{
	struct pt_packet *tnt;

	start(t, 64);
	ip(t, ppt_tip_pge, 0x1000);
	tnt = add(t, ppt_tnt_8);
	tnt->payload.tnt.bit_size = 1;
	tnt->payload.tnt.payload = 1;
}

/* The build's one gap is a runaway. */
static void assert_one_runaway(void)
{
	char htr[256];
	struct htr_file *f;
	struct htr_gap_info g;

	snprintf(htr, sizeof(htr), "%s/trace.htr", dir);
	cr_assert_eq(htr_file_open(&f, htr, NULL), 0);
	cr_assert_eq(htr_gap_count(f), 1);
	g.size = sizeof(g);
	cr_assert_eq(htr_gap_get(f, 0, &g, sizeof(g)), 0);
	cr_assert_eq(g.kind, HTR_GAP_ERROR);
	cr_assert_eq(g.code, HTR_GAP_CODE_RUNAWAY);
	cr_assert_str_eq(htr_gap_reason(&g), "runaway: no trace consumed round "
			 "a loop or for 2^22 instructions (the image does not "
			 "match the recording)");
	htr_file_close(f);
}

/*
 * An image that does not match the trace: 0x1000 calls itself, so libipt
 * would follow direct calls for ever without consuming a byte of trace.
 * The loop guard sees the decoder come back to 0x1000 at one trace
 * offset and makes it an error gap after a few dozen calls, not 2^22.
 */
Test(rules, runaway_loop_is_short)
{
	static const uint8_t code[] = { 0xe8, 0xfb, 0xff, 0xff, 0xff };
	struct trace t = { .n = 0 };
	struct htr_build_stats st;

	enter_at_0x1000(&t);
	write_case(code, sizeof(code), &t, 0);
	run_case(0x1000, NULL, &st);
	cr_assert_gt(st.insns, 64u);
	cr_assert_lt(st.insns, 1024u);
	cr_assert_eq(st.folded, 0);
	assert_one_runaway();
}

/*
 * A loop too long for the loop guard to watch: 2^18 + 16 calls, each over
 * an int3 to the next call (a call to the next instruction would not be
 * one to return from), and a jump back to the first.  The runaway guard
 * stops it after 2^22 to 2^23 instructions; the call stack stops growing
 * at its limit on the way and the build says how many calls it folded.
 */
Test(rules, runaway_is_bounded, .timeout = 120)
{
	const size_t ncall = (1u << 18) + 16, size = ncall * 6 + 5;
	struct trace t = { .n = 0 };
	struct htr_build_stats st;
	uint8_t *code = malloc(size);
	int32_t back = -(int32_t) size;
	size_t i;

	cr_assert_not_null(code);
	for (i = 0; i < ncall; i++)
		memcpy(code + i * 6, "\xe8\1\0\0\0\xcc", 6);
	code[ncall * 6] = 0xe9;
	memcpy(code + ncall * 6 + 1, &back, 4);
	enter_at_0x1000(&t);
	write_case(code, size, &t, 0);
	free(code);
	run_case(0x1000, NULL, &st);
	cr_assert_geq(st.insns, 1u << 22);
	cr_assert_leq(st.insns, 1u << 23);
	/* All but the open frames' calls and the jumps back. */
	cr_assert_geq(st.folded, st.insns - (1u << 18) - st.insns / ncall - 1);
	assert_one_runaway();
}

static int count_progress(const struct htr_build_progress *p, void *payload)
{
	uint64_t *last = payload;

	cr_assert_gt(p->offset, last[1], "progress went backwards");
	last[0]++;
	last[1] = p->offset;
	return 0;
}

/*
 * 200 MiB with no PSB (a hole in a sparse file) before the trace: the
 * search for the first PSB reports progress as it goes, where libipt's
 * own search would sit silent until it is done.
 */
Test(rules, progress_while_searching)
{
	uint8_t code[0x10];
	struct trace t = { .n = 0 };
	struct htr_build_opts opts;
	struct htr_build_stats st;
	uint64_t seen[2] = { 0, 0 };

	memset(code, 0x90, sizeof(code));
	memcpy(code + 4, "\xff\xe0", 2);
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip_pgd, 0);
	write_case(code, sizeof(code), &t, 200 << 20);
	htr_build_opts_init(&opts);
	opts.progress = count_progress;
	opts.payload = seen;
	run_case(0x1000, &opts, &st);
	cr_assert_eq(st.insns, 5);
	cr_assert_geq(seen[0], 3, "%llu progress reports",
		      (unsigned long long) seen[0]);
}

/*
 * A callback that leaves by a tail jump (a qsort comparator ending in
 * jmp strcmp@plt) returns through untraced code: the next callback is its
 * sibling.  0x1000 call 0x2000 (untraced); callback 0x1100: nop; jmp
 * 0x1120; 0x1120 jmp *%rax leaves (TIP.PGD 0x3000); again; then back at
 * 0x1005: nop; jmp *%rax leaves.  IDs: 0 call, 1 nop, 2 jmp, 3 jmp*,
 * 4 nop, 5 jmp, 6 jmp*, 7 nop, 8 jmp*.
 */
Test(rules, callback_tail_jump)
{
	uint8_t code[0x130];
	struct trace t = { .n = 0 };
	struct tree r;
	const struct blk *q;
	uint32_t i, ncb = 0;

	memset(code, 0x90, sizeof(code));
	memcpy(code + 0x00, "\xe8\xfb\x0f\x00\x00", 5);    /* call 0x2000 */
	memcpy(code + 0x06, "\xff\xe0", 2);
	memcpy(code + 0x101, "\xeb\x1d", 2);               /* jmp 0x1120 */
	memcpy(code + 0x120, "\xff\xe0", 2);
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip_pgd, 0x2000);
	ip(&t, ppt_tip_pge, 0x1100);
	ip(&t, ppt_tip_pgd, 0x3000);
	ip(&t, ppt_tip_pge, 0x1100);
	ip(&t, ppt_tip_pgd, 0x3000);
	ip(&t, ppt_tip_pge, 0x1005);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 9);
	q = at_entry(&r, 0x2000);
	cr_assert_eq(q->first, 1);
	cr_assert_eq(q->last, 6);
	for (i = 0; i < r.n; i++)
		if (r.b[i].func != HTR_NONE && r.b[i].entry == 0x1100) {
			cr_assert_eq(&r.b[r.b[i].parent], q, "callback %u is "
				     "not the library call's child", i);
			cr_assert_eq(r.b[i].last, r.b[i].first + 2);
			/* open when its tail jump left the traced code */
			cr_assert_eq(r.b[i].flags, HTR_BLOCK_IMPLICIT |
				     HTR_BLOCK_GAP);
			ncb++;
		}
	cr_assert_eq(ncb, 2);
}

/*
 * A signal delivered at a syscall in a user-only trace.  The handler
 * (0x1020) ran once before, called directly, so its entry is known (with
 * ELF symbols it always is).  f (0x1010) runs syscall, tracing stops; the
 * kernel enters the handler (TIP.PGE 0x1020); it returns to the restorer
 * 0x1030 (TIP), whose rt_sigreturn syscall stops tracing again; the kernel
 * resumes f after its syscall (TIP.PGE 0x1012); f returns (TIP 0x100a).
 * The kernel's side is no block: the handler is f's child.
 * IDs: 0 call h, 1 nop, 2 ret, 3 call f, 4 syscall, 5 nop, 6 ret,
 * 7 syscall, 8 ret, 9 jmp*.
 */
Test(rules, signal_handler_at_syscall)
{
	uint8_t code[0x40];
	struct trace t = { .n = 0 };
	struct tree r;
	const struct blk *f;
	uint32_t i, nh = 0;

	memset(code, 0x90, sizeof(code));
	memcpy(code + 0x00, "\xe8\x1b\x00\x00\x00", 5);    /* call 0x1020 */
	memcpy(code + 0x05, "\xe8\x06\x00\x00\x00", 5);    /* call 0x1010 */
	memcpy(code + 0x0a, "\xff\xe0", 2);
	memcpy(code + 0x10, "\x0f\x05\xc3", 3);            /* syscall; ret */
	code[0x21] = 0xc3;                                 /* handler ret */
	memcpy(code + 0x30, "\x0f\x05", 2);                /* rt_sigreturn */
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1000);
	ip(&t, ppt_tip, 0x1005);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1020);
	ip(&t, ppt_tip, 0x1030);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1012);
	ip(&t, ppt_tip, 0x100a);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 10);
	cr_assert_eq(r.n, 4, "blocks: %u", r.n);
	f = at_entry(&r, 0x1010);
	cr_assert_eq(f->first, 4);
	cr_assert_eq(f->last, 8);
	cr_assert_eq(f->flags, HTR_BLOCK_GAP);
	for (i = 0; i < r.n; i++)
		if (r.b[i].func != HTR_NONE && r.b[i].entry == 0x1020 &&
		    r.b[i].first == 5) {
			cr_assert_eq(&r.b[r.b[i].parent], f);
			cr_assert_eq(r.b[i].last, 6);
			nh++;
		}
	cr_assert_eq(nh, 1, "no handler block inside f");
}

/*
 * A handler that makes the interrupted code call a function (Go's
 * asynchronous preemption), and a second interrupt right where that
 * function returns to.  The trace starts in the outermost function:
 * 0x1010 call 0x1020 (0x1020 becomes a known entry; ret -> 0x1015, TIP)
 * 0x1015 nop; interrupt at 0x1016 (FUP, TIP.PGD); the handler resumes at
 *        0x1020 instead (TIP.PGE): a far frame that returns to 0x1016,
 *        the callee entered where tracing resumed
 * 0x1020 nop; 0x1021 ret -> 0x1016 (TIP); an interrupt there before
 *        0x1016 runs (FUP 0x1016, TIP.PGD): the ret landed at 0x1016,
 *        the far frame's return address, so the callee returned and the
 *        far frame with it (rule 3's exception; the interrupt's IP is L)
 * 0x1020 again: the second handler (TIP.PGE); its ret goes to the
 *        restorer 0x1030 (TIP), whose syscall (rt_sigreturn, TIP.PGD)
 *        resumes at 0x1016 (TIP.PGE): the second far frame returned
 * 0x1016 nop; 0x1017 ret leaves (TIP.PGD): with nothing open, a late
 *        root closes there.
 * IDs: 0 call, 1 nop, 2 ret, 3 nop, 4 nop, 5 ret, 6 nop, 7 ret,
 * 8 syscall, 9 nop, 10 ret.  Were the first far frame left open, the
 * last ret would close it and the root would stay open (truncated).
 */
Test(rules, interrupt_where_injected_call_returns)
{
	uint8_t code[0x40];
	struct trace t = { .n = 0 };
	struct tree r;
	uint32_t i, nroot = 0, ninj = 0;

	memset(code, 0x90, sizeof(code));
	memcpy(code + 0x10, "\xe8\x0b\x00\x00\x00", 5);    /* call 0x1020 */
	code[0x17] = 0xc3;
	code[0x21] = 0xc3;
	memcpy(code + 0x30, "\x0f\x05", 2);                /* rt_sigreturn */
	start(&t, 64);
	ip(&t, ppt_tip_pge, 0x1010);
	ip(&t, ppt_tip, 0x1015);
	ip(&t, ppt_fup, 0x1016);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1020);
	ip(&t, ppt_tip, 0x1016);
	ip(&t, ppt_fup, 0x1016);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1020);
	ip(&t, ppt_tip, 0x1030);
	ip(&t, ppt_tip_pgd, 0);
	ip(&t, ppt_tip_pge, 0x1016);
	ip(&t, ppt_tip_pgd, 0);
	build(code, sizeof(code), 0x1000, &t, &r);

	cr_assert_eq(r.ninsns, 11);
	for (i = 0; i < r.n; i++) {
		cr_assert_eq(r.b[i].flags & (HTR_BLOCK_UNWOUND |
					     HTR_BLOCK_TRUNCATED), 0,
			     "block %u: flags 0x%x", i, r.b[i].flags);
		if (r.b[i].parent == HTR_NONE) {
			cr_assert_eq(r.b[i].first, 0);
			cr_assert_eq(r.b[i].last, 10);
			cr_assert_eq(r.b[i].flags,
				     HTR_BLOCK_LATE | HTR_BLOCK_GAP);
			nroot++;
		}
		if (r.b[i].func != HTR_NONE && r.b[i].entry == 0x1020 &&
		    r.b[i].first == 4) {
			cr_assert_eq(r.b[i].last, 5);
			ninj++;
		}
	}
	cr_assert_eq(nroot, 1);
	cr_assert_eq(ninj, 1, "no injected call at 4");
}

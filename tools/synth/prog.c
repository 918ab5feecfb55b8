/*
 * Program generator.  Every function is real x86-64 code, emitted with
 * rel32 displacements so the program is position independent and can be
 * traced at any base.  Calls only go to higher-numbered functions (or to the
 * function itself, guarded), so the static call graph stays acyclic apart
 * from direct recursion and the executor controls depth through guards.
 */
#include "prog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gen {
	struct prog *p;
	const struct prog_feat *feat;   /* NULL: the original programs */
	/* call *slot(%rip) fixups: insn index -> slot */
	struct { uint32_t insn, slot; } *sfix;
	size_t nsfix, cap_sfix;
	/* mov $LABEL,%eax fixups (32-bit code): insn index -> label */
	struct { uint32_t insn, label; } *afix;
	size_t nafix, cap_afix;
	int b32;                        /* 32-bit code */
	size_t cap_text, cap_insns;
	/* pending label fixups: insn index -> label id */
	struct { uint32_t insn; uint32_t label; int patch; } *fix;
	size_t nfix, cap_fix;
	uint32_t *label;        /* label id -> insn index */
	size_t nlabel, cap_label;
	uint64_t rng;
	int oom;
};

static void *grow(void *ptr, size_t *cap, size_t need, size_t elem, int *oom)
{
	size_t ncap;
	void *n;

	if (need <= *cap)
		return ptr;
	ncap = *cap ? *cap * 2 : 256;
	while (ncap < need)
		ncap *= 2;
	n = realloc(ptr, ncap * elem);
	if (!n) {
		*oom = 1;
		return NULL;
	}
	*cap = ncap;
	return n;
}

/* Append one instruction; returns its index or UINT32_MAX on OOM. */
static uint32_t emit(struct gen *g, const uint8_t *bytes, uint8_t len,
		     enum sk kind, enum srole role, uint32_t func)
{
	struct prog *p = g->p;
	uint8_t *t;
	struct sinsn *in;

	if (g->oom)
		return UINT32_MAX;
	t = grow(p->text, &g->cap_text, p->text_size + len, 1, &g->oom);
	if (!t)
		return UINT32_MAX;
	p->text = t;
	in = grow(p->insns, &g->cap_insns, p->ninsns + 1, sizeof(*in), &g->oom);
	if (!in)
		return UINT32_MAX;
	p->insns = in;
	memcpy(p->text + p->text_size, bytes, len);
	in = &p->insns[p->ninsns];
	memset(in, 0, sizeof(*in));
	in->off = (uint32_t) p->text_size;
	in->len = len;
	in->kind = (uint8_t) kind;
	in->role = (uint8_t) role;
	in->func = func;
	p->text_size += len;
	return (uint32_t) p->ninsns++;
}

static uint32_t new_label(struct gen *g)
{
	uint32_t *l = grow(g->label, &g->cap_label, g->nlabel + 1,
			   sizeof(*l), &g->oom);
	if (!l)
		return 0;
	g->label = l;
	l[g->nlabel] = UINT32_MAX;
	return (uint32_t) g->nlabel++;
}

static void place(struct gen *g, uint32_t label)
{
	if (!g->oom)
		g->label[label] = (uint32_t) g->p->ninsns;
}

/* Resolve @insn's target to @label; @patch also writes the rel32 that ends
 * the instruction (an indirect branch only records where it goes). */
static void fixup_ex(struct gen *g, uint32_t insn, uint32_t label, int patch)
{
	void *f;

	if (g->oom || insn == UINT32_MAX)
		return;
	f = grow(g->fix, &g->cap_fix, g->nfix + 1, sizeof(*g->fix), &g->oom);
	if (!f)
		return;
	g->fix = f;
	g->fix[g->nfix].insn = insn;
	g->fix[g->nfix].label = label;
	g->fix[g->nfix].patch = patch;
	g->nfix++;
}

static void fixup(struct gen *g, uint32_t insn, uint32_t label)
{
	fixup_ex(g, insn, label, 1);
}

/* A straight-line instruction with no effect on control flow: 32-bit code
 * has no REX prefixes and no RIP-relative addressing. */
static void plain32(struct gen *g, uint32_t f)
{
	static const struct { uint8_t len; uint8_t b[5]; } pool[] = {
		{ 1, { 0x90 } },                               /* nop */
		{ 2, { 0x89, 0xd8 } },                         /* mov %ebx,%eax */
		{ 3, { 0x83, 0xc0, 0x07 } },                   /* add $7,%eax */
		{ 2, { 0x31, 0xd2 } },                         /* xor %edx,%edx */
		{ 5, { 0xb9, 0x05, 0x00, 0x00, 0x00 } },       /* mov $5,%ecx */
		{ 2, { 0x01, 0xc3 } },                         /* add %eax,%ebx */
		{ 3, { 0x8b, 0x45, 0xf8 } },                   /* mov -8(%ebp),%eax */
		{ 3, { 0x89, 0x45, 0xf0 } },                   /* mov %eax,-16(%ebp) */
		{ 2, { 0x85, 0xc0 } },                         /* test %eax,%eax */
		{ 5, { 0xb8, 0, 0, 0, 0 } },                   /* mov $0,%eax */
		{ 3, { 0xc1, 0xe0, 0x03 } },                   /* shl $3,%eax */
		{ 2, { 0xff, 0xc9 } },                         /* dec %ecx */
	};
	unsigned i = synth_below(&g->rng, sizeof(pool) / sizeof(pool[0]));

	emit(g, pool[i].b, pool[i].len, SK_PLAIN, SR_NONE, f);
}

/* A straight-line instruction with no effect on control flow. */
static void plain(struct gen *g, uint32_t f)
{
	static const struct { uint8_t len; uint8_t b[7]; } pool[] = {
		{ 1, { 0x90 } },                               /* nop */
		{ 3, { 0x48, 0x89, 0xd8 } },                   /* mov %rbx,%rax */
		{ 4, { 0x48, 0x83, 0xc0, 0x07 } },             /* add $7,%rax */
		{ 2, { 0x31, 0xd2 } },                         /* xor %edx,%edx */
		{ 5, { 0xb9, 0x05, 0x00, 0x00, 0x00 } },       /* mov $5,%ecx */
		{ 3, { 0x48, 0x01, 0xc3 } },                   /* add %rax,%rbx */
		{ 4, { 0x48, 0x8b, 0x45, 0xf8 } },             /* mov -8(%rbp),%rax */
		{ 4, { 0x48, 0x89, 0x45, 0xf0 } },             /* mov %rax,-16(%rbp) */
		{ 3, { 0x48, 0x85, 0xc0 } },                   /* test %rax,%rax */
		{ 7, { 0x48, 0x8d, 0x05, 0, 0, 0, 0 } },       /* lea 0(%rip),%rax */
		{ 4, { 0x48, 0xc1, 0xe0, 0x03 } },             /* shl $3,%rax */
		{ 2, { 0xff, 0xc9 } },                         /* dec %ecx */
	};
	unsigned i;

	if (g->b32) {
		plain32(g, f);
		return;
	}
	i = synth_below(&g->rng, sizeof(pool) / sizeof(pool[0]));
	emit(g, pool[i].b, pool[i].len, SK_PLAIN, SR_NONE, f);
}

static void plains(struct gen *g, uint32_t f, unsigned lo, unsigned hi)
{
	unsigned n = lo + synth_below(&g->rng, hi - lo + 1);

	while (n--)
		plain(g, f);
}

/* jcc rel32 to @label (condition code varies, it is never evaluated). */
static void jcc(struct gen *g, uint32_t f, enum srole role, uint32_t label)
{
	uint8_t b[6] = { 0x0f, (uint8_t) (0x80 | synth_below(&g->rng, 16)) };

	fixup(g, emit(g, b, 6, SK_JCC, role, f), label);
}

static void jmp(struct gen *g, uint32_t f, uint32_t label)
{
	static const uint8_t b[5] = { 0xe9 };

	fixup(g, emit(g, b, 5, SK_JMP, SR_NONE, f), label);
}

/* The address of @label into %rax: lea LABEL(%rip),%rax, or in 32-bit
 * code mov $LABEL,%eax. */
static void lea_rax(struct gen *g, uint32_t f, uint32_t label)
{
	static const uint8_t lea[7] = { 0x48, 0x8d, 0x05 };
	static const uint8_t mov[5] = { 0xb8 };
	uint32_t i;
	void *a;

	if (!g->b32) {
		fixup(g, emit(g, lea, 7, SK_PLAIN, SR_NONE, f), label);
		return;
	}
	i = emit(g, mov, 5, SK_PLAIN, SR_NONE, f);
	a = grow(g->afix, &g->cap_afix, g->nafix + 1, sizeof(*g->afix),
		 &g->oom);
	if (!a || i == UINT32_MAX)
		return;
	g->afix = a;
	g->afix[g->nafix].insn = i;
	g->afix[g->nafix++].label = label;
}

/* Function entries get labels 0..nfuncs-1. */
static void call(struct gen *g, uint32_t f, uint32_t callee, int indirect)
{
	uint32_t skip = new_label(g);
	uint32_t i;

	jcc(g, f, SR_GUARD, skip);
	if (indirect) {
		static const uint8_t icall[2] = { 0xff, 0xd0 };

		/* lea callee(%rip),%rax ; call *%rax */
		lea_rax(g, f, callee);
		i = emit(g, icall, 2, SK_ICALL, SR_NONE, f);
		fixup_ex(g, i, callee, 0);
	} else {
		static const uint8_t c[5] = { 0xe8 };

		i = emit(g, c, 5, SK_CALL, SR_NONE, f);
		fixup(g, i, callee);
	}
	if (!g->oom && callee == f)
		g->p->insns[i].self = 1;
	place(g, skip);
}

static uint32_t pick_callee(struct gen *g, uint32_t f)
{
	uint32_t n = g->p->ntraced;

	/* Prefer near successors so call chains get deep. */
	uint32_t span = n - f - 1 < 4 ? n - f - 1 : 4;
	return f + 1 + synth_below(&g->rng, span);
}

/* A call into untraced (library) code, three ways: direct, through a
 * register, through a function pointer in memory. */
static void lib_call(struct gen *g, uint32_t f)
{
	static const uint8_t c[5] = { 0xe8 }, icall[2] = { 0xff, 0xd0 };
	static const uint8_t mcall[6] = { 0xff, 0x15 };
	const struct prog_feat *ft = g->feat;
	uint32_t lib = g->p->ntraced + synth_below(&g->rng, ft->libs);
	uint32_t skip = new_label(g), i, ncb = 0;
	void *sf;

	/* Half the calls go to the ones that call back, when there are. */
	while (ncb < ft->libs &&
	       g->p->funcs[g->p->ntraced + ncb].kind == SF_LIB_CB)
		ncb++;
	if (ncb && synth_below(&g->rng, 2))
		lib = g->p->ntraced + synth_below(&g->rng, ncb);

	jcc(g, f, SR_SPECIAL, skip);
	switch (synth_below(&g->rng, 3)) {
	case 0:
		fixup(g, emit(g, c, 5, SK_CALL, SR_NONE, f), lib);
		break;
	case 1:
		lea_rax(g, f, lib);
		fixup_ex(g, emit(g, icall, 2, SK_ICALL, SR_NONE, f), lib, 0);
		break;
	default:
		/* call *slot(%rip): the slot holds the library function */
		i = emit(g, mcall, 6, SK_ICALL, SR_NONE, f);
		fixup_ex(g, i, lib, 0);
		sf = grow(g->sfix, &g->cap_sfix, g->nsfix + 1, sizeof(*g->sfix),
			  &g->oom);
		if (!sf || i == UINT32_MAX)
			break;
		g->sfix = sf;
		g->sfix[g->nsfix].insn = i;
		g->sfix[g->nsfix++].slot = lib - g->p->ntraced;
		break;
	}
	place(g, skip);
}

/* mov $NR,%eax; syscall */
static void syscall_stmt(struct gen *g, uint32_t f)
{
	static const uint8_t sc[2] = { 0x0f, 0x05 };
	uint8_t mov[5] = { 0xb8, (uint8_t) synth_below(&g->rng, 64) };
	uint32_t skip = new_label(g);

	jcc(g, f, SR_SPECIAL, skip);
	emit(g, mov, 5, SK_PLAIN, SR_NONE, f);
	emit(g, sc, 2, SK_SYSCALL, SR_NONE, f);
	place(g, skip);
}

/* longjmp: lea x(%rip),%rax; jmp *%rax, where the executor sends it to a
 * landing pad of an outer frame (the lea's label is never reached). */
static void longjmp_stmt(struct gen *g, uint32_t f)
{
	static const uint8_t ijmp[2] = { 0xff, 0xe0 };
	uint32_t skip = new_label(g);

	jcc(g, f, SR_SPECIAL, skip);
	lea_rax(g, f, skip);
	fixup_ex(g, emit(g, ijmp, 2, SK_IJMP, SR_LONGJMP, f), skip, 0);
	place(g, skip);
}

/* throw, as an unwinder ends it: the return address rewritten to an outer
 * frame's landing pad, then ret.  lea x(%rip),%rax; mov %rax,8(%rbp);
 * leave; ret */
static void throw_stmt(struct gen *g, uint32_t f)
{
	static const uint8_t mov[4] = { 0x48, 0x89, 0x45, 0x08 };
	static const uint8_t leave[1] = { 0xc9 }, ret[1] = { 0xc3 };
	uint32_t skip = new_label(g);

	jcc(g, f, SR_SPECIAL, skip);
	lea_rax(g, f, skip);
	emit(g, mov, 4, SK_PLAIN, SR_NONE, f);
	emit(g, leave, 1, SK_PLAIN, SR_NONE, f);
	fixup_ex(g, emit(g, ret, 1, SK_RET, SR_THROW, f), skip, 0);
	place(g, skip);
}

/* mov $NR,%eax; call __kernel_vsyscall (the last function) */
static void vsyscall_stmt(struct gen *g, uint32_t f)
{
	static const uint8_t c[5] = { 0xe8 };
	uint8_t mov[5] = { 0xb8, (uint8_t) synth_below(&g->rng, 64) };
	uint32_t skip = new_label(g);

	jcc(g, f, SR_SPECIAL, skip);
	emit(g, mov, 5, SK_PLAIN, SR_NONE, f);
	fixup(g, emit(g, c, 5, SK_CALL, SR_NONE, f), g->p->nfuncs - 1);
	place(g, skip);
}

/* A statement the features ask for, or 0 if none applies. */
static int special(struct gen *g, uint32_t f)
{
	const struct prog_feat *ft = g->feat;
	unsigned kinds[5], n = 0;

	if (ft->libs)
		kinds[n++] = 0;
	if (ft->syscalls)
		kinds[n++] = 1;
	if (ft->unwind && f) {
		kinds[n++] = 2;
		kinds[n++] = 3;
	}
	if (ft->sysenter)
		kinds[n++] = 4;
	if (!n || synth_below(&g->rng, 100) >= ft->special)
		return 0;
	switch (kinds[synth_below(&g->rng, n)]) {
	case 0: lib_call(g, f); break;
	case 1: syscall_stmt(g, f); break;
	case 2: longjmp_stmt(g, f); break;
	case 3: throw_stmt(g, f); break;
	default: vsyscall_stmt(g, f); break;
	}
	return 1;
}

static void statement(struct gen *g, uint32_t f, int allow_loop)
{
	int has_callee = f + 1 < g->p->ntraced;
	unsigned kind;

	if (g->feat && special(g, f))
		return;
	kind = synth_below(&g->rng, 10);
	if (kind < 3 && has_callee) {
		call(g, f, pick_callee(g, f), 0);
	} else if (kind == 3 && has_callee) {
		call(g, f, pick_callee(g, f), 1);
	} else if (kind == 4 && f != 0) {
		call(g, f, f, 0);                       /* recursion */
	} else if (kind == 5) {
		uint32_t skip = new_label(g);

		jcc(g, f, SR_IF, skip);
		plains(g, f, 1, 4);
		place(g, skip);
	} else if (kind == 6 && allow_loop) {
		uint32_t top = new_label(g);

		place(g, top);
		plains(g, f, 1, 3);
		if (has_callee && synth_below(&g->rng, 2))
			call(g, f, pick_callee(g, f), 0);
		plain(g, f);
		jcc(g, f, SR_LOOP, top);
	} else if (kind == 7) {
		/* A computed jump over dead code: lea L(%rip),%rax; jmp *%rax */
		static const uint8_t ijmp[2] = { 0xff, 0xe0 };
		uint32_t l = new_label(g), i;

		lea_rax(g, f, l);
		i = emit(g, ijmp, 2, SK_IJMP, SR_NONE, f);
		fixup_ex(g, i, l, 0);
		plains(g, f, 1, 2);                     /* never executed */
		place(g, l);
	} else {
		plains(g, f, 1, 6);
	}
}

static void pad16(struct gen *g)
{
	/* pad to 16 bytes with int3, never executed */
	while (!g->oom && g->p->text_size % 16) {
		static const uint8_t int3[1] = { 0xcc };
		uint8_t *t = grow(g->p->text, &g->cap_text, g->p->text_size + 1,
				  1, &g->oom);
		if (!t)
			break;
		g->p->text = t;
		memcpy(t + g->p->text_size, int3, 1);
		g->p->text_size++;
	}
}

static void function(struct gen *g, uint32_t f)
{
	static const uint8_t push[1] = { 0x55 }, mov[3] = { 0x48, 0x89, 0xe5 };
	static const uint8_t pop[1] = { 0x5d }, ret[1] = { 0xc3 };
	struct sfunc *fn = &g->p->funcs[f];
	uint32_t epilogue = 0;
	unsigned n, i;
	/* mov %rsp,%rbp; in 32-bit code mov %esp,%ebp */
	const uint8_t *movp = g->b32 ? mov + 1 : mov;
	uint8_t movn = g->b32 ? 2 : 3;

	place(g, f);
	fn->first = (uint32_t) g->p->ninsns;
	fn->off = (uint32_t) g->p->text_size;
	emit(g, push, 1, SK_PLAIN, SR_NONE, f);
	emit(g, movp, movn, SK_PLAIN, SR_NONE, f);

	if (f == 0) {
		uint32_t top = new_label(g);

		place(g, top);
		/* main: an outer loop that always reaches some callees */
		for (i = 0; i < 3 && g->p->ntraced > 1; i++)
			call(g, f, 1 + synth_below(&g->rng, g->p->ntraced - 1 < 3 ?
						   g->p->ntraced - 1 : 3), i == 2);
		n = 1 + synth_below(&g->rng, 3);
		for (i = 0; i < n; i++)
			statement(g, f, 1);
		jcc(g, f, SR_MAIN, top);
		emit(g, pop, 1, SK_PLAIN, SR_NONE, f);
	} else {
		n = 2 + synth_below(&g->rng, 5);
		for (i = 0; i < n; i++)
			statement(g, f, 1);
		if (g->feat && g->feat->unwind) {
			epilogue = new_label(g);
			place(g, epilogue);
		}
		emit(g, pop, 1, SK_PLAIN, SR_NONE, f);
		if (f + 1 < g->p->ntraced && synth_below(&g->rng, 3) == 0) {
			uint32_t normal = new_label(g);

			jcc(g, f, SR_TAIL, normal);
			jmp(g, f, pick_callee(g, f));   /* tail call */
			place(g, normal);
		}
	}
	emit(g, ret, 1, SK_RET, SR_NONE, f);
	if (epilogue) {
		/* A landing pad (a catch block, a setjmp return) after the
		 * body, inside the function's symbol: it cleans up and leaves
		 * through the epilogue. */
		fn->land = (uint32_t) g->p->ninsns;
		plains(g, f, 1, 3);
		jmp(g, f, epilogue);
	}
	pad16(g);
	fn->size = (uint32_t) g->p->text_size - fn->off;
}

/* An untraced library function: some work, maybe a call to another
 * library function, and for SF_LIB_CB a loop calling traced code back
 * through a register (the executor picks the callee). */
static void lib_function(struct gen *g, uint32_t f)
{
	static const uint8_t push[1] = { 0x55 }, mov[3] = { 0x48, 0x89, 0xe5 };
	static const uint8_t pop[1] = { 0x5d }, ret[1] = { 0xc3 };
	static const uint8_t icall[2] = { 0xff, 0xd0 };
	struct sfunc *fn = &g->p->funcs[f];

	place(g, f);
	fn->first = (uint32_t) g->p->ninsns;
	fn->off = (uint32_t) g->p->text_size;
	emit(g, push, 1, SK_PLAIN, SR_NONE, f);
	emit(g, mov, 3, SK_PLAIN, SR_NONE, f);
	plains(g, f, 1, 4);
	if (fn->kind == SF_LIB_CB) {
		uint32_t top = new_label(g), out = new_label(g), i;

		place(g, top);
		jcc(g, f, SR_CBLOOP, out);
		plain(g, f);
		i = emit(g, icall, 2, SK_ICALL, SR_CALLBACK, f);
		fixup_ex(g, i, f, 0);
		plain(g, f);
		jmp(g, f, top);
		place(g, out);
	}
	if (f + 1 < g->p->nfuncs && g->p->funcs[f + 1].kind == SF_LIB)
		call(g, f, f + 1, 0);
	plains(g, f, 1, 3);
	emit(g, pop, 1, SK_PLAIN, SR_NONE, f);
	emit(g, ret, 1, SK_RET, SR_NONE, f);
	pad16(g);
	fn->size = (uint32_t) g->p->text_size - fn->off;
}

/* A traced interrupt handler: saves a register, may call traced code,
 * returns with iretq. */
static void irq_function(struct gen *g, uint32_t f)
{
	static const uint8_t push[1] = { 0x50 }, pop[1] = { 0x58 };
	static const uint8_t iret[2] = { 0x48, 0xcf };
	struct sfunc *fn = &g->p->funcs[f];

	place(g, f);
	fn->first = (uint32_t) g->p->ninsns;
	fn->off = (uint32_t) g->p->text_size;
	emit(g, push, 1, SK_PLAIN, SR_NONE, f);
	plains(g, f, 1, 3);
	if (g->p->ntraced > 1)
		call(g, f, 1 + synth_below(&g->rng, g->p->ntraced - 1), 0);
	plains(g, f, 1, 3);
	emit(g, pop, 1, SK_PLAIN, SR_NONE, f);
	emit(g, iret, 2, SK_IRET, SR_NONE, f);
	pad16(g);
	fn->size = (uint32_t) g->p->text_size - fn->off;
}

static void name_function(struct gen *g, uint32_t f)
{
	static const char *verb[] = { "parse", "hash", "emit", "scan", "merge",
		"lookup", "encode", "flush", "visit", "split", "reduce", "probe" };
	static const char *noun[] = { "header", "block", "token", "entry",
		"table", "frame", "node", "chunk" };
	static const char *ns[] = { "app", "net", "db", "gfx" };
	static const char *cls[] = { "Parser", "Cache", "Queue", "Codec" };
	char *out = g->p->funcs[f].name;
	size_t sz = sizeof(g->p->funcs[f].name);

	if (f == 0) {
		strcpy(out, "main");
	} else if (f % 5 == 3) {
		/* Itanium-mangled C++ member: ns::Cls::verbN() */
		const char *a = ns[synth_below(&g->rng, 4)];
		const char *b = cls[synth_below(&g->rng, 4)];
		char m[24];
		int ml = snprintf(m, sizeof(m), "%s%u",
				  verb[synth_below(&g->rng, 12)], f);

		/* fits: at most 3 + 1+3 + 1+6 + 2+22 + 2 characters */
		if (snprintf(out, sz, "_ZN%zu%s%zu%s%d%sEv", strlen(a), a,
			     strlen(b), b, ml, m) >= (int) sz)
			out[0] = 0;
	} else {
		snprintf(out, sz, "%s_%s_%u", verb[synth_below(&g->rng, 12)],
			 noun[synth_below(&g->rng, 8)], f);
	}
}

/* __kernel_vsyscall as the 32-bit vDSO has it: sysenter, and the kernel
 * comes back (sysexit) to a fixed landing address past the int $0x80 that
 * follows, not to the next instruction. */
static void vsyscall_function(struct gen *g, uint32_t f)
{
	static const uint8_t pushc[1] = { 0x51 }, pushd[1] = { 0x52 };
	static const uint8_t pushb[1] = { 0x55 }, mov[2] = { 0x89, 0xe5 };
	static const uint8_t sysenter[2] = { 0x0f, 0x34 }, int80[2] = { 0xcd, 0x80 };
	static const uint8_t popb[1] = { 0x5d }, popd[1] = { 0x5a };
	static const uint8_t popc[1] = { 0x59 }, ret[1] = { 0xc3 };
	struct sfunc *fn = &g->p->funcs[f];
	uint32_t land = new_label(g);

	place(g, f);
	fn->first = (uint32_t) g->p->ninsns;
	fn->off = (uint32_t) g->p->text_size;
	snprintf(fn->name, sizeof(fn->name), "__kernel_vsyscall");
	emit(g, pushc, 1, SK_PLAIN, SR_NONE, f);
	emit(g, pushd, 1, SK_PLAIN, SR_NONE, f);
	emit(g, pushb, 1, SK_PLAIN, SR_NONE, f);
	emit(g, mov, 2, SK_PLAIN, SR_NONE, f);
	fixup_ex(g, emit(g, sysenter, 2, SK_SYSENTER, SR_NONE, f), land, 0);
	emit(g, int80, 2, SK_PLAIN, SR_NONE, f);       /* never runs */
	place(g, land);
	emit(g, popb, 1, SK_PLAIN, SR_NONE, f);
	emit(g, popd, 1, SK_PLAIN, SR_NONE, f);
	emit(g, popc, 1, SK_PLAIN, SR_NONE, f);
	emit(g, ret, 1, SK_RET, SR_NONE, f);
	pad16(g);
	fn->size = (uint32_t) g->p->text_size - fn->off;
}

static void name_extra(struct gen *g, uint32_t f)
{
	/* Library-like names (the ones that call back first), then the
	 * interrupt handlers; a suffix keeps them unique. */
	static const char *cb[] = { "qsort", "bsearch", "twalk", "ftw",
		"pthread_once", "dl_iterate_phdr" };
	static const char *leaf[] = { "memcpy", "strlen", "malloc", "free",
		"memset", "strcmp", "write", "getpid", "clock_gettime",
		"memmove" };
	static const char *irq[] = { "irq_timer", "irq_net", "irq_disk",
		"irq_kbd" };
	const struct prog *p = g->p;
	struct sfunc *fn = &p->funcs[f];
	const char *const *tab = leaf;
	unsigned k = f - p->ntraced, n = 10, first = p->ntraced;
	int len;

	if (fn->kind == SF_IRQ) {
		tab = irq;
		n = 4;
		first = p->nfuncs - g->feat->irqs;
	} else if (fn->kind == SF_LIB_CB) {
		tab = cb;
		n = 6;
	} else {
		while (first < f && p->funcs[first].kind == SF_LIB_CB)
			first++;
	}
	k = f - first;
	len = snprintf(fn->name, sizeof(fn->name), "%s", tab[k % n]);
	if (k >= n && len > 0)
		snprintf(fn->name + len, sizeof(fn->name) - (size_t) len, "_%u",
			 k / n);
}

int prog_generate(struct prog *p, uint64_t seed, unsigned nfuncs,
		  const struct prog_feat *feat)
{
	struct gen g;
	size_t i;
	uint32_t f;
	unsigned nlibs = 0, nirqs = 0, ncb = 0;

	memset(p, 0, sizeof(*p));
	memset(&g, 0, sizeof(g));
	if (feat && (feat->libs || feat->irqs || feat->syscalls ||
		     feat->unwind || feat->sysenter || feat->bits32)) {
		g.feat = feat;
		g.b32 = p->bits32 = feat->bits32;
		nlibs = feat->libs;
		nirqs = feat->irqs;
		/* About a third of the libraries call back (qsort & co). */
		ncb = feat->callbacks ? (nlibs + 2) / 3 : 0;
	}
	g.p = p;
	g.rng = seed ^ 0x5eed5eed;
	p->ntraced = nfuncs;
	p->nfuncs = nfuncs + nlibs + nirqs + (g.feat && feat->sysenter);
	p->funcs = calloc(p->nfuncs, sizeof(*p->funcs));
	if (!p->funcs)
		return -1;
	for (f = 0; f < p->nfuncs; f++) {
		new_label(&g);          /* label f = entry of function f */
		if (f >= nfuncs + nlibs + nirqs)
			p->funcs[f].kind = SF_VSYSCALL;
		else if (f >= nfuncs + nlibs)
			p->funcs[f].kind = SF_IRQ;
		else if (f >= nfuncs)
			p->funcs[f].kind = f < nfuncs + ncb ? SF_LIB_CB : SF_LIB;
	}
	for (f = 0; f < nfuncs; f++) {
		name_function(&g, f);
		function(&g, f);
	}
	for (f = nfuncs; f < p->nfuncs; f++) {
		if (p->funcs[f].kind == SF_VSYSCALL) {
			vsyscall_function(&g, f);
			continue;
		}
		name_extra(&g, f);
		if (p->funcs[f].kind == SF_IRQ)
			irq_function(&g, f);
		else
			lib_function(&g, f);
	}
	if (nlibs && !g.oom) {
		/* The function pointer table, after the code. */
		static const uint8_t zero[8];
		uint8_t *t;

		p->slot_off = (uint32_t) ((p->text_size + 7) & ~(size_t) 7);
		p->nslots = nlibs;
		p->slot_func = calloc(nlibs, sizeof(*p->slot_func));
		t = grow(p->text, &g.cap_text, p->slot_off + 8 * nlibs, 1,
			 &g.oom);
		if (!p->slot_func || !t)
			goto fail;
		p->text = t;
		memset(t + p->text_size, 0, p->slot_off - p->text_size);
		for (f = 0; f < nlibs; f++) {
			p->slot_func[f] = nfuncs + f;
			memcpy(t + p->slot_off + 8 * f, zero, 8);
		}
		p->text_size = p->slot_off + 8 * nlibs;
	}
	if (g.oom)
		goto fail;
	for (i = 0; i < g.nfix; i++) {
		struct sinsn *in = &p->insns[g.fix[i].insn];
		uint32_t t = g.label[g.fix[i].label];
		int32_t rel;

		if (t == UINT32_MAX)
			goto fail;
		if (in->kind != SK_PLAIN)
			in->target = t;
		if (!g.fix[i].patch)
			continue;
		rel = (int32_t) (p->insns[t].off - (in->off + in->len));
		memcpy(p->text + in->off + in->len - 4, &rel, 4);
	}
	if (g.nafix) {
		p->abs = calloc(g.nafix, sizeof(*p->abs));
		if (!p->abs)
			goto fail;
	}
	for (i = 0; i < g.nafix; i++) {
		uint32_t t = g.label[g.afix[i].label];

		if (t == UINT32_MAX)
			goto fail;
		p->abs[p->nabs].insn = g.afix[i].insn;
		p->abs[p->nabs++].target = t;
	}
	for (i = 0; i < g.nsfix; i++) {
		const struct sinsn *in = &p->insns[g.sfix[i].insn];
		int32_t rel = (int32_t) (p->slot_off + 8 * g.sfix[i].slot -
					 (in->off + in->len));

		memcpy(p->text + in->off + in->len - 4, &rel, 4);
	}
	free(g.fix);
	free(g.sfix);
	free(g.afix);
	free(g.label);
	return 0;
fail:
	free(g.fix);
	free(g.sfix);
	free(g.afix);
	free(g.label);
	prog_free(p);
	return -1;
}

void prog_link(struct prog *p, uint64_t text)
{
	size_t i;

	for (i = 0; i < p->nslots; i++) {
		uint64_t a = text + p->funcs[p->slot_func[i]].off;

		memcpy(p->text + p->slot_off + 8 * i, &a, 8);
	}
	for (i = 0; i < p->nabs; i++) {
		uint32_t a = (uint32_t) (text + p->insns[p->abs[i].target].off);

		memcpy(p->text + p->insns[p->abs[i].insn].off + 1, &a, 4);
	}
}

void prog_free(struct prog *p)
{
	free(p->text);
	free(p->insns);
	free(p->funcs);
	free(p->slot_func);
	free(p->abs);
	memset(p, 0, sizeof(*p));
}

int prog_func_at(const struct prog *p, uint32_t off)
{
	unsigned lo = 0, hi = p->nfuncs;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (off < p->funcs[mid].off)
			hi = mid;
		else if (off >= p->funcs[mid].off + p->funcs[mid].size)
			lo = mid + 1;
		else
			return (int) mid;
	}
	return -1;
}

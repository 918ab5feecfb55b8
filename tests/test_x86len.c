/* Classes and call lengths against encodings assembled by hand from the
 * Intel SDM's tables (opcode, ModRM, SIB, displacement sizes). */
#include "x86len.h"

#include <criterion/criterion.h>

static const struct { const char *what; uint8_t b[16]; size_t n; int len; } cases[] = {
	/* len -1: not a call */
	{ "call rel32", { 0xe8, 1, 2, 3, 4 }, 5, 5 },
	{ "call *%rax", { 0xff, 0xd0 }, 2, 2 },
	{ "call *%r11", { 0x41, 0xff, 0xd3 }, 3, 3 },
	{ "call *(%rax)", { 0xff, 0x10 }, 2, 2 },
	{ "call *8(%rax)", { 0xff, 0x50, 0x08 }, 3, 3 },
	{ "call *0x100(%rax)", { 0xff, 0x90, 0, 1, 0, 0 }, 6, 6 },
	{ "call *(%rax,%rbx,8)", { 0xff, 0x14, 0xd8 }, 3, 3 },
	{ "call *0x10(%rsp)", { 0xff, 0x54, 0x24, 0x10 }, 4, 4 },
	{ "call *0x0(,%rax,8)", { 0xff, 0x14, 0xc5, 0, 0, 0, 0 }, 7, 7 },
	{ "call *x(%rip)", { 0xff, 0x15, 1, 2, 3, 4 }, 6, 6 },
	{ "notrack call *%rax", { 0x3e, 0xff, 0xd0 }, 3, 3 },
	{ "bnd call rel32", { 0xf2, 0xe8, 1, 2, 3, 4 }, 6, 6 },
	{ "lcall *(%rax)", { 0xff, 0x18 }, 2, 2 },
	{ "rex.w lcall *(%rax)", { 0x48, 0xff, 0x18 }, 3, 3 },
	{ "jmp *%rax is no call", { 0xff, 0xe0 }, 2, -1 },
	{ "ret is no call", { 0xc3 }, 1, -1 },
	{ "truncated rel32", { 0xe8, 1, 2 }, 3, -1 },
	{ "truncated disp32", { 0xff, 0x15, 1 }, 3, -1 },
	{ "empty", { 0 }, 0, -1 },
};

Test(x86len, call_forms)
{
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int len = -2;
		enum htr_icls c = htr_x86__classify(cases[i].b, cases[i].n, 1,
						    &len);
		int is_call = c == HTR_IC_CALL || c == HTR_IC_FAR_CALL;

		if (cases[i].len < 0) {
			cr_expect(!is_call || len == 0, "%s", cases[i].what);
		} else {
			cr_expect(is_call, "%s", cases[i].what);
			cr_expect_eq(len, cases[i].len, "%s", cases[i].what);
		}
	}
}

Test(x86len, classes)
{
	static const struct { const char *what; uint8_t b[4]; size_t n;
			      enum htr_icls cls; int is64; } c[] = {
		{ "ret", { 0xc3 }, 1, HTR_IC_RET, 1 },
		{ "ret imm16", { 0xc2, 8, 0 }, 3, HTR_IC_RET, 1 },
		{ "rep ret", { 0xf3, 0xc3 }, 2, HTR_IC_RET, 1 },
		{ "iretq", { 0x48, 0xcf }, 2, HTR_IC_FAR_RET, 1 },
		{ "lret", { 0xcb }, 1, HTR_IC_FAR_RET, 1 },
		{ "syscall", { 0x0f, 0x05 }, 2, HTR_IC_FAR_CALL, 1 },
		{ "sysret", { 0x0f, 0x07 }, 2, HTR_IC_FAR_RET, 1 },
		{ "int 0x80", { 0xcd, 0x80 }, 2, HTR_IC_FAR_CALL, 1 },
		{ "int3", { 0xcc }, 1, HTR_IC_FAR_CALL, 1 },
		{ "jmp *%rax", { 0xff, 0xe0 }, 2, HTR_IC_JUMP, 1 },
		{ "nop", { 0x90 }, 1, HTR_IC_OTHER, 1 },
		{ "inc %eax (32-bit), not REX", { 0x40, 0xc3 }, 2, HTR_IC_OTHER, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int len;

		cr_expect_eq(htr_x86__classify(c[i].b, c[i].n, c[i].is64, &len),
			     c[i].cls, "%s", c[i].what);
	}
}

Test(x86len, jumps_that_read_trace)
{
	static const struct { const char *what; uint8_t b[8]; size_t n;
			      int is64, want; } c[] = {
		{ "jmp *x(%rip) (PLT)", { 0xff, 0x25, 1, 2, 3, 4 }, 6, 1, 1 },
		{ "bnd jmp *x(%rip)", { 0xf2, 0xff, 0x25, 1, 2, 3, 4 }, 7, 1, 1 },
		{ "notrack jmp *%rax", { 0x3e, 0xff, 0xe0 }, 3, 1, 1 },
		{ "jmp *%r11", { 0x41, 0xff, 0xe3 }, 3, 1, 1 },
		{ "ljmp *(%rax)", { 0xff, 0x28 }, 2, 1, 1 },
		{ "ljmp $8,$0 (32-bit)", { 0xea, 0, 0, 0, 0, 8, 0 }, 7, 0, 1 },
		{ "0xea in 64-bit mode", { 0xea, 0 }, 2, 1, 0 },
		{ "jmp rel32", { 0xe9, 1, 2, 3, 4 }, 5, 1, 0 },
		{ "bnd jmp rel32", { 0xf2, 0xe9, 1, 2, 3, 4 }, 6, 1, 0 },
		{ "jmp rel8", { 0xeb, 0x10 }, 2, 1, 0 },
		{ "call *%rax", { 0xff, 0xd0 }, 2, 1, 0 },
		{ "push (%rax)", { 0xff, 0x30 }, 2, 1, 0 },
		{ "truncated", { 0xff }, 1, 1, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		cr_expect_eq(htr_x86__jump_reads_trace(c[i].b, c[i].n,
						       c[i].is64),
			     c[i].want, "%s", c[i].what);
}

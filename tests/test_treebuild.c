/*
 * The tree builder (lib/treebuild.c) on its own: each test feeds a script
 * of decoder events (tests/treebuild_script.h says the notation) to the
 * builder and compares the tree it commits with the tree the rules of
 * docs/tree-rules.md give, written here by hand from the rule's text (the comments
 * work the instruction IDs out).  One test per rule, named after it, and
 * the edge cases between rules; every test takes milliseconds.
 *
 * Each rule was broken on purpose in lib/treebuild.c (one change at a
 * time; tools/check/treebuild_mutants.py does it again) and the suite
 * run: the tests that failed, the rule's own first.  "+N": N more tests
 * failed too.
 *
 *  rule                           mutation                      fails
 *  1 IDs                          a gap takes an ID             rule_1_ids_count_instructions_not_gaps +27
 *  2 near call opens a frame      HTR_IC_CALL pushes nothing    rule_2_call_opens_frame_at_next_instruction +34
 *  2 far transfer opens a frame   HTR_IC_FAR_CALL pushes none   rule_2_far_call_opens_frame +2
 *  2 async branch after call/ret  empty FAR_CALL run no frame   rule_2_interrupt_right_after_call_nests_in_callee,
 *                                                               rule_2_interrupt_right_after_return_lands_it_first
 *  2 entry from the TIP.PGD       gap's IP not the entry        rule_2_entry_from_tip_pgd +1
 *  2 entry unknown when not seen  entry_pending kept at resume  rule_2_entry_unknown_when_not_seen +1
 *  2 no instruction, no block     emit() takes first == last+1  rule_2_frame_without_instructions_is_no_block +1
 *  3 late start                   late_return() does nothing    rule_3_late_start_adopts_everything_so_far +2
 *  3 late block carries gap       new top-level frame no gap    rule_3_late_start_carries_gap_in_its_span
 *  3 L unknown: innermost closes  no landing at a gap           rule_3_return_to_innermost_or_unknown_closes_innermost +2
 *  3 L = outer return address     frames above not unwound      rule_3_return_to_outer_return_address_unwinds_above
 *  3 except an interrupt's call   kernel_call() ignored         rule_3_interrupt_call_returns_without_unwound +2
 *  3 L inside outer function      inside_frame() not consulted  rule_3_return_into_outer_function_unwinds_to_it +2
 *  3 except callback -> caller    always unwound                rule_3_callback_returning_into_its_caller_is_plain +3
 *  3 entry never counts           ip == entry counts as inside  rule_3_return_to_function_entry_never_counts
 *  3 late caller                  late_caller() never           rule_3_return_into_unopened_function_adds_late_caller
 *  3 otherwise innermost closes   nothing closes                rule_3_return_matching_nothing_closes_innermost +2
 *  3 function after jmp to entry  frame keeps its function      rule_3_indirect_jump_to_entry_sets_frame_function
 *  3 FUNC.cold / FUNC.part        (the extent callback's, image.c: rule_3_cold_part_counts_as_its_function pins
 *                                 the builder's use of it; caught with "inside outer function" above)
 *  3a jmp to innermost ret addr   ignored                       rule_3a_jump_to_innermost_return_address_is_a_return
 *  3a jmp to outer ret address    matching frame stays open     rule_3a_longjmp_closes_frames_unwound
 *  3a jmp into outer function     ignored                       rule_3a_longjmp_into_outer_function_unwinds_to_it
 *  3a otherwise nothing           jump within S's function      rule_3a_other_jumps_change_nothing
 *                                 unwinds
 *  4 gap: every open frame        only the innermost flagged    rule_4_gap_flags_every_open_frame +18
 *  4 interrupt-delayed callee     flagged gap anyway            rule_4_interrupted_before_first_instruction_loses_nothing
 *  2 entry held by an interrupt   held_at ignored ('?')         rule_2_entry_where_an_interrupt_held_the_callee
 *  4 async disable: far frame     no far frame pushed           rule_4_interrupted_before_first_instruction_loses_nothing
 *  4 R = open frame's ret addr    not looked for                rule_4_resume_at_return_address_closes_implicit +2
 *  4 after overflow nothing else  handled as a disable          rule_4_overflow_goes_on_in_current_frame +5
 *  4 error: R inside open func    closed unwound                rule_4_error_resume_inside_open_function_closes_implicit
 *  4 error: innermost included    frame_in() skips innermost    rule_4_errors_do_not_grow_depth +1
 *  4 error: R at an entry         no callback frame             rule_4_error_resume_at_entry_opens_callback +2
 *  4 error: R in unopened func    no late frame                 rule_4_error_resume_in_unopened_function_entered_deeper +2
 *  4 error: caller known          callers ignored               rule_4_error_resume_in_unopened_function_called_again
 *  4 error: no symbols, goes on   a callback instead            rule_4_error_without_symbols_goes_on +1
 *  4 sync disable from callback   callback stays open           rule_4_callback_left_by_jump_returns_through_untraced_code
 *  4 R inside open func (disable) closed implicit               rule_4_resume_inside_open_function_unwinds
 *  4 R at a function's entry      no callback frame             rule_4_resume_at_known_entry_opens_callback +3
 *  4 far frame open               stays open                    rule_4_resume_after_far_transfer_closes_it
 *  4 sync disable: callback at R  none                          rule_4_sync_disable_opens_callback +2
 *  4 untraced far frame no block  emitted as a block            rule_4_signal_handler_belongs_to_interrupted_frame +3
 *  5 end: truncated               closed without the flag       rule_5_end_truncates_open_frames +4
 *  6 depth limit 2^18             one frame more                rule_6_depth_limit_folds_calls
 *  6 folded calls flag gap        no flag                       rule_6_depth_limit_folds_calls
 *  6 runaway counted              not counted                   rule_6_runaway_is_an_error_gap
 *  time after an error (decode.h) applied after the gap         time_after_error_is_where_decoding_resumed
 *  time_entry (treebuild.h)       applied at any time           time_entry_only_before_callee_first_instruction
 *
 * Where the rules' text leaves a case open, the expected tree follows
 * the builder's header comments and says so: a handler interrupting a
 * callee before its first instruction nests in it (rule 2), a frame
 * opened at a function's entry where tracing resumed has lost nothing
 * (no gap), the callee an interrupt delays loses nothing (rule 4).
 */
#include "treebuild_script.h"
#include "tmpdir.h"

#include "htr/tree.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

HTR_TEST_TMPDIR(treebuild);

static struct tbs_result *run(const char *rule, const char *script,
			      unsigned flags)
{
	static unsigned n;
	struct tbs_result *r = malloc(sizeof(*r));
	char path[256];

	cr_assert_not_null(r);
	snprintf(path, sizeof(path), "%s/t%u.htr", dir, n++);
	cr_assert_eq(tbs_run(script, path, flags, r), 0,
		     "tree rule (docs/tree-rules.md) %s: %s\n--- script:\n%s", rule, r->err,
		     script);
	return r;
}

/* The tree @script builds is @want (treebuild_script.h's notation);
 * a failure names @rule. */
static void tree_is(const char *rule, const char *script, unsigned flags,
		    const char *want)
{
	struct tbs_result *r = run(rule, script, flags);

	cr_assert_str_eq(r->tree, want,
			 "tree rule (docs/tree-rules.md) %s\n--- script:\n%s\n"
			 "--- want:\n%s--- got:\n%s", rule, script, want,
			 r->tree);
	free(r);
}

#define RULE(name) Test(treebuild, name, .timeout = 1.0)

/* ---- 1. IDs ---------------------------------------------------------- */

RULE(rule_1_ids_count_instructions_not_gaps)
{
	/* main calls f at ID 1; f runs 2-4, a gap (no ID), 5-6 (its
	 * return at 6); main 7.  Eight instructions. */
	struct tbs_result *r = run("1 (IDs)",
				   "call 0x1000 2; run 0x2000 3; gap overflow;"
				   "resume 0x2010; ret 0x2010 2; run 0x1002 1",
				   0);

	cr_assert_str_eq(r->tree, "0-7 @? late truncated gap\n"
				  "  2-6 @0x2000 gap\n",
			 "tree rule (docs/tree-rules.md) 1 (IDs): got\n%s", r->tree);
	cr_assert_eq(r->ninsns, 8, "tree rule (docs/tree-rules.md) 1 (IDs): %llu IDs",
		     (unsigned long long) r->ninsns);
	cr_assert_eq(r->gaps, 1);
	free(r);
}

/* ---- 2. Calls -------------------------------------------------------- */

RULE(rule_2_call_opens_frame_at_next_instruction)
{
	/* main 0-1, the call at 2; f 3-7 (its return at 7), entered at
	 * 0x2000; main 8-9. */
	tree_is("2 (calls: a near call opens a frame)",
		"run 0x1000 2; call 0x1002 1; run 0x2000 4; ret 0x2004 1;"
		"run 0x1003 2", 0,
		"0-9 @? late truncated\n"
		"  3-7 @0x2000\n");
}

RULE(rule_2_far_call_opens_frame)
{
	/* A syscall at ID 1 (return address 0x1002); the kernel 2-5, its
	 * sysret at 5; main 6. */
	tree_is("2 (calls: a far transfer opens a frame)",
		"fcall 0x1000 2; run 0xffff0000 3; fret 0xffff0003 1;"
		"run 0x1002 1", 0,
		"0-6 @? late truncated\n"
		"  2-5 @0xffff0000\n");
}

RULE(rule_2_interrupt_right_after_call_nests_in_callee)
{
	/* main's call at 1 (returns to 0x1002); an interrupt before the
	 * callee's first instruction: the interrupted IP, 0x2000, is the
	 * return address of the handler's frame (2-4, iret at 4), which
	 * opens in the callee (entered at 0x2000, where the interrupt
	 * returns); the callee runs 5-8 (return at 8); main 9. */
	tree_is("2 (calls: an asynchronous branch right after a call)",
		"call 0x1000 2; irq 0x2000; run 0xffff0000 2;"
		"fret 0xffff0002 1; run 0x2000 3; ret 0x2003 1;"
		"run 0x1002 1", 0,
		"0-9 @? late truncated\n"
		"  2-8 @0x2000\n"
		"    2-4 @0xffff0000\n");
}

RULE(rule_2_interrupt_right_after_return_lands_it_first)
{
	/* f (1-3) returns at 3 and an interrupt comes in at 0x1001, where
	 * the return landed: f closes, the handler (4-5) is main's. */
	tree_is("2 (calls: an asynchronous branch right after a return)",
		"call 0x1000 1; run 0x2000 2; ret 0x2002 1; irq 0x1001;"
		"run 0xffff0000 1; fret 0xffff0001 1; run 0x1001 1", 0,
		"0-6 @? late truncated\n"
		"  1-3 @0x2000\n"
		"  4-5 @0xffff0000\n");
}

RULE(rule_2_entry_from_tip_pgd)
{
	/* main calls into untraced code at 1; the TIP.PGD names the callee,
	 * 0x7000: its entry.  A callback (2-5) runs in it, returns into
	 * the untraced code (tracing stops again), which returns to main
	 * at 0x1002: the callee closes implicit at 5 (rule 4); main 6-7. */
	tree_is("2 (calls: the entry a TIP.PGD after the call carries)",
		"call 0x1000 2; gap disabled 0x7000; resume 0x3000;"
		"run 0x3000 3; ret 0x3003 1; gap disabled 0x7100;"
		"resume 0x1002; run 0x1002 2", 0,
		"0-7 @? late truncated gap\n"
		"  2-5 @0x7000 gap implicit\n"
		"    2-5 @0x3000\n");
}

RULE(rule_2_entry_unknown_when_not_seen)
{
	/* The call at 0; an overflow takes the callee's first
	 * instructions: it goes on at 0x5000 (1-3), entry unknown, and
	 * returns to 0x1001; main 4. */
	tree_is("2 (calls: the entry stays unknown when not seen)",
		"call 0x1000 1; gap overflow; resume 0x5000; run 0x5000 2;"
		"ret 0x5002 1; run 0x1001 1", 0,
		"0-4 @? late truncated gap\n"
		"  1-3 @? gap\n");
}

RULE(rule_2_frame_without_instructions_is_no_block)
{
	/* A syscall whose kernel side is not traced (IP suppressed) that
	 * returns to 0x1002; a call at the very end of the trace. */
	tree_is("2 (calls: a frame that never runs a traced instruction is "
		"no block)",
		"fcall 0x1000 2; gap disabled; resume 0x1002; run 0x1002 1;"
		"call 0x1003 1", 0,
		"0-3 @? late truncated gap\n");
}

/* ---- 3. Returns ------------------------------------------------------ */

RULE(rule_3_late_start_adopts_everything_so_far)
{
	/* A return at 2 with nothing open: a late block 0-2; another at 5:
	 * a late block 0-5 adopting it; main runs 6 and is still open. */
	tree_is("3 (returns: late start, repeated)",
		"run 0x2000 2; ret 0x2002 1; run 0x1000 2; ret 0x1002 1;"
		"run 0x500 1", 0,
		"0-6 @? late truncated\n"
		"  0-5 @? late\n"
		"    0-2 @? late\n");
}

RULE(rule_3_late_start_carries_gap_in_its_span)
{
	/* Late block 0-0 (no gap in it); a gap; a return at 1: late block
	 * 0-1, with the gap in its span; main 2. */
	tree_is("3 (returns: a late block carries gap when a gap lies in "
		"its span)",
		"ret 0x3000 1; gap overflow; resume 0x2000; ret 0x2000 1;"
		"run 0x1000 1", 0,
		"0-2 @? late truncated gap\n"
		"  0-1 @? late gap\n"
		"    0-0 @? late\n");
}

RULE(rule_3_late_start_caller_without_instructions_is_no_block)
{
	/* The trace ends right after the return: the caller ran nothing. */
	tree_is("3 (returns: late start; rule 2: no instructions, no block)",
		"run 0x2000 1; ret 0x2001 1", 0,
		"0-1 @? late\n");
}

RULE(rule_3_return_to_innermost_or_unknown_closes_innermost)
{
	/* f 1-2 returns; tracing stops (an overflow) before it lands: L
	 * unknown, f closes at its return (and was closed when the gap
	 * began); main 3. */
	tree_is("3 (returns: L unknown closes the innermost frame)",
		"call 0x1000 1; run 0x2000 1; ret 0x2001 1; gap overflow;"
		"resume 0x9000; run 0x9000 1", 0,
		"0-3 @? late truncated gap\n"
		"  1-2 @0x2000\n");
	/* The same at the end of the trace. */
	tree_is("3 (returns: L unknown at the end closes the innermost frame)",
		"call 0x1000 1; run 0x2000 1; ret 0x2001 1", 0,
		"0-2 @? late truncated\n"
		"  1-2 @0x2000\n");
}

RULE(rule_3_return_to_outer_return_address_unwinds_above)
{
	/* main -> f (1) -> g (2) -> h (3-4): h returns to 0x1001, f's
	 * return address: g and h close unwound at 4, then f closes
	 * there, returned; main 5. */
	tree_is("3 (returns: L is an outer frame's return address)",
		"call 0x1000 1; call 0x2000 1; call 0x3000 1; run 0x4000 1;"
		"ret 0x4001 1; run 0x1001 1", 0,
		"0-5 @? late truncated\n"
		"  1-4 @0x2000\n"
		"    2-4 @0x3000 unwound\n"
		"      3-4 @0x4000 unwound\n");
}

RULE(rule_3_interrupt_call_returns_without_unwound)
{
	/* main 0-2 interrupted at 0x1003 (tracing stops asynchronously):
	 * the kernel's far frame returns there.  Tracing resumes at the
	 * entry of asyncPreempt (0x5000; rule 4: a callback), which
	 * returns (3-5) to 0x1003, the interrupt's return address: the
	 * handler made the interrupted code call it, no unwound.  The
	 * kernel's frame, never traced, is no block; main 6. */
	tree_is("3 (returns: the exception for an interrupt's frame: Go's "
		"asynchronous preemption)",
		"fn 0x5000 0x100; run 0x1000 3; gap disabled async 0x1003;"
		"resume 0x5000; run 0x5000 2; ret 0x5002 1; run 0x1003 1", 0,
		"0-6 @? late truncated gap\n"
		"  3-5 @0x5000\n");
}

RULE(rule_3_return_into_outer_function_unwinds_to_it)
{
	/* Symbols main 0x1000, f 0x2000, g 0x3000, h 0x4000.  main -> f
	 * (1) -> g (2) -> h (3-4); h returns to 0x2050, inside f (a catch
	 * block): g and h close unwound at 4, f goes on (5-7); main 8. */
	tree_is("3 (returns: L inside an outer frame's function)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"fn 0x4000 0x100;"
		"call 0x1000 1; call 0x2000 1; call 0x3000 1; run 0x4000 1;"
		"ret 0x4001 1; run 0x2050 2; ret 0x2052 1; run 0x1001 1", 0,
		"0-8 @? late truncated\n"
		"  1-7 @0x2000\n"
		"    2-4 @0x3000 unwound\n"
		"      3-4 @0x4000 unwound\n");
}

RULE(rule_3_callback_returning_into_its_caller_is_plain)
{
	/* main -> f (1-2); a decode error; decoding resumes at g's entry
	 * (rule 4: a new frame, return address unknown) 3-5, which
	 * returns inside f, its caller: a plain return.  f 6-8; main 9. */
	tree_is("3 (returns: into the caller of a frame whose return address "
		"is unknown: no unwound)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"call 0x1000 1; run 0x2000 2; gap error; resume 0x3000;"
		"run 0x3000 2; ret 0x3002 1; run 0x2040 2; ret 0x2042 1;"
		"run 0x1001 1", 0,
		"0-9 @? late truncated gap\n"
		"  1-8 @0x2000 gap\n"
		"    3-5 @0x3000\n");
}

RULE(rule_3_return_to_function_entry_never_counts)
{
	/* main -> f (1) -> g (2-3); g returns to 0x2000, f's entry (a
	 * retpoline's jump): not inside f; g's return address is known,
	 * nothing matches: only g closes, plainly.  f 4-6; main 7. */
	tree_is("3 (returns: a return to a function's entry never counts)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"call 0x1000 1; call 0x2000 1; run 0x3000 1; ret 0x3001 1;"
		"run 0x2000 2; ret 0x2002 1; run 0x1001 1", 0,
		"0-7 @? late truncated\n"
		"  1-6 @0x2000\n"
		"    2-3 @0x3000\n");
}

RULE(rule_3_return_matching_nothing_closes_innermost)
{
	/* No symbols.  g (2-3) returns to 0x9999, nobody's return
	 * address: g closes; f goes on there (4-5); main 6. */
	tree_is("3 (returns: otherwise the innermost frame closes)",
		"call 0x1000 1; call 0x2000 1; run 0x3000 1; ret 0x3001 1;"
		"run 0x9999 1; ret 0x999a 1; run 0x1001 1", 0,
		"0-6 @? late truncated\n"
		"  1-5 @0x2000\n"
		"    2-3 @0x3000\n");
}

RULE(rule_3_return_into_unopened_function_adds_late_caller)
{
	/* main 0-1; a decode error; g's entry: a callback (2-3) that
	 * returns inside f (0x2050), which no open frame is in: a late
	 * frame (late, gap, entry unknown, named after 0x2050) takes g's
	 * place, adopts it and goes on (4-6), returning inside main: its
	 * caller, plainly.  main 7. */
	tree_is("3 (returns: into a function no open frame is in: a late "
		"caller)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"run 0x1000 2; gap error; resume 0x3000; run 0x3000 1;"
		"ret 0x3001 1; run 0x2050 2; ret 0x2052 1; run 0x1010 1",
		TBS_ANCHOR,
		"0-7 @? late truncated gap ~0x1000\n"
		"  2-6 @? late gap ~0x2050\n"
		"    2-3 @0x3000\n");
}

RULE(rule_3_cold_part_counts_as_its_function)
{
	/* f's landing pad is f.cold (0x8000, its start no entry): h
	 * returns there, inside f: g and h unwound, f goes on (5-6). */
	tree_is("3 (returns: FUNC.cold counts as FUNC, its start no entry)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"fn 0x4000 0x100; cold 0x8000 0x40 0x2000;"
		"call 0x1000 1; call 0x2000 1; call 0x3000 1; run 0x4000 1;"
		"ret 0x4001 1; run 0x8000 1; ret 0x8001 1; run 0x1001 1", 0,
		"0-7 @? late truncated\n"
		"  1-6 @0x2000\n"
		"    2-4 @0x3000 unwound\n"
		"      3-4 @0x4000 unwound\n");
	/* FUNC.part.N too (its start an entry, like any function's). */
	tree_is("3 (returns: FUNC.part.N counts as FUNC)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"part 0x8000 0x40 0x2000;"
		"call 0x1000 1; call 0x2000 1; run 0x3000 1; ret 0x3001 1;"
		"run 0x8010 1; ret 0x8011 1; run 0x1001 1", 0,
		"0-6 @? late truncated\n"
		"  1-5 @0x2000\n"
		"    2-3 @0x3000 unwound\n");
}

RULE(rule_3_indirect_jump_to_entry_sets_frame_function)
{
	/* main calls a PLT stub (0x6000, no symbol) at 0, which jumps to
	 * f's entry (ID 1): the frame is in f now.  It calls g (2-3), g
	 * calls h (4), h returns inside f (5-6): g and h unwound, the
	 * frame goes on (7-8); main 9. */
	tree_is("3 (returns: a frame's function after an indirect jump to an "
		"entry)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"fn 0x4000 0x100;"
		"call 0x1000 1; jmp 0x6000 1; call 0x2000 2; call 0x3000 1;"
		"run 0x4000 1; ret 0x4001 1; run 0x2050 1; ret 0x2051 1;"
		"run 0x1001 1", 0,
		"0-9 @? late truncated\n"
		"  1-8 @0x6000\n"
		"    4-6 @0x3000 unwound\n"
		"      5-6 @0x4000 unwound\n");
}

/* ---- 3a. Jumps ------------------------------------------------------- */

RULE(rule_3a_jump_to_innermost_return_address_is_a_return)
{
	/* f (1-2) jumps to its own return address: it closes at the jump,
	 * not unwound; main 3. */
	tree_is("3a (jumps: to the innermost frame's return address)",
		"call 0x1000 1; run 0x2000 1; jmp 0x2001 1; run 0x1001 1", 0,
		"0-3 @? late truncated\n"
		"  1-2 @0x2000\n");
}

RULE(rule_3a_longjmp_closes_frames_unwound)
{
	/* main -> f (1) -> g (2) -> h (3-4); h's jump lands at 0x1001,
	 * f's return address: f and the frames above it left, unwound at
	 * the jump; main 5. */
	tree_is("3a (jumps: to an outer frame's return address)",
		"call 0x1000 1; call 0x2000 1; call 0x3000 1; run 0x4000 1;"
		"jmp 0x4001 1; run 0x1001 1", 0,
		"0-5 @? late truncated\n"
		"  1-4 @0x2000 unwound\n"
		"    2-4 @0x3000 unwound\n"
		"      3-4 @0x4000 unwound\n");
}

RULE(rule_3a_longjmp_into_outer_function_unwinds_to_it)
{
	/* h's jump (4) lands at 0x2050, inside f, outer: g and h unwound
	 * at the jump, f goes on (5-6); main 7. */
	tree_is("3a (jumps: into an outer frame's function)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"fn 0x4000 0x100;"
		"call 0x1000 1; call 0x2000 1; call 0x3000 1; run 0x4000 1;"
		"jmp 0x4001 1; run 0x2050 1; ret 0x2051 1; run 0x1001 1", 0,
		"0-7 @? late truncated\n"
		"  1-6 @0x2000\n"
		"    2-4 @0x3000 unwound\n"
		"      3-4 @0x4000 unwound\n");
}

RULE(rule_3a_other_jumps_change_nothing)
{
	/* f calls itself (1); the inner f jumps inside f (a switch table,
	 * 2: f is also the outer frame's function, but the jump stays in
	 * its own), then to f's entry (a tail call, 3), runs 4 and
	 * returns at 5; the outer f 6-7; main 8. */
	tree_is("3a (jumps: otherwise nothing changes)",
		"fn 0x1000 0x100; fn 0x2000 0x100;"
		"call 0x1000 1; call 0x2000 1; jmp 0x2000 1; jmp 0x2050 1;"
		"run 0x2000 1; ret 0x2001 1; run 0x2001 1; ret 0x2002 1;"
		"run 0x1001 1", 0,
		"0-8 @? late truncated\n"
		"  1-7 @0x2000\n"
		"    2-5 @0x2000\n");
	/* Without symbols only a jump to a return address is seen. */
	tree_is("3a (jumps: without symbols, only to a return address)",
		"call 0x1000 1; call 0x2000 1; run 0x3000 1; jmp 0x3001 1;"
		"run 0x1050 1; ret 0x1051 1; run 0x2001 1; ret 0x2002 1;"
		"run 0x1001 1", 0,
		"0-8 @? late truncated\n"
		"  1-7 @0x2000\n"
		"    2-5 @0x3000\n");
}

/* ---- 4. Gaps --------------------------------------------------------- */

RULE(rule_4_gap_flags_every_open_frame)
{
	/* s (1-2) returns before the gap; main -> f (4) -> g (5) are open
	 * when it begins: they get gap, s does not; g 5-6, f 4-7, main 8. */
	tree_is("4 (gaps: every frame open when a gap begins gets gap)",
		"call 0x1000 1; run 0x5000 1; ret 0x5001 1; call 0x1001 1;"
		"call 0x2000 1; run 0x3000 1; gap overflow; resume 0x3001;"
		"ret 0x3001 1; ret 0x2001 1; run 0x1002 1", 0,
		"0-8 @? late truncated gap\n"
		"  1-2 @0x5000\n"
		"  4-7 @0x2000 gap\n"
		"    5-6 @0x3000 gap\n");
}

RULE(rule_4_trailing_gap_flags_frames_left_open)
{
	/* An interrupt stops tracing in f at 0x2001 and it never resumes:
	 * f and main are open at a trailing gap; the kernel's frame ran
	 * nothing (no block). */
	tree_is("4 (gaps: frames still open at a trailing gap get gap)",
		"call 0x1000 1; run 0x2000 1; gap disabled async 0x2001", 0,
		"0-1 @? late truncated gap\n"
		"  1-1 @0x2000 truncated gap\n");
}

RULE(rule_4_interrupted_before_first_instruction_loses_nothing)
{
	/* main's call (0); an interrupt stops tracing before the callee's
	 * first instruction (0x2000, the interrupted IP: rule 2); a signal
	 * handler (0x6000, 1-2) returns there: the kernel made the
	 * interrupted code call it (rule 3).  The callee starts where the
	 * interrupt returns, nothing of it lost: no gap; it runs 3-5;
	 * main 6. */
	tree_is("4 (gaps: a callee an interrupt delays loses nothing)",
		"fn 0x6000 0x100; call 0x1000 1; gap disabled async 0x2000;"
		"resume 0x6000; run 0x6000 1; ret 0x6001 1; run 0x2000 2;"
		"ret 0x2002 1; run 0x1001 1", 0,
		"0-6 @? late truncated gap\n"
		"  1-5 @0x2000\n"
		"    1-2 @0x6000\n");
}

RULE(rule_2_entry_where_an_interrupt_held_the_callee)
{
	/* As above, but the trace ends in the handler (a snapshot taken
	 * there): the callee never ran, and its entry is the IP the
	 * interrupt stopped at, right after the call (rule 2), not '?'. */
	tree_is("2 (entry: the interrupted IP right after the call)",
		"fn 0x6000 0x100; call 0x1000 1; gap disabled async 0x2000;"
		"resume 0x6000; run 0x6000 2", 0,
		"0-2 @? late truncated gap\n"
		"  1-2 @0x2000 truncated\n"
		"    1-2 @0x6000 truncated\n");
}

RULE(rule_4_resume_at_return_address_closes_implicit)
{
	/* main -> f (1) -> g (2-3); an overflow; tracing resumes at
	 * 0x1001, f's return address: f and g returned unseen, closed
	 * implicit at 3; main 4. */
	tree_is("4 (gaps: R is an open frame's return address)",
		"call 0x1000 1; call 0x2000 1; run 0x3000 2; gap overflow;"
		"resume 0x1001; run 0x1001 1", 0,
		"0-4 @? late truncated gap\n"
		"  1-3 @0x2000 gap implicit\n"
		"    2-3 @0x3000 gap implicit\n");
}

RULE(rule_4_overflow_goes_on_in_current_frame)
{
	/* With symbols; an overflow in g (2-3) resumes at 0x2050, inside
	 * f: after an overflow nothing else, g goes on (4-5) and returns
	 * to f (6-7); main 8. */
	tree_is("4 (gaps: after an overflow execution goes on in the current "
		"frame)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"call 0x1000 1; call 0x2000 1; run 0x3000 2; gap overflow;"
		"resume 0x2050; run 0x2050 1; ret 0x2051 1; run 0x2001 1;"
		"ret 0x2002 1; run 0x1001 1", 0,
		"0-8 @? late truncated gap\n"
		"  1-7 @0x2000 gap\n"
		"    2-5 @0x3000 gap\n");
}

RULE(rule_4_error_resume_inside_open_function_closes_implicit)
{
	/* main -> f (1) -> g (2-3); a decode error; decoding resumes at
	 * 0x2050, inside f: f goes on (4-5), g returned unseen (implicit,
	 * not unwound: it is an error, not a disable); main 6. */
	tree_is("4 (gaps: after an error, R inside an open frame's function)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"call 0x1000 1; call 0x2000 1; run 0x3000 2; gap error;"
		"resume 0x2050; run 0x2050 1; ret 0x2051 1; run 0x1001 1", 0,
		"0-6 @? late truncated gap\n"
		"  1-5 @0x2000 gap\n"
		"    2-3 @0x3000 gap implicit\n");
	/* The innermost frame included: inside g, g goes on. */
	tree_is("4 (gaps: after an error, R inside the innermost frame's "
		"function)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"call 0x1000 1; call 0x2000 1; run 0x3000 2; gap error;"
		"resume 0x3050; run 0x3050 1; ret 0x3051 1; run 0x2001 1", 0,
		"0-6 @? late truncated gap\n"
		"  1-6 @0x2000 truncated gap\n"
		"    2-5 @0x3000 gap\n");
}

RULE(rule_4_error_resume_at_entry_opens_callback)
{
	/* main -> f (1-2); an error; decoding resumes at g's entry: a new
	 * frame (3-4) under f, open at the end. */
	tree_is("4 (gaps: after an error, R at a function's entry)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"call 0x1000 1; run 0x2000 2; gap error; resume 0x3000;"
		"run 0x3000 2", 0,
		"0-4 @? late truncated gap\n"
		"  1-4 @0x2000 truncated gap\n"
		"    3-4 @0x3000 truncated\n");
}

RULE(rule_4_error_resume_in_unopened_function_entered_deeper)
{
	/* main -> f (1-2); an error; decoding resumes at 0x4050, inside h,
	 * which no open frame is in and no traced call reached: h was
	 * entered in the gap, under f: a frame whose start was lost (late,
	 * gap, named after 0x4050), 3-4, returning inside f, its caller
	 * (rule 3: plainly); f 5-6; main 7. */
	tree_is("4 (gaps: after an error, R inside a function no open frame "
		"is in, entered deeper)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"fn 0x4000 0x100;"
		"call 0x1000 1; run 0x2000 2; gap error; resume 0x4050;"
		"run 0x4050 1; ret 0x4051 1; run 0x2060 1; ret 0x2061 1;"
		"run 0x1001 1", TBS_ANCHOR,
		"0-7 @? late truncated gap ~0x1000\n"
		"  1-6 @0x2000 gap\n"
		"    3-4 @? late gap ~0x4050\n");
}

RULE(rule_4_error_resume_in_unopened_function_called_again)
{
	/* main calls g (1-2) from main's function; then main -> f (4) ->
	 * h (5-6); an error; decoding resumes at 0x3050, inside g: main
	 * called g again, f and h returned unseen (implicit at 6); the
	 * frame whose start was lost (7-8) returns inside main; main 9. */
	tree_is("4 (gaps: after an error, R inside a function an open frame's "
		"function called)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"fn 0x4000 0x100;"
		"call 0x1000 1; run 0x3000 1; ret 0x3001 1; call 0x1001 1;"
		"call 0x2000 1; run 0x4000 2; gap error; resume 0x3050;"
		"run 0x3050 1; ret 0x3051 1; run 0x1010 1", TBS_ANCHOR,
		"0-9 @? late truncated gap ~0x1000\n"
		"  1-2 @0x3000\n"
		"  4-6 @0x2000 gap implicit\n"
		"    5-6 @0x4000 gap implicit\n"
		"  7-8 @? late gap ~0x3050\n");
}

RULE(rule_4_error_without_symbols_goes_on)
{
	/* main -> f (1-2); an error; decoding resumes at 0x9000, no
	 * symbols: f goes on (3-4); main 5. */
	tree_is("4 (gaps: after an error, without symbols, the current frame "
		"goes on)",
		"call 0x1000 1; run 0x2000 2; gap error; resume 0x9000;"
		"run 0x9000 1; ret 0x9001 1; run 0x1001 1", 0,
		"0-5 @? late truncated gap\n"
		"  1-4 @0x2000 gap\n");
}

RULE(rule_4_errors_do_not_grow_depth)
{
	/* main -> f; forty errors, each resuming inside h, which no traced
	 * call reached: the first opens a frame whose start was lost, the
	 * others resume inside its function: the depth stays 3. */
	char script[4096];
	size_t len;
	struct tbs_result *r;
	int k;

	len = (size_t) snprintf(script, sizeof(script),
				"fn 0x1000 0x100; fn 0x2000 0x100;"
				"fn 0x4000 0x100; call 0x1000 1;"
				"run 0x2000 2;");
	for (k = 0; k < 40; k++)
		len += (size_t) snprintf(script + len, sizeof(script) - len,
					 "gap error; resume 0x%x; run 0x%x 1;",
					 0x4010 + k, 0x4010 + k);
	cr_assert_lt(len, sizeof(script));
	r = run("4 (gaps: the depth does not grow with the number of errors)",
		script, 0);
	cr_assert_str_eq(r->tree,
			 "0-42 @? late truncated gap\n"
			 "  1-42 @0x2000 truncated gap\n"
			 "    3-42 @? late truncated gap\n",
			 "tree rule (docs/tree-rules.md) 4 (the depth does not grow with the "
			 "number of errors): got\n%s", r->tree);
	cr_assert_eq(r->errors, 40);
	free(r);
}

RULE(rule_4_callback_left_by_jump_returns_through_untraced_code)
{
	/* main calls qsort, untraced (0; TIP.PGD: 0x7000); the comparator
	 * (a callback at 0x3000, 1-3) tail-jumps into untraced strcmp;
	 * tracing resumes at the comparator again: the first call returned
	 * through the untraced code (implicit at 3); the second (4-6)
	 * returns into qsort; tracing resumes at main's return address:
	 * qsort closes implicit at 6; main 7. */
	tree_is("4 (gaps: after a synchronous disable out of a frame entered "
		"from untraced code)",
		"call 0x1000 1; gap disabled 0x7000; resume 0x3000;"
		"run 0x3000 2; jmp 0x3002 1; gap disabled 0x7100;"
		"resume 0x3000; run 0x3000 2; ret 0x3002 1;"
		"gap disabled 0x7200; resume 0x1001; run 0x1001 1", 0,
		"0-7 @? late truncated gap\n"
		"  1-6 @0x7000 gap implicit\n"
		"    1-3 @0x3000 gap implicit\n"
		"    4-6 @0x3000\n");
}

RULE(rule_4_resume_inside_open_function_unwinds)
{
	/* main -> f (1) -> g (2), which calls into untraced code (a throw
	 * through an untraced unwinder); tracing resumes at 0x2050 inside
	 * f: f goes on (3-4), the frames above it were left unseen:
	 * unwound at 2 (the untraced callee ran nothing: no block); main
	 * 5. */
	tree_is("4 (gaps: with symbols, R inside an open frame's function)",
		"fn 0x1000 0x100; fn 0x2000 0x100; fn 0x3000 0x100;"
		"call 0x1000 1; call 0x2000 1; call 0x3000 1;"
		"gap disabled 0x7000; resume 0x2050; run 0x2050 1;"
		"ret 0x2051 1; run 0x1001 1", 0,
		"0-5 @? late truncated gap\n"
		"  1-4 @0x2000 gap\n"
		"    2-2 @0x3000 gap unwound\n");
}

RULE(rule_4_resume_at_known_entry_opens_callback)
{
	/* No symbols.  main calls f (1-2) at 0x2000; an interrupt stops
	 * tracing at 0x1003; it resumes at 0x2000, where a call went
	 * before: called from the kernel (a signal handler), a new frame
	 * (5-6) that returns to the interrupted IP; main 7. */
	tree_is("4 (gaps: R at a function's entry: a call went there before)",
		"call 0x1000 1; run 0x2000 1; ret 0x2001 1; run 0x1001 2;"
		"gap disabled async 0x1003; resume 0x2000; run 0x2000 1;"
		"ret 0x2001 1; run 0x1003 1", 0,
		"0-7 @? late truncated gap\n"
		"  1-2 @0x2000\n"
		"  5-6 @0x2000\n");
}

RULE(rule_4_resume_after_far_transfer_closes_it)
{
	/* A syscall (1) into a traced kernel (2-3); tracing stops
	 * synchronously and resumes at 0x5000 (sysexit's fixed address),
	 * nobody's return address: the kernel returned, its frame closes
	 * implicit at 3; main 4-5. */
	tree_is("4 (gaps: a frame opened by a far transfer is open)",
		"fcall 0x1000 2; run 0xffff0000 2; gap disabled;"
		"resume 0x5000; run 0x5000 2", 0,
		"0-5 @? late truncated gap\n"
		"  2-3 @0xffff0000 gap implicit\n");
}

RULE(rule_4_sync_disable_opens_callback)
{
	/* main (0-2) leaves the traced code by a jump; tracing resumes at
	 * 0x3000, no symbol: a callback (3-5), open until its return. */
	tree_is("4 (gaps: after a synchronous disable, a callback at R)",
		"run 0x1000 2; jmp 0x1002 1; gap disabled 0x7000;"
		"resume 0x3000; run 0x3000 2; ret 0x3002 1", 0,
		"0-5 @? late truncated gap\n"
		"  3-5 @0x3000\n");
}

RULE(rule_4_signal_handler_belongs_to_interrupted_frame)
{
	/* main 0-2 interrupted at 0x1003; the handler (0x6000, a symbol's
	 * entry: a callback) runs 3-5 and returns to the restorer
	 * (0x7000), which runs 6 and makes the sigreturn syscall (7);
	 * tracing resumes at 0x1003.  The kernel's frames were never
	 * traced: no blocks; the handler and the restorer's instructions
	 * are main's; main 8-9. */
	tree_is("4 (gaps: a far frame whose entry was never traced is no "
		"block)",
		"fn 0x6000 0x100; fn 0x7000 0x10; run 0x1000 3;"
		"gap disabled async 0x1003; resume 0x6000; run 0x6000 2;"
		"ret 0x6002 1; run 0x7000 1; fcall 0x7001 1; gap disabled;"
		"resume 0x1003; run 0x1003 2", 0,
		"0-9 @? late truncated gap\n"
		"  3-5 @0x6000\n");
}

/* ---- 5. End ---------------------------------------------------------- */

RULE(rule_5_end_truncates_open_frames)
{
	tree_is("5 (end: frames still open close truncated)",
		"call 0x1000 1; call 0x2000 1; run 0x3000 3", 0,
		"0-4 @? late truncated\n"
		"  1-4 @0x2000 truncated\n"
		"    2-4 @0x3000 truncated\n");
	tree_is("5 (end: an empty trace has no blocks)", "", 0, "");
}

/* ---- 6. Limits ------------------------------------------------------- */

Test(treebuild, rule_6_depth_limit_folds_calls, .timeout = 4.0)
{
	/* 2^18 + 5 calls (call k at ID k - 1, its frame from ID k): the
	 * last 5 fold into frame 2^18 (gap); their returns are matched by
	 * count, the sixth closes that frame, at ID 2^18 + 11. */
	struct tbs_result *r = run("6 (limits: the call stack's depth)",
				   "deep 262149; run 0x200000 1;"
				   "ret 0x200001 1; ret 0x200001 1;"
				   "ret 0x200001 1; ret 0x200001 1;"
				   "ret 0x200001 1; ret 0x200001 1;"
				   "run 0x100001 1", TBS_QUIET);
	const char *rule = "tree rule (docs/tree-rules.md) 6 (limits: at most 2^18 open "
			   "frames, calls beyond folded into the deepest)";

	cr_assert_eq(r->folded, 5, "%s: folded %llu", rule,
		     (unsigned long long) r->folded);
	cr_assert_eq(r->max_depth, (1u << 18) + 1, "%s: depth %u", rule,
		     r->max_depth);
	cr_assert_eq(r->nblocks, (1u << 18) + 1, "%s", rule);
	cr_assert_eq(r->deepest_first, 1u << 18, "%s", rule);
	cr_assert_eq(r->deepest_last, (1u << 18) + 5 + 6, "%s", rule);
	cr_assert_eq(r->deepest_flags, HTR_BLOCK_GAP, "%s: flags %#x", rule,
		     r->deepest_flags);
	free(r);
}

Test(treebuild, rule_6_runaway_is_an_error_gap)
{
	struct tbs_result *r = run("6 (limits: a runaway is an error gap)",
				   "run 0x1000 2; gap runaway; resume 0x1000;"
				   "run 0x1000 1; gap error; resume 0x1000;"
				   "run 0x1000 1", 0);

	cr_assert_eq(r->errors, 2, "tree rule (docs/tree-rules.md) 6: errors %llu",
		     (unsigned long long) r->errors);
	cr_assert_eq(r->runaways, 1, "tree rule (docs/tree-rules.md) 6: runaways %llu",
		     (unsigned long long) r->runaways);
	cr_assert_str_eq(r->tree, "0-3 @? late truncated gap\n");
	free(r);
}

/* The time points of @r as "ID:TSC ..." are @want; a failure names
 * @rule. */
static void tsc_is(const struct tbs_result *r, const char *rule,
		   const char *want)
{
	char got[512];
	size_t len = 0;
	uint64_t i;

	got[0] = '\0';
	for (i = 0; i < r->ntsc && i < 16; i++)
		len += (size_t) snprintf(got + len, sizeof(got) - len,
					 "%s%llu:%llu", i ? " " : "",
					 (unsigned long long) r->tsc_id[i],
					 (unsigned long long) r->tsc_val[i]);
	cr_assert_str_eq(got, want, "%s: time points", rule);
}

/* ---- Time (decode.h's contract for @time) ---------------------------- */

Test(treebuild, time_after_error_is_where_decoding_resumed)
{
	/* 100 after ID 1; the error's PSB+ says 200: the time of the
	 * next run's first instruction (2); 300 after ID 3. */
	struct tbs_result *r = run("time (decode.h: after an error)",
				   "run 0x1000 2; time 100; gap error;"
				   "time 200; resume 0x2000; run 0x2000 2;"
				   "time 300", 0);

	tsc_is(r, "time (decode.h: after an error)", "1:100 2:200 3:300");
	free(r);
}

Test(treebuild, time_entry_only_before_callee_first_instruction)
{
	/* The call at 1, its callee not started: the time it runs again
	 * (150) is the callee's start, from ID 1 (the call) on; after the
	 * callee's first run it changes nothing. */
	struct tbs_result *r = run("time (treebuild.h: time_entry)",
				   "run 0x1000 1; time 100; call 0x1001 1;"
				   "entrytime 150; run 0x2000 2; entrytime 175;"
				   "time 200", 0);

	tsc_is(r, "time (treebuild.h: time_entry)", "0:100 1:150 3:200");
	free(r);
}

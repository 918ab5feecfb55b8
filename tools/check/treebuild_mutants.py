#!/usr/bin/env python3
"""Break each tree rule in lib/treebuild.c, one at a time, and run
tests/test_treebuild: every mutant must make a test fail, and the failure
must name the rule.  The source file is restored afterwards.

usage: treebuild_mutants.py SOURCE_ROOT BUILD_DIR [RULE-SUBSTRING...]
exit: 0 every mutant was caught, 1 one survived or did not apply"""
import re
import subprocess
import sys
import time

root, build = sys.argv[1], sys.argv[2]
SRC = root + '/lib/treebuild.c'
orig=open(SRC).read()
M=[
("1 IDs", "a gap consumes an ID", "\tt->gaps++;\n", "\tt->gaps++;\n\tt->id++;\n"),
("2 call opens a frame", "a near call pushes nothing", "\tcase HTR_IC_CALL:\n\t\treturn push(t, ret_ip, 0);", "\tcase HTR_IC_CALL:\n\t\treturn 0;"),
("2 far transfer opens a frame", "a far call pushes nothing", "\tcase HTR_IC_FAR_CALL:\n\t\treturn push(t, ret_ip, 1);", "\tcase HTR_IC_FAR_CALL:\n\t\treturn 0;"),
("2 async branch after a call/return", "an empty interrupt run pushes nothing", "\t\treturn push(t, ret_ip, 1);\n\t}\n\tif (top->entry_pending", "\t\treturn 0;\n\t}\n\tif (top->entry_pending"),
("2 entry from TIP.PGD", "the TIP.PGD's IP is not the entry", "g->ip &&\n\t    top->entry_pending", "0 && g->ip &&\n\t    top->entry_pending"),
("2 entry unknown when not seen", "a pending entry survives the gap", "\tt->st[t->depth - 1].entry_pending = 0;\n\tif (!t->folded)", "\tif (!t->folded)"),
("2 entry held by an interrupt", "held_at ignored", "\t\ttop->held_at = g->ip;\n", "\t\ttop->held_at = 0;\n"),
("2 no traced instruction, no block", "an empty frame is emitted", "\tif (f->first > last)\n\t\treturn 0;\n", "\tif (f->first > last + 1)\n\t\treturn 0;\n"),
("3 late start", "late_return does nothing", "\tstruct frame top = t->st[0];\n\n", "\tstruct frame top = t->st[0];\n\n\treturn 0;\n"),
("3 late block carries gap", "no gap carried into the new top-level frame", "HTR_BLOCK_LATE | (top.flags & HTR_BLOCK_GAP);", "HTR_BLOCK_LATE;"),
("3 L unknown closes innermost", "a return before a gap waits for the resume", "if (t->ret_pending && (rc = land_return(t, async ? g->ip : 0)) < 0)", "if (0 && t->ret_pending && (rc = land_return(t, async ? g->ip : 0)) < 0)"),
("3 L = outer return address", "the frames above are not flagged unwound", "kernel_call(t, i) ? 0 : HTR_BLOCK_UNWOUND);", "0);"),
("3 exception: interrupt's call (Go)", "kernel_call ignored", "kernel_call(t, i) ? 0 : HTR_BLOCK_UNWOUND);", "HTR_BLOCK_UNWOUND);"),
("3 L inside an outer frame's function", "not looked for", "\ti = inside_frame(t, t->depth - 1, to);\n\tif (i < t->depth)", "\ti = inside_frame(t, t->depth - 1, to);\n\tif (0 && i < t->depth)"),
("3 exception: callback returning into its caller", "always unwound", "i == t->depth - 2 &&\n\t\t\t\t  !t->st[t->depth - 1].ret_ip ? 0 :", "0 ? 0 :"),
("3 a return to an entry never counts", "entries count as inside", "if (!func_of(t, ip, &ent, &fn) || ip == ent)\n\t\treturn t->depth;", "if (!func_of(t, ip, &ent, &fn))\n\t\treturn t->depth;"),
("3 late caller", "no late caller", "\tif (!t->st[t->depth - 1].ret_ip && inside_other(", "\tif (0 && !t->st[t->depth - 1].ret_ip && inside_other("),
("3 otherwise the innermost closes", "nothing closes", "the innermost frame returned. */\n\treturn pop(t, last, 0);", "the innermost frame returned. */\n\treturn 0;"),
("3 function after a jump to an entry", "the frame keeps its function", "\t\tif (top->func != HTR_FUNC_NONE)\n\t\t\ttop->anchor = to;\n\t\ttop->fn = fn;\n\t\ttop->fn_known = 1;\n", ""),
("3a jump to the innermost return address", "ignored", "\tif (top->ret_ip == to)\n\t\treturn pop(t, last, 0);\n\ti = outer_ret_match", "\ti = outer_ret_match"),
("3a jump to an outer return address", "the matching frame stays open", "return pop_to(t, i - 1, last, HTR_BLOCK_UNWOUND);\n\tif (!func_of(t, to", "return pop_to(t, i, last, HTR_BLOCK_UNWOUND);\n\tif (!func_of(t, to"),
("3a jump into an outer frame's function", "ignored", "return i < t->depth ? pop_to(t, i, last, HTR_BLOCK_UNWOUND) : 0;", "return 0;"),
("3a jump within S's function", "not exempt", "\tif (func_of(t, t->jmp_src, &sentry, &sfn) && sfn == fn)\n\t\treturn 0;\n", ""),
("4 gap flags every open frame", "only the innermost", "\tfor (i = 0; i < t->depth; i++)\n\t\tif (t->st[i].first < t->id || !async)", "\tfor (i = t->depth - 1; i < t->depth; i++)\n\t\tif (t->st[i].first < t->id || !async)"),
("4 a callee an interrupt delays loses nothing", "flagged anyway", "if (t->st[i].first < t->id || !async)", "if (1)"),
("4 async disable opens a far frame", "no far frame", "if (async && (rc = push(t, g->ip, 1)) < 0)", "if (0 && async && (rc = push(t, g->ip, 1)) < 0)"),
("4 R = an open frame's return address", "not looked for", "\tfor (i = t->depth - 1; i >= 1; i--)\n\t\tif (t->st[i].ret_ip == ip)", "\tfor (i = t->depth - 1; 0 && i >= 1; i--)\n\t\tif (t->st[i].ret_ip == ip)"),
("4 after an overflow nothing else", "treated as a disable", "\tif (t->gap.kind != HTR_GAP_DISABLED)\n\t\treturn 0;\n", "\tif (t->gap.kind != HTR_GAP_DISABLED && t->gap.kind != HTR_GAP_OVERFLOW)\n\t\treturn 0;\n"),
("4 error: R inside an open frame's function", "closes unwound", "\tif (i < t->depth)\n\t\treturn pop_to(t, i, last, HTR_BLOCK_IMPLICIT);\n\t/* A function a traced", "\tif (i < t->depth)\n\t\treturn pop_to(t, i, last, HTR_BLOCK_UNWOUND);\n\t/* A function a traced"),
("4 error: innermost frame included (depth bounded)", "innermost excluded", "\ti = frame_in(t, t->depth, fn);", "\ti = frame_in(t, t->depth - 1, fn);"),
("4 error: R at a function's entry", "no callback", "\tif (func_known(t, ip) || (sym && ip == ent))\n\t\treturn push_at(t, ip);", "\tif (0)\n\t\treturn push_at(t, ip);"),
("4 error: R inside a function no open frame is in", "no late frame", "\tif ((rc = push(t, 0, 0)) < 0 || t->folded)\n\t\treturn rc;\n\tf = &t->st[t->depth - 1];\n\tf->callback = 1;", "\treturn 0;\n\tf = &t->st[t->depth - 1];\n\tf->callback = 1;"),
("4 error: called again from an open frame's function", "callers ignored", "(i = caller_frame(t, idx)) < t->depth &&", "(i = t->depth) < t->depth &&"),
("4 error: without symbols the frame goes on", "a callback instead", "\tif (!sym)\n\t\treturn 0;\n", "\tif (!sym)\n\t\treturn push_at(t, ip);\n"),
("4 sync disable out of a callback", "the callback stays open", "if (!t->gap.async && t->depth > 1 && t->st[t->depth - 1].callback) {", "if (0 && !t->gap.async && t->depth > 1 && t->st[t->depth - 1].callback) {"),
("4 R inside an open frame's function (disable)", "closes implicit", "\tif (i < t->depth)\n\t\treturn pop_to(t, i, last, HTR_BLOCK_UNWOUND);\n\t/* At a function's entry", "\tif (i < t->depth)\n\t\treturn pop_to(t, i, last, HTR_BLOCK_IMPLICIT);\n\t/* At a function's entry"),
("4 R at a function's entry (disable)", "no callback", "\tif (func_known(t, ip) ||\n\t    (func_of(t, ip, &ent, &fn) && ip == ent))", "\tif (0 && (func_known(t, ip) ||\n\t    (func_of(t, ip, &ent, &fn) && ip == ent)))"),
("4 a far frame is open", "stays open", "\t\tif (t->st[i].far)\n\t\t\treturn pop_to(t, i - 1, last, HTR_BLOCK_IMPLICIT);", "\t\tif (0 && t->st[i].far)\n\t\t\treturn pop_to(t, i - 1, last, HTR_BLOCK_IMPLICIT);"),
("4 sync disable: a callback at R", "none", "\tif (!t->gap.async)\n\t\treturn push_at(t, ip);\n\treturn 0;", "\tif (0)\n\t\treturn push_at(t, ip);\n\treturn 0;"),
("4 untraced far frame is no block", "emitted as a block", "\tif (f->far && f->func == HTR_FUNC_NONE && t->depth > 1) {", "\tif (0 && f->far && f->func == HTR_FUNC_NONE && t->depth > 1) {"),
("5 end: truncated", "no flag", "\t\trc = pop(t, last, HTR_BLOCK_TRUNCATED);", "\t\trc = pop(t, last, 0);"),
("6 depth limit", "one frame more", "if (t->folded || t->depth > HTR_TB_MAX_DEPTH) {", "if (t->folded || t->depth > HTR_TB_MAX_DEPTH + 1) {"),
("6 folded calls flag gap", "no flag", "\t\tt->st[t->depth - 1].flags |= HTR_BLOCK_GAP;\n\t\treturn 0;", "\t\treturn 0;"),
("6 runaway counted", "not counted", "t->runaways += g->code == HTR_GAP_CODE_RUNAWAY;", "t->runaways += 0;"),
("time after an error", "the resumed time applies after the gap", "\t\tt->err_tsc_pending = 1;\n", "\t\tt->err_tsc_pending = 0;\n"),
("time of a delayed callee", "time_entry at any time", "if (t->depth > 1 && top->entry_pending && top->first == t->id)", "if (t->depth > 1)"),
]
only = sys.argv[3:]
survivors = 0
try:
    for rule, what, old, new in M:
        if only and not any(o in rule for o in only): continue
        n = orig.count(old)
        if n != 1:
            print(f"!! {rule}: pattern found {n} times")
            survivors += 1
            continue
        open(SRC,'w').write(orig.replace(old,new))
        b = subprocess.run(['ninja', '-C', build, 'tests/test_treebuild'],capture_output=True,text=True)
        if b.returncode:
            print(f"!! {rule}: build failed\n{b.stdout[-2000:]}")
            survivors += 1
            continue
        t0=time.time()
        r = subprocess.run([build + '/tests/test_treebuild', '--jobs=8'],capture_output=True,text=True)
        dt=time.time()-t0
        fails = sorted(set(re.findall(r'\[FAIL\] treebuild::(\S+?):', r.stderr)))
        crash = re.findall(r'treebuild::(\S+?): CRASH', r.stderr)
        named = 'tree rule' in r.stderr
        if not fails or (rule[0].isdigit() and not named):
            survivors += 1
        print(f"{rule} | {what} | rc={r.returncode} {dt:.1f}s named={named} | fail: {', '.join(fails)} {('CRASH: '+','.join(crash)) if crash else ''}")
finally:
    open(SRC,'w').write(orig)
    subprocess.run(['ninja', '-C', build, 'tests/test_treebuild'],capture_output=True)
sys.exit(1 if survivors else 0)

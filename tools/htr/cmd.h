/* htr command table and shared helpers. */
#ifndef HTR_TOOL_CMD_H
#define HTR_TOOL_CMD_H

#include <stdint.h>
#include <stdio.h>

/* Exit codes of every htr command (listed in README.md). */
#define HTR_EXIT_OK 0
#define HTR_EXIT_FAIL 1
#define HTR_EXIT_USAGE 2

struct htr_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *desc;
};

int cmd_build(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_gaps(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_insns(int argc, char **argv);
int cmd_find(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_record(int argc, char **argv);

struct htr_file;
struct htr_analysis;

/* "htr: CMD: " + message + newline on stderr; returns HTR_EXIT_FAIL. */
int fail(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;
/* As fail(), plus "try 'htr CMD --help'"; returns HTR_EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;
/* The usage error for getopt's answer @c ('?', or ':' when the option
 * string starts with ':') on @argv: "unknown option '-x'" or "--opt needs
 * a value", naming the option as typed.  Returns HTR_EXIT_USAGE. */
int option_error(const char *cmd, int c, char **argv);
/* Parse an unsigned number (0x.. hex or decimal).  Returns 0 or -1. */
int parse_u64(const char *s, uint64_t *out);
struct htr_open_opts;
/* htr_file_open() of @path (@oo may be NULL) into *@f; on failure one
 * line on stderr (saying what the file is when htr reads it otherwise:
 * a perf.data, a trace, an ELF) and -1; *@f may still need closing. */
int open_htr(const char *cmd, const char *path,
	     const struct htr_open_opts *oo, struct htr_file **f);
/* Parse a duration: a whole number, bare (*@unit 0: the output's unit)
 * or followed by ns, us, ms or s (*@unit 1, *@out in ns).  Returns 0 or
 * -1. */
int parse_duration(const char *s, uint64_t *out, int *unit);
/* Parse a byte count: a number with an optional K, M or G (powers of
 * 1024).  Returns 0 or -1. */
int parse_bytes(const char *s, uint64_t *out);
/* Parse two durations (as parse_duration()) as START-END.  Returns 0 or
 * -1 (the order is the caller's to check). */
int parse_range(const char *s, uint64_t *start, uint64_t *end);
/* Where a command starts, in the CLI's one vocabulary of places: --block
 * N, a block index as find, top (SLOWEST) and dump --json print it, or
 * --insn ID, an instruction ID as dump, gaps and insns print it (--from
 * ID is --insn's older name). */
struct place {
	int kind;               /* 0 (none given), 'b' or 'i' */
	uint64_t n;
};
/* Take --@opt ("block", "insn" or "from") @arg into @p.  Returns 0, or
 * HTR_EXIT_USAGE after one line: a bad number, or a second place. */
int place_parse(const char *cmd, struct place *p, const char *opt,
		const char *arg);
struct htr_file;
/* The block @p names in @f (read from @path) into *@block: HTR_NONE (the
 * whole tree) when none was given, for --insn the deepest block that
 * contains the instruction.  Returns 0, or HTR_EXIT_FAIL after one line
 * naming @path and the place. */
int place_block(const char *cmd, const char *path,
		const struct htr_file *f, const struct place *p,
		uint32_t *block);

/* Open the analyses of @f (HTR_ANALYZE_* @what) into *@a; when the
 * sidecar cannot be used, say so once on stderr.  Returns 0, or -1 after
 * printing the error (the caller exits with HTR_EXIT_FAIL; *@a is NULL). */
int open_analysis(const char *cmd, struct htr_file *f, unsigned what,
		  struct htr_analysis **a);
/* One line for a failed analysis call on @f: the library's message, with
 * the .htr path in front when the message does not name it.  Returns
 * HTR_EXIT_FAIL. */
int analysis_fail(const char *cmd, const struct htr_file *f,
		  const struct htr_analysis *a, int err);
/* The unit durations are printed in: ns when the file knows perf's clock
 * (built from a perf.data) unless the user asked for --ticks, else TSC
 * ticks. */
struct units {
	const struct htr_file *f;
	int ns;
};
void units_init(struct units *u, const struct htr_file *f, int ticks);
/* @ticks in the unit of @u. */
uint64_t units_of(const struct units *u, uint64_t ticks);
/* "ns" or "ticks". */
const char *units_name(const struct units *u);
/* For a file built from a perf.data: "# thread TID (pid PID, COMM)" and,
 * when @u is not NULL, ", times in UNIT", on its own line on stdout.
 * Nothing for other files. */
void thread_line(const struct htr_file *f, const struct units *u);


#endif

/*
 * record-iptcount TRACE [--elf FILE@BASE]... [--cpuid-0x15-eax N]
 *                 [--cpuid-0x15-ebx N]
 *
 * What libipt's instruction-flow decoder makes of a raw trace with the
 * image given, without lib/: ref_tree.c decodes it (pt_insn_*, a gap and
 * the next PSB at every error).  Prints one line,
 *   insns N errors E depth D
 * N the instructions delivered, E the decode errors, D the reference
 * tree's depth (for information: the tests assert on N and E only).
 * Exit 0, or 2 when an input cannot be read.  build.args' lines are the
 * arguments (other options are ignored), so a test can drop the --elf of
 * the modules it withholds.
 */
#include "ref_tree.h"

#include <intel-pt.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *slurp_file(const char *path, size_t *size)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!fp)
		return NULL;
	if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) > 0 &&
	    fseek(fp, 0, SEEK_SET) == 0 && (buf = malloc((size_t) n)) &&
	    fread(buf, 1, (size_t) n, fp) == (size_t) n) {
		*size = (size_t) n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(fp);
	return buf;
}

static size_t depth_of(const struct ref_tree *t, size_t i)
{
	size_t d = 1;

	for (int64_t p = t->blocks[i].parent; p >= 0; p = t->blocks[p].parent)
		d++;
	return d;
}

int main(int argc, char **argv)
{
	struct ref_config cfg;
	struct ref_tree t;
	struct pt_image *img;
	char err[256];
	uint8_t *trace;
	size_t size = 0, errors = 0, depth = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: record-iptcount TRACE [--elf FILE@BASE]...\n");
		return 2;
	}
	trace = slurp_file(argv[1], &size);
	img = pt_image_alloc(NULL);
	if (!trace || !img) {
		fprintf(stderr, "record-iptcount: %s: cannot read it\n", argv[1]);
		return 2;
	}
	ref_config_init(&cfg);
	for (int i = 2; i + 1 < argc; i += 2) {
		const char *opt = argv[i], *val = argv[i + 1];

		if (strcmp(opt, "--elf") == 0) {
			const char *at = strrchr(val, '@');
			char path[4096];
			uint64_t base;

			if (!at || (size_t) (at - val) >= sizeof(path)) {
				fprintf(stderr, "record-iptcount: --elf %s: want FILE@BASE\n", val);
				return 2;
			}
			memcpy(path, val, (size_t) (at - val));
			path[at - val] = 0;
			base = strtoull(at + 1, NULL, 0);
			if (ref_image_add_elf(img, path, 1, base, err,
					      sizeof(err)) < 0) {
				fprintf(stderr, "record-iptcount: %s\n", err);
				return 2;
			}
		} else if (strcmp(opt, "--cpuid-0x15-eax") == 0) {
			cfg.cpuid_0x15_eax = (uint32_t) strtoul(val, NULL, 0);
		} else if (strcmp(opt, "--cpuid-0x15-ebx") == 0) {
			cfg.cpuid_0x15_ebx = (uint32_t) strtoul(val, NULL, 0);
		}
	}
	if (ref_tree_build(trace, size, img, &cfg, &t, err, sizeof(err)) < 0) {
		fprintf(stderr, "record-iptcount: %s: %s\n", argv[1], err);
		return 2;
	}
	for (size_t i = 0; i < t.ngaps; i++)
		errors += t.gaps[i].kind == REF_GAP_ERROR;
	for (size_t i = 0; i < t.nblocks; i++) {
		size_t d = depth_of(&t, i);

		if (d > depth)
			depth = d;
	}
	printf("insns %" PRIu64 " errors %zu depth %zu\n", t.insns, errors,
	       depth);
	ref_tree_free(&t);
	pt_image_free(img);
	free(trace);
	return 0;
}

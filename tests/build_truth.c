#include "build_truth.h"
#include "same_htr.h"

#include <criterion/criterion.h>
#include <string.h>

void build_with_truth(const struct truth *t, const char *elf_spec,
		      const char *trace, const char *out,
		      struct htr_build_stats *st)
{
	struct htr_build_opts bo;
	struct htr_builder *b;
	int rc;

	htr_build_opts_init(&bo);
	bo.cpuid_0x15_eax = t->cpuid_eax;
	bo.cpuid_0x15_ebx = t->cpuid_ebx;
	bo.mtc_freq = (uint8_t) t->mtc_freq;
	bo.nom_freq = (uint8_t) t->nom_freq;
	cr_assert_eq(htr_builder_alloc(&b, &bo), 0);
	rc = htr_builder_add_elf(b, elf_spec);
	cr_assert_eq(rc, 0, "%s: %s", elf_spec, htr_builder_last_error(b));
	if (st) {
		memset(st, 0, sizeof(*st));
		st->size = sizeof(*st);
	}
	rc = htr_builder_run(b, trace, out, st, st ? sizeof(*st) : 0);
	cr_assert_eq(rc, 0, "%s: %s", trace, htr_builder_last_error(b));
	htr_builder_free(b);
	htr_check_parallel(&bo, elf_spec, NULL, trace, out);
}

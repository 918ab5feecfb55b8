/* Tests: build an .htr from a synthesized trace the way a user would, with
 * the recording's timing parameters (here: the ones the truth lists). */
#ifndef HTR_TEST_BUILD_TRUTH_H
#define HTR_TEST_BUILD_TRUTH_H

#include "htr/htr.h"
#include "truth.h"

/* Build @trace with the ELF @elf_spec ("FILE[@BASE]") into @out; asserts
 * success.  @st (may be NULL) receives the build's statistics. */
void build_with_truth(const struct truth *t, const char *elf_spec,
		      const char *trace, const char *out,
		      struct htr_build_stats *st);

#endif

#include <htr/htr.h>

#include <criterion/criterion.h>
#include <string.h>

Test(error, every_code_has_a_phrase)
{
	int code;

	cr_expect_str_eq(htr_errstr(HTR_OK), "success");
	for (code = HTR_ERR_CALLBACK; code < 0; code++)
		cr_expect_str_neq(htr_errstr(code), "unknown error",
				  "code %d", code);
	cr_expect_str_eq(htr_errstr(-14), "unknown error");
	cr_expect_str_eq(htr_errstr(HTR_ERR_USER), "unknown error");
	cr_expect_str_eq(htr_errstr(5), "unknown error");
}

/* meson's project version reaches the test as a define of its own, not
 * through the library's configuration header. */
Test(error, version_is_the_project_version)
{
	cr_expect_str_eq(htr_version(), HTR_TEST_PROJECT_VERSION);
}

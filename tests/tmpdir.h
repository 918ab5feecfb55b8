/* A fresh temporary directory per test suite, removed afterwards.
 * HTR_TEST_TMPDIR(suite) defines `dir` (the path) and the suite. */
#ifndef HTR_TEST_TMPDIR_H
#define HTR_TEST_TMPDIR_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#define HTR_TEST_TMPDIR(suite)                                          \
	static char dir[] = "/tmp/htr-test-" #suite "-XXXXXX";         \
	static void suite##_setup(void)                                 \
	{                                                               \
		cr_assert_not_null(mkdtemp(dir));                       \
	}                                                               \
	static void suite##_teardown(void)                              \
	{                                                               \
		char cmd[128];                                          \
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);           \
		cr_expect_eq(system(cmd), 0);                           \
	}                                                               \
	TestSuite(suite, .init = suite##_setup, .fini = suite##_teardown)

#endif

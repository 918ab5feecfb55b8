/* For tests/test_lldb.sh (htr dump/find/goto --lines): built with -g -O2
 * and its symbol table stripped, so that scramble's name is only in the
 * DWARF; scramble stays out of line (noinline) and begins with mix, inlined
 * (always_inline), so its entry lies inside an inlined frame. */
#include <stdio.h>

static inline __attribute__((always_inline)) unsigned mix(unsigned x,
							   unsigned y)
{
	return (x ^ (y * 2654435761u)) * 31u;
}

__attribute__((noinline)) static unsigned scramble(unsigned seed, int n)
{
	unsigned acc = mix(seed, (unsigned) n);
	int i;

	for (i = 0; i < n; i++)
		acc = mix(acc, (unsigned) i) + (acc >> 7);
	return acc;
}

int main(int argc, char **argv)
{
	unsigned r = 0;
	int i;

	(void) argv;
	for (i = 0; i < 3; i++)
		r += scramble((unsigned) (argc + i), 50 + i);
	printf("%u\n", r);
	return 0;
}

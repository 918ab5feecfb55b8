/*
 * The real program the benchmarks record under qemu-user (record_speed.sh,
 * build_speed.sh): a loop over a small function, about 10 instructions an
 * iteration at -O1, with a libc call every 2^16 iterations.
 * usage: spin ITERATIONS
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static unsigned step(unsigned x, unsigned i)
{
	return (x * 33u) ^ (i >> 3);
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 0, i;
	unsigned x = (unsigned) argc;

	for (i = 0; i < n; i++) {
		x = step(x, (unsigned) i);
		if ((i & 0xffff) == 0)
			x += (unsigned) abs((int) x);
	}
	printf("%u\n", x);
	return 0;
}

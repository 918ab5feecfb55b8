/* Built -O0 -no-pie and traced from work() to the end of tailer() alone
 * (htr record --filter START-END): the direct calls and jumps out of that
 * range.  work() makes a direct jump inside it before its last call out;
 * tailer() (optimized: a tail call) leaves by a jump. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline, noipa)) int inc(int x) { return x + 1; }
__attribute__((noinline, noipa)) int dbl(int x) { return 2 * x; }

__attribute__((noinline, noipa)) int work(int x)
{
	int r;

	if (x & 1)
		r = inc(x);
	else
		r = dbl(x);
	return inc(r) + 3;
}

__attribute__((noinline, noipa, optimize("O2"))) int tailer(int x)
{
	if (x & 2)
		return inc(x);
	return dbl(x + 1);
}

int main(int argc, char **argv)
{
	int acc = 0, i, n = argc > 1 ? atoi(argv[1]) : 10;

	for (i = 0; i < n; i++)
		acc += work(i) + tailer(i);
	/* The trace ends in a return, not while tracing is off. */
	acc += work(acc);
	printf("%d\n", acc);
	return 0;
}

/* A first hour's program (issue 36): recursion, a qsort callback and a
 * hot loop.  tests/test_viewers.py records it and reads the exports back
 * with the viewers' own importers. */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned sink;

__attribute__((noinline)) static int cmp(const void *a, const void *b)
{
	int x = *(const int *) a, y = *(const int *) b;

	return (x > y) - (x < y);
}

__attribute__((noinline)) static unsigned fib(unsigned n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) static void hot_loop(unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		sink += i * i;
}

int main(void)
{
	int v[40];
	unsigned i;

	for (i = 0; i < 40; i++)
		v[i] = (int) ((i * 7919u) % 101u);
	qsort(v, 40, sizeof(v[0]), cmp);
	hot_loop(2000);
	printf("%d %d %u\n", v[0], v[39], fib(10));
	return 0;
}

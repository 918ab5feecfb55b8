/* Recursion, calls through function pointers, tail calls. */
#include <stdio.h>
#include <stdlib.h>

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static int twice(int x) { return 2 * x; }
static int plus1(int x) { return x + 1; }
static int (*const ops[])(int) = { twice, plus1 };

/* At -O2 the calls in tail position become jumps. */
__attribute__((noinline)) static int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int tail(int x)
{
	if (x & 1)
		return leaf(x);
	return leaf(x + 1);
}

int main(int argc, char **argv)
{
	int acc = fib(argc + 9), i;

	(void) argv;
	for (i = 0; i < 20; i++)
		acc += ops[(acc + i) & 1](i);
	for (i = 0; i < 5; i++)
		acc += tail(acc + i);
	printf("%d\n", acc);
	return 0;
}

/* setjmp/longjmp across three frames. */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf env;
static volatile int depth;

__attribute__((noinline)) static void f3(int x)
{
	depth = 3;
	if (x > 0)
		longjmp(env, x);
}
__attribute__((noinline)) static void f2(int x) { depth = 2; f3(x); depth = 20; }
__attribute__((noinline)) static void f1(int x) { depth = 1; f2(x); depth = 10; }

__attribute__((noinline)) static int run(int x)
{
	int r = setjmp(env);

	if (r == 0) {
		f1(x);
		return -1;
	}
	return r;
}

int main(void)
{
	int a = run(1), b = run(2);

	printf("%d %d %d\n", a, b, depth);
	return 0;
}

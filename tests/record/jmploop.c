/* longjmp out of five frames, N times (argv[1], default 20): the tree's
 * depth must not grow with N.  Nothing else runs in the loop, so the
 * recording stays small (qemu-user logs every instruction). */
#include <setjmp.h>
#include <stdlib.h>

static jmp_buf env;
static volatile int sink;

__attribute__((noinline)) static void f5(int i)
{
	sink = i;
	longjmp(env, 1);
}
__attribute__((noinline)) static void f4(int i) { f5(i); sink = 4; }
__attribute__((noinline)) static void f3(int i) { f4(i); sink = 3; }
__attribute__((noinline)) static void f2(int i) { f3(i); sink = 2; }
__attribute__((noinline)) static void f1(int i) { f2(i); sink = 1; }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20;
	/* volatile: setjmp returns twice, a register copy would be stale */
	volatile int i, jumps = 0;

	for (i = 0; i < n; i++) {
		if (setjmp(env) == 0)
			f1(i);
		else
			jumps++;
	}
	return jumps == n ? 0 : 1;
}

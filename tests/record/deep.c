/* A recursion DEPTH deep (argument, default 20000) left three times by
 * longjmp from its bottom, then once normally; a handler left by
 * siglongjmp.  The recorder's truth and the tree must agree at any depth
 * (tools/bench/record_speed.sh records it 10^5 deep). */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jmp_buf env;
static sigjmp_buf senv;
static volatile int jumps;

__attribute__((noinline)) static int down(int n)
{
	int r;

	if (n == 0) {
		if (jumps < 3) {
			jumps++;
			longjmp(env, 1);
		}
		return 0;
	}
	r = down(n - 1);
	/* Keeps -O2 from turning the recursion into a loop. */
	__asm__ volatile("" : "+r"(r));
	return r + 1;
}

static void on_signal(int s)
{
	(void) s;
	siglongjmp(senv, 1);
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 20000, r = 0;
	struct sigaction sa;

	setjmp(env);
	if (jumps < 3)
		r = down(depth);
	r += down(depth / 2);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	if (sigsetjmp(senv, 1) == 0)
		raise(SIGUSR1);
	printf("%d %d\n", r, jumps);
	return 0;
}

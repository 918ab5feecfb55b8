/* A SIGSEGV handler that skips the faulting instruction: a synchronous
 * signal, after which sigreturn resumes past the instruction that raised
 * it, a jump, no call (preempt.c's handlers make the code call one). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <ucontext.h>

static volatile int faults;

static void on_segv(int s, siginfo_t *si, void *ctx)
{
	greg_t *g = ((ucontext_t *) ctx)->uc_mcontext.gregs;

	(void) s;
	(void) si;
	faults++;
	g[REG_RIP] += 2;        /* movl (%rax), %eax is 2 bytes */
}

__attribute__((noinline)) static int probe(long p)
{
	int v = 7;

	__asm__ volatile("movq %1, %%rax\n\t"
			 "movl (%%rax), %%eax\n\t"
			 "movl %%eax, %0"
			 : "+r"(v) : "r"(p) : "rax", "memory");
	return v;
}

int main(void)
{
	struct sigaction sa = { 0 };
	int i, s = 0;

	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	for (i = 0; i < 20; i++)
		s += probe(i % 2 ? 0 : (long) &faults);
	printf("%d faults, %d\n", faults, s > 0);
	return 0;
}

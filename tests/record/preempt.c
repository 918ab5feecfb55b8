/* Signals to threads that are running, as Go's runtime sends them to
 * preempt goroutines: qemu's log does not say which thread a signal went
 * to, and several threads log at once.  Every other SIGUSR1 handler
 * moves the resume point the way Go's asynchronous preemption does (the
 * interrupted code first calls injected(), which returns to where the
 * signal came); SIGURG, whose default action is to ignore it, comes in
 * between. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <ucontext.h>

#define NWORK 3
#define ROUNDS 90

static volatile int stop;
static int started;
static volatile unsigned long hits[NWORK];
static unsigned long bumps;
static __thread int me;

__attribute__((noinline)) static unsigned long mix(unsigned long x)
{
	return x * 2654435761u + 1;
}

__attribute__((noinline)) void bump(void)
{
	__atomic_add_fetch(&bumps, 1, __ATOMIC_RELAXED);
}

/* Entered in the middle of any code with the resume address on top of a
 * stack 128 bytes below the interrupted one (its red zone kept): keeps
 * the flags and the registers a call may change, aligns the stack, and
 * returns past the red zone. */
void injected(void);
__asm__(".text\n"
	".globl injected\n"
	".type injected, @function\n"
	"injected:\n"
	"	pushfq\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	and $-16, %rsp\n"
	"	push %rax\n	push %rcx\n	push %rdx\n	push %rsi\n"
	"	push %rdi\n	push %r8\n	push %r9\n	push %r10\n"
	"	push %r11\n	push %r11\n"
	"	call bump\n"
	"	pop %r11\n	pop %r11\n	pop %r10\n	pop %r9\n"
	"	pop %r8\n	pop %rdi\n	pop %rsi\n	pop %rdx\n"
	"	pop %rcx\n	pop %rax\n"
	"	mov %rbp, %rsp\n"
	"	pop %rbp\n"
	"	popfq\n"
	"	ret $128\n"
	".size injected, .-injected\n");

static void on_usr1(int s, siginfo_t *si, void *ctx)
{
	greg_t *g = ((ucontext_t *) ctx)->uc_mcontext.gregs;

	(void) s;
	(void) si;
	/* Not at a function's first instruction (a signal right after the
	 * call, to mix from work or to bump from an injected() that the
	 * previous signal started): the recorder's truth then loses the
	 * call (tools/record/README.md, Limits). */
	if (++hits[me] % 2 && g[REG_RIP] != (greg_t) (uintptr_t) mix &&
	    g[REG_RIP] != (greg_t) (uintptr_t) bump) {
		g[REG_RSP] -= 128 + 8;
		*(greg_t *) g[REG_RSP] = g[REG_RIP];
		g[REG_RIP] = (greg_t) (uintptr_t) injected;
	}
}

static void *work(void *arg)
{
	unsigned long x = (uintptr_t) arg;

	me = (int) (uintptr_t) arg;
	__atomic_add_fetch(&started, 1, __ATOMIC_RELEASE);
	while (!stop)
		x = mix(x);
	return (void *) (uintptr_t) (x & 1);
}

int main(void)
{
	struct timespec nap = { 0, 200000 };
	struct sigaction sa = { 0 };
	pthread_t th[NWORK];
	unsigned long sent[NWORK] = { 0 }, got = 0;
	int i;

	sa.sa_sigaction = on_usr1;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	for (i = 0; i < NWORK; i++)
		pthread_create(&th[i], NULL, work, (void *) (uintptr_t) i);
	/* A signal before a thread knows its number would count for
	 * thread 0, and the wait for it would never end. */
	while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) < NWORK)
		nanosleep(&nap, NULL);
	for (i = 0; i < ROUNDS; i++) {
		int k = i % NWORK;

		if (i % 5 == 4) {
			pthread_kill(th[k], SIGURG);
			continue;
		}
		pthread_kill(th[k], SIGUSR1);
		sent[k]++;
		while (hits[k] < sent[k])
			nanosleep(&nap, NULL);
	}
	stop = 1;
	for (i = 0; i < NWORK; i++) {
		pthread_join(th[i], NULL);
		got += hits[i];
	}
	printf("threads %d\nsignals %lu injected %lu\n", NWORK, got,
	       __atomic_load_n(&bumps, __ATOMIC_RELAXED));
	return 0;
}

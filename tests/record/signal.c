/* A signal handler: raise() (delivered at a syscall) and SIGALRM
 * (delivered between any two instructions). */
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>

static volatile sig_atomic_t hits;

__attribute__((noinline)) static int work(int x) { return x * 7 + 3; }

static void on_signal(int s)
{
	hits += work(s) > 0;
}

int main(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 20000 } };
	unsigned long spin = 0;
	int v = 0;

	signal(SIGUSR1, on_signal);
	signal(SIGALRM, on_signal);
	raise(SIGUSR1);
	setitimer(ITIMER_REAL, &it, NULL);
	while (hits < 2) {
		v = work(v) & 0xffff;
		spin++;
	}
	printf("%d %d\n", (int) hits, v > -1);
	return 0;
}

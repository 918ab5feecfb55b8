/* Four worker threads that call, return and make syscalls, for CPU-wide
 * recordings with more threads than CPUs (test_perf.sh). */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) static long fib(long n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static void *worker(void *arg)
{
	long *v = arg, i, s = 0;

	for (i = 0; i < 8; i++) {
		s += fib(*v + i % 3);
		s += getppid() > 0;     /* a syscall: the CPU is free */
	}
	*v = s;
	return NULL;
}

int main(void)
{
	pthread_t t[4];
	long v[4] = { 8, 9, 10, 11 };
	int i;

	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, &v[i]);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("%ld %ld %ld %ld\n", v[0], v[1], v[2], v[3]);
	return 0;
}

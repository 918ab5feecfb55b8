/* Two threads. */
#include <pthread.h>
#include <stdio.h>

__attribute__((noinline)) static long sum(long n)
{
	long s = 0, i;

	for (i = 0; i < n; i++)
		s += i;
	return s;
}

static void *worker(void *arg)
{
	long *v = arg;

	*v = sum(*v);
	return NULL;
}

int main(void)
{
	pthread_t t;
	long a = 300, b = 500;

	pthread_create(&t, NULL, worker, &a);
	b = sum(b);
	pthread_join(t, NULL);
	printf("%ld %ld\n", a, b);
	return 0;
}

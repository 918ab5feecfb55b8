/* Threads created after others exited: qemu-user hands an exited thread's
 * CPU index to the next thread it creates, and each must still be a thread
 * of its own in the recording (test_record.sh, test_perf.sh).  Every round
 * joins its threads before the next starts, so the reuse does not depend
 * on timing.  Prints how many threads it created. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static volatile long sink;

/* A call chain as deep as the thread's number, so that each thread's tree
 * differs; the store after the call keeps -O2 from making it a loop. */
__attribute__((noinline)) static long depth(long n)
{
	long r;

	if (!n)
		return getppid() > 0;
	r = depth(n - 1) + 1;
	sink = r;
	return r;
}

static void *worker(void *arg)
{
	long *v = arg;

	*v = depth(*v);
	return NULL;
}

int main(void)
{
	/* threads per round: one at a time, then two at once (the second
	 * needs a new index only the first time) */
	static const int rounds[] = { 1, 1, 2, 1, 2 };
	pthread_t t[2];
	long v[2], sum = 0;
	int r, i, created = 0;

	for (r = 0; r < (int) (sizeof(rounds) / sizeof(rounds[0])); r++) {
		for (i = 0; i < rounds[r]; i++) {
			v[i] = created + 1;
			if (pthread_create(&t[i], NULL, worker, &v[i]) != 0)
				return 1;
			created++;
		}
		for (i = 0; i < rounds[r]; i++) {
			pthread_join(t[i], NULL);
			sum += v[i];
		}
	}
	printf("threads %d sum %ld\n", created, sum);
	return 0;
}

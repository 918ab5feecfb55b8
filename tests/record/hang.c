/* A deliberate hang after some real work: htr record --ring's test
 * (tests/test_ring.sh) snapshots it with SIGUSR1 while it loops in
 * spin_forever(), reached through work() -> wait_ready() ->
 * spin_forever(), and stops it with SIGTERM.  Argument 1: rounds of work
 * first (default 200); argument 2: "sleep" makes each turn of the loop
 * sleep 1 ms (a program waiting for what never comes: little trace, so a
 * small ring still holds the calls that led there), "done" makes it
 * return instead of hanging (a finite run), else it spins. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long mix(unsigned long x)
{
	return x * 2654435761u ^ (x >> 7);
}

__attribute__((noinline)) static void round_of_work(unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		sink += mix(i + sink);
}

static int sleepy, done;

/* Waits for a flag nobody sets: the hang. */
__attribute__((noinline)) static void spin_forever(volatile int *flag)
{
	struct timespec ms = { 0, 1000000 };

	while (!*flag) {
		sink++;
		if (sleepy)
			nanosleep(&ms, NULL);
	}
}

__attribute__((noinline)) static void wait_ready(volatile int *flag)
{
	spin_forever(flag);
}

__attribute__((noinline)) static void work(unsigned rounds)
{
	static volatile int ready;
	unsigned r;

	for (r = 0; r < rounds; r++)
		round_of_work(1000);
	if (!done)
		wait_ready(&ready);
}

int main(int argc, char **argv)
{
	sleepy = argc > 2 && !strcmp(argv[2], "sleep");
	done = argc > 2 && !strcmp(argv[2], "done");
	work(argc > 1 ? (unsigned) strtoul(argv[1], NULL, 10) : 200);
	return 0;
}

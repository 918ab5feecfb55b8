/* Nested calls with calls into libc at every level, and a qsort whose
 * comparator (a callback from libc) calls deeper still, N rounds
 * (argv[1], default 20).  Built with the shared libraries withheld, every
 * call into them is a decode error, and decoding resumes at a later PSB
 * wherever the program is then: deeper, shallower, in a callback. */
#include <stdlib.h>
#include <string.h>

static volatile unsigned sink;
static char buf[64];

__attribute__((noinline)) static unsigned mix(unsigned x)
{
	for (int k = 0; k < 6; k++)
		x = x * 33u + (x >> 7);
	return x;
}

static int cmp(const void *a, const void *b)
{
	unsigned x = mix(*(const unsigned *) a), y = mix(*(const unsigned *) b);

	return (x > y) - (x < y);
}

__attribute__((noinline)) static void level4(int i)
{
	unsigned v[5];

	for (int k = 0; k < 5; k++)
		v[k] = (unsigned) (i * 7 + k * 13);
	qsort(v, 5, sizeof(v[0]), cmp);
	sink += mix(v[0]);
}

__attribute__((noinline)) static void level3(int i)
{
	memset(buf, 'a' + i % 26, (size_t) (1 + i % 40));
	buf[1 + i % 40] = 0;
	sink += (unsigned) strlen(buf) + mix((unsigned) i);
	level4(i);
	sink += mix((unsigned) i + 3);
}

__attribute__((noinline)) static void level2(int i)
{
	sink += mix((unsigned) abs(i - 300));
	level3(i);
	sink += (unsigned) strlen(buf);
}

__attribute__((noinline)) static void level1(int i)
{
	level2(i);
	sink += mix((unsigned) i);
	level2(i + 1);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20;

	for (int i = 0; i < n; i++)
		level1(i);
	return sink == 0;
}

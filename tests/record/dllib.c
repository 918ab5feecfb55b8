/* The library dlopen.c loads. */
__attribute__((noinline)) static int sq(int x) { return x * x; }

int dl_work(int n)
{
	int s = 0, i;

	for (i = 0; i < n; i++)
		s += sq(i);
	return s;
}

/* A library loaded with dlopen, called through dlsym. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	void *h;
	int (*fn)(int);

	if (argc < 2)
		return 2;
	h = dlopen(argv[1], RTLD_NOW);
	if (!h)
		return 3;
	fn = (int (*)(int)) dlsym(h, "dl_work");
	if (!fn)
		return 4;
	printf("%d\n", fn(5));
	dlclose(h);
	return 0;
}

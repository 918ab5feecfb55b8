/* Lazy PLT binding (linked with -Wl,-z,lazy): the first call of each
 * library function goes through the dynamic linker's resolver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	char buf[64];
	size_t i, n = 0;

	for (i = 0; i < 3; i++) {
		snprintf(buf, sizeof(buf), "%s-%zu", argv[0], i);
		n += strlen(buf);
		n += (size_t) abs(argc - (int) i);
	}
	printf("%zu\n", n);
	return 0;
}

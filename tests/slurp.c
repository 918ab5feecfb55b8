#include "slurp.h"

#include <stdio.h>
#include <stdlib.h>

uint8_t *htr_test_slurp(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *p = NULL;
	long n;

	if (!fp)
		return NULL;
	if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 &&
	    fseek(fp, 0, SEEK_SET) == 0 && (p = malloc((size_t) n + 1)) &&
	    fread(p, 1, (size_t) n, fp) != (size_t) n) {
		free(p);
		p = NULL;
	}
	if (p)
		*len = (size_t) n;
	fclose(fp);
	return p;
}

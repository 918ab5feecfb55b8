/* The umbrella header compiles alone under -std=c11 -pedantic -Werror. */
#include <htr/htr.h>

int main(void)
{
	return htr_errstr(HTR_ERR_CORRUPT)[0] == 'c' ? 0 : 1;
}

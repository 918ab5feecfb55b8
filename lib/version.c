#include "htr/common.h"

const char *htr_version(void)
{
	return HTR_VERSION_STRING;
}

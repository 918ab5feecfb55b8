/* The size rule (abi.h): the only implementation. */
#include "abi.h"

#include "htr/error.h"

#include <string.h>

size_t htr_abi__size_of(const void *user)
{
	size_t n = 0;

	/* The caller's struct may be unaligned for all we know. */
	if (user)
		memcpy(&n, user, sizeof(n));
	return n;
}

int htr_abi__in(void *lib, size_t lib_size, const void *user, size_t size,
		size_t size0)
{
	memset(lib, 0, lib_size);
	if (user) {
		if (size < size0 || size < sizeof(size_t))
			return HTR_ERR_INVALID;
		memcpy(lib, user, size < lib_size ? size : lib_size);
	}
	memcpy(lib, &lib_size, sizeof(lib_size));
	return 0;
}

int htr_abi__out(void *user, size_t size, const void *lib, size_t lib_size,
		 size_t size0)
{
	size_t n = size < lib_size ? size : lib_size;

	if (!user || size < size0 || size < sizeof(size_t))
		return HTR_ERR_INVALID;
	memcpy(user, lib, n);
	memcpy(user, &n, sizeof(n));
	return 0;
}

void htr_abi__init(void *user, size_t size)
{
	if (!user || size < sizeof(size_t))
		return;
	memset(user, 0, size);
	memcpy(user, &size, sizeof(size));
}

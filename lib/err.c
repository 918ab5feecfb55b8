#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int htr_err__set(struct htr_err *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return code;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return code;
}

int htr_err__sys(struct htr_err *e, const char *fmt, ...)
{
	int saved = errno;
	size_t n;
	va_list ap;

	if (!e)
		return HTR_ERR_IO;
	e->code = HTR_ERR_IO;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	n = strlen(e->msg);
	snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(saved));
	return HTR_ERR_IO;
}

void htr_err__clear(struct htr_err *e)
{
	if (e) {
		e->code = 0;
		e->msg[0] = 0;
	}
}

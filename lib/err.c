/* Errors: the phrase of each enum htr_error code (htr/error.h) and the
 * detailed message kept on a handle (err.h). */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

char *htr_err__escape(char *dst, size_t size, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *) src;
	size_t n = 0;

	if (!size)
		return dst;
	for (; *p; p++) {
		char e[9];
		size_t k = 0;

		if (*p == '\n' || *p == '\t' || *p == '\r') {
			e[k++] = '\\';
			e[k++] = *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r';
		} else if (*p < 0x20 || *p == 0x7f ||
			   (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)) {
			/* A C1 control is two bytes in UTF-8: both escaped. */
			int two = *p == 0xc2;

			do {
				e[k++] = '\\';
				e[k++] = 'x';
				e[k++] = hex[*p >> 4];
				e[k++] = hex[*p & 15];
			} while (two-- && *++p);
		} else {
			e[k++] = (char) *p;
		}
		if (n + k >= size)
			break;
		memcpy(dst + n, e, k);
		n += k;
	}
	dst[n] = '\0';
	return dst;
}

/* Every message goes through htr_err__escape(): its arguments may be
 * text from input files. */
static void set_msg(struct htr_err *e, const char *fmt, va_list ap)
{
	char raw[sizeof(e->msg)];

	vsnprintf(raw, sizeof(raw), fmt, ap);
	htr_err__escape(e->msg, sizeof(e->msg), raw);
}

int htr_err__set(struct htr_err *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return code;
	e->code = code;
	va_start(ap, fmt);
	set_msg(e, fmt, ap);
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
	set_msg(e, fmt, ap);
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

const char *htr_errstr(int code)
{
	switch (code) {
	case HTR_OK:             return "success";
	case HTR_ERR_INVALID:    return "invalid argument";
	case HTR_ERR_NOMEM:      return "out of memory";
	case HTR_ERR_IO:         return "input/output error";
	case HTR_ERR_FORMAT:     return "not an htr file";
	case HTR_ERR_VERSION:    return "unsupported htr format version";
	case HTR_ERR_CORRUPT:    return "corrupt htr file";
	case HTR_ERR_RANGE:      return "out of range";
	case HTR_ERR_NOTFOUND:   return "not found";
	case HTR_ERR_ITEROVER:   return "no more elements";
	case HTR_ERR_DECODE:     return "trace decode failed";
	case HTR_ERR_LIMIT:      return "format limit exceeded";
	case HTR_ERR_CANCELED:   return "canceled";
	case HTR_ERR_CALLBACK:   return "a callback returned a value in "
					"libhtr's error range";
	}
	return "unknown error";
}

char *htr_escape(char *dst, size_t size, const char *src)
{
	if (!dst)
		return dst;
	if (!src) {
		if (size)
			dst[0] = '\0';
		return dst;
	}
	return htr_err__escape(dst, size, src);
}

#include "htr/error.h"

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

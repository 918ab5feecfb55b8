/*
 * The walk: libipt's query decoder reads the packets; the code is walked
 * over a cache of its branches instead of libipt's block decoder
 * following every instruction.  Same sink, same events, in the same order
 * as the block decoder (decode.h) for everything it follows; anything
 * else and it gives up (HTR_DECODE_GAVE_UP) before it reports a wrong
 * event.
 */
#ifndef HTR_LIB_WALK_H
#define HTR_LIB_WALK_H

#include "decode.h"

/* As htr_decode__run(), or HTR_DECODE_GAVE_UP. */
int htr_walk__run(const struct htr_decode_cfg *cfg, struct htr_image *img,
		  const struct htr_decode_sink *sink, struct htr_err *err);

#endif

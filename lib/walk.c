#include "walk.h"

int htr_walk__run(const struct htr_decode_cfg *cfg, struct htr_image *img,
		  const struct htr_decode_sink *sink, struct htr_err *err)
{
	(void) cfg; (void) img; (void) sink; (void) err;
	return HTR_DECODE_GAVE_UP;
}

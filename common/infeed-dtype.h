/* SPDX-License-Identifier: MIT */
/*
 * Element types of samples and labels, numbered as infeed.DType in
 * proto/infeed.proto (wire.c checks that they agree).  Installed with
 * infeed.h.
 */
#ifndef INFEED_DTYPE_H
#define INFEED_DTYPE_H

enum infeed_dtype {
	INFEED_DTYPE_UINT8 = 1,
	INFEED_DTYPE_INT32 = 2,
	INFEED_DTYPE_INT64 = 3,
	INFEED_DTYPE_FLOAT16 = 4,
	INFEED_DTYPE_FLOAT32 = 5,
	INFEED_DTYPE_FLOAT64 = 6,
};

#endif /* INFEED_DTYPE_H */

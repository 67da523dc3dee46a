/* SPDX-License-Identifier: MIT */
/*
 * The protobuf codec on the framing; see wire.h for the contract.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "infeed-dtype.h"
#include "wire.h"

/* infeed-dtype.h numbers the dtypes as infeed.proto does. */
_Static_assert((int)INFEED_DTYPE_UINT8 == (int)INFEED__DTYPE__DTYPE_UINT8 &&
    (int)INFEED_DTYPE_INT32 == (int)INFEED__DTYPE__DTYPE_INT32 &&
    (int)INFEED_DTYPE_INT64 == (int)INFEED__DTYPE__DTYPE_INT64 &&
    (int)INFEED_DTYPE_FLOAT16 == (int)INFEED__DTYPE__DTYPE_FLOAT16 &&
    (int)INFEED_DTYPE_FLOAT32 == (int)INFEED__DTYPE__DTYPE_FLOAT32 &&
    (int)INFEED_DTYPE_FLOAT64 == (int)INFEED__DTYPE__DTYPE_FLOAT64,
    "infeed-dtype.h and infeed.proto disagree");

/* Cut one frame off the front of the buffer and unpack it. */
enum wire_status
wire_in_frame(struct wire_in *in, Infeed__Frame **out, char **cause)
{
	const uint8_t	*body;
	uint32_t	 flen;
	enum wire_status st;
	Infeed__Frame	*f;

	*out = NULL;
	if ((st = wire_in_next(in, &body, &flen, cause)) != WIRE_OK)
		return (st);
	f = infeed__frame__unpack(NULL, flen, body);
	wire_in_skip(in);
	if (f == NULL) {
		/* Its descriptors are no other frame's. */
		wire_in_drop_frame_fds(in);
		if (asprintf(cause, "frame of %u bytes is not a valid "
		    "infeed.Frame message", flen) == -1)
			*cause = NULL;
		return (WIRE_BAD);
	}
	if (f->msg_case == INFEED__FRAME__MSG__NOT_SET) {
		wire_in_drop_frame_fds(in);
		infeed__frame__free_unpacked(f, NULL);
		if (asprintf(cause, "frame carries no message (unknown or "
		    "empty oneof)") == -1)
			*cause = NULL;
		return (WIRE_BAD);
	}
	*out = f;
	return (WIRE_OK);
}

/* Serialise a frame behind its length header. */
uint8_t *
wire_pack(const Infeed__Frame *frame, uint32_t max_frame, size_t *len)
{
	size_t	 body;
	uint8_t	*buf;

	body = infeed__frame__get_packed_size(frame);
	if (body > max_frame) {
		errno = EMSGSIZE;
		return (NULL);
	}
	if ((buf = malloc(WIRE_HEADER_SIZE + body)) == NULL)
		return (NULL);
	wire_put_header(buf, (uint32_t)body);
	infeed__frame__pack(frame, buf + WIRE_HEADER_SIZE);
	*len = WIRE_HEADER_SIZE + body;
	return (buf);
}

/* Name a oneof case for log lines. */
const char *
wire_case_name(Infeed__Frame__MsgCase c)
{
	switch (c) {
	case INFEED__FRAME__MSG_HELLO:		return ("Hello");
	case INFEED__FRAME__MSG_WELCOME:	return ("Welcome");
	case INFEED__FRAME__MSG_ERROR:		return ("Error");
	case INFEED__FRAME__MSG_LIST_DATASETS:	return ("ListDatasets");
	case INFEED__FRAME__MSG_DATASET_LIST:	return ("DatasetList");
	case INFEED__FRAME__MSG_ATTACH:		return ("Attach");
	case INFEED__FRAME__MSG_ATTACHED:	return ("Attached");
	case INFEED__FRAME__MSG_NEXT:		return ("Next");
	case INFEED__FRAME__MSG_STEP:		return ("Step");
	case INFEED__FRAME__MSG_END_OF_DATA:	return ("EndOfData");
	case INFEED__FRAME__MSG_RELEASE:	return ("Release");
	case INFEED__FRAME__MSG_RELEASED:	return ("Released");
	case INFEED__FRAME__MSG_DETACH:		return ("Detach");
	case INFEED__FRAME__MSG_DETACHED:	return ("Detached");
	case INFEED__FRAME__MSG_GET_STATS:	return ("GetStats");
	case INFEED__FRAME__MSG_STATS:		return ("Stats");
	default:				return ("unknown");
	}
}

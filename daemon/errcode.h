/* SPDX-License-Identifier: MIT */
/*
 * The codes infeedd answers a refused request with, for the layers below
 * peer.c, which alone speaks the protocol: infeed.proto's ErrorCode in
 * plain C, number for number (peer.c checks that they agree, and converts).
 */
#ifndef INFEED_ERRCODE_H
#define INFEED_ERRCODE_H

enum errcode {
	ERRCODE_NONE = 0,		/* ERROR_UNSPECIFIED: never sent */
	ERRCODE_VERSION_MISMATCH = 1,	/* fatal: the connection closes */
	ERRCODE_BAD_FRAME = 2,		/* fatal */
	ERRCODE_UNEXPECTED = 3,		/* fatal: not valid in this state */
	ERRCODE_INVALID_ARGUMENT = 4,
	ERRCODE_NOT_FOUND = 5,
	ERRCODE_RESOURCE_EXHAUSTED = 6,
	ERRCODE_PERMISSION_DENIED = 7,
	ERRCODE_DATA = 8,		/* a sample could not be read */
	ERRCODE_INTERNAL = 9,
};
#define ERRCODE_COUNT	10

/* The code's name in infeed.proto, "ERROR_NOT_FOUND"; NULL for no code. */
static inline const char *
errcode_name(enum errcode c)
{
	switch (c) {
	case ERRCODE_NONE:			return ("ERROR_UNSPECIFIED");
	case ERRCODE_VERSION_MISMATCH:		return ("ERROR_VERSION_MISMATCH");
	case ERRCODE_BAD_FRAME:			return ("ERROR_BAD_FRAME");
	case ERRCODE_UNEXPECTED:		return ("ERROR_UNEXPECTED");
	case ERRCODE_INVALID_ARGUMENT:		return ("ERROR_INVALID_ARGUMENT");
	case ERRCODE_NOT_FOUND:			return ("ERROR_NOT_FOUND");
	case ERRCODE_RESOURCE_EXHAUSTED:	return ("ERROR_RESOURCE_EXHAUSTED");
	case ERRCODE_PERMISSION_DENIED:		return ("ERROR_PERMISSION_DENIED");
	case ERRCODE_DATA:			return ("ERROR_DATA");
	case ERRCODE_INTERNAL:			return ("ERROR_INTERNAL");
	}
	return (NULL);
}

#endif /* INFEED_ERRCODE_H */

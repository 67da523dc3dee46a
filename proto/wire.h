/* SPDX-License-Identifier: MIT */
/*
 * The protobuf codec of the infeed protocol, on wire-frame.h's framing:
 * a frame's body is one packed infeed.Frame.  Only the protocol's edges
 * include it: daemon/peer.c, libinfeed's connection layer, the tests and
 * fuzzers; below them, messages are plain C (tests/check-layers).
 *
 * wire_in_frame cuts and unpacks the next frame; wire_pack turns a Frame
 * into bytes ready to send (wire_send_fds).
 */
#ifndef INFEED_WIRE_H
#define INFEED_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "infeed-limits.h"
#include "infeed.pb-c.h"
#include "wire-frame.h"

#define WIRE_PROTOCOL_VERSION	1

/**
 * wire_in_frame() - cut the next frame off @in.
 * @out: on WIRE_OK, the unpacked frame; free it with
 *       infeed__frame__free_unpacked(*out, NULL).
 * @cause: on WIRE_BAD, a malloc'd reason (oversized length, undecodable
 *         body, no message set).
 */
enum wire_status	 wire_in_frame(struct wire_in *in, Infeed__Frame **out,
			    char **cause);

/**
 * wire_pack() - serialise @frame with its length header.
 * Return: a malloc'd buffer of *len bytes, or NULL if the frame would be
 * larger than @max_frame (errno EMSGSIZE) or memory ran out.
 */
uint8_t			*wire_pack(const Infeed__Frame *frame,
			    uint32_t max_frame, size_t *len);

/**
 * wire_case_name() - the message name of a frame's oneof case, for logs.
 */
const char		*wire_case_name(Infeed__Frame__MsgCase c);

#endif /* INFEED_WIRE_H */

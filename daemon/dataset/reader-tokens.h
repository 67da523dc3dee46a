/* SPDX-License-Identifier: MIT */
/*
 * The tokens reader (reader-tokens.c): a flat file of token ids and an
 * index of document boundaries, packed into rows of seq_len tokens with
 * their position ids and segment ids.  dataset.c's table of readers holds
 * its operations.
 */
#ifndef INFEED_READER_TOKENS_H
#define INFEED_READER_TOKENS_H

#include "reader.h"

extern const struct dataset_ops dataset_tokens_ops;

#endif /* INFEED_READER_TOKENS_H */

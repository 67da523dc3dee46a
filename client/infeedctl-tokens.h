/* SPDX-License-Identifier: MIT */
/*
 * infeedctl tokens (infeedctl-tokens.c): a token dataset's files from a
 * nanoGPT .bin and its end-of-text id, or from JSON lines of ids.
 */
#ifndef INFEED_INFEEDCTL_TOKENS_H
#define INFEED_INFEEDCTL_TOKENS_H

/**
 * infeedctl_tokens() - run "tokens index|convert ..." (@argv[0] is
 * "tokens").  Return: the exit status (2: a usage error).
 */
int	infeedctl_tokens(int argc, char **argv);

#endif /* INFEED_INFEEDCTL_TOKENS_H */

/* SPDX-License-Identifier: MIT */
/*
 * splitmix64 (Steele, Lea and Flood, 2014): the one generator behind the
 * shuffle, the synthetic datasets and the trainer's initial weights.
 * docs/protocol.md writes it out, since the sample order depends on it.
 */
#ifndef INFEED_SPLITMIX64_H
#define INFEED_SPLITMIX64_H

#include <stdint.h>

#define SPLITMIX64_GAMMA	0x9e3779b97f4a7c15ULL

/* The finaliser: a bijective 64-bit mix. */
static inline uint64_t
splitmix64_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (z ^ (z >> 31));
}

/* The next word of the stream whose state is *@state. */
static inline uint64_t
splitmix64_next(uint64_t *state)
{
	*state += SPLITMIX64_GAMMA;
	return (splitmix64_mix(*state));
}

#endif /* INFEED_SPLITMIX64_H */

/* SPDX-License-Identifier: MIT */
/*
 * The monotonic clock, the one every part of infeed reads for timeouts,
 * rates and durations (never the wall clock, which steps).
 */
#ifndef INFEED_CLOCK_H
#define INFEED_CLOCK_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Milliseconds on the monotonic clock. */
static inline uint64_t
clock_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

/* Microseconds on the monotonic clock. */
static inline uint64_t
clock_now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
}

/* Seconds on the monotonic clock, for rates and progress. */
static inline double
clock_now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

/*
 * A fixed wait of @s seconds, or fewer where the environment variable
 * @name says so: the tests' way to wait out the daemon's long fixed waits
 * (a silent client's, a slow scrape's, a stalled download's) quickly.
 * Never more than @s.
 */
static inline long
clock_wait_s(const char *name, long s)
{
	const char	*v = getenv(name);
	long		 n = v != NULL ? strtol(v, NULL, 10) : 0;

	return (n > 0 && n < s ? n : s);
}

#endif /* INFEED_CLOCK_H */

/* SPDX-License-Identifier: MIT */
/*
 * callgrind-marks: the marks around each ready step of benchmarks/
 * python-loader --callgrind, for the C client (c-loader links it) and for
 * Python (loaded with ctypes).  Run under valgrind --tool=callgrind
 * --cache-sim=yes --instr-atstart=no --collect-atstart=no, each step
 * starts with the simulated caches empty (starting the instrumentation
 * empties them), as a step asked for 20 ms after the last finds the real
 * ones, and its costs are dumped alone: instructions, and the cache lines
 * it had to fetch, which is what a cold step pays for.  The caches are
 * emptied by a call of their own before the step's first mark: a call
 * from Python (ctypes) then warms what the call itself needs, as the
 * return from the benchmark's sleep does.  Outside valgrind the marks do
 * nothing.
 */

#include <valgrind/callgrind.h>

void	callgrind_caches_empty(void);
void	callgrind_step_begin(void);
void	callgrind_step_split(void);
void	callgrind_step_end(int);

/* Before a step: empty caches. */
void
callgrind_caches_empty(void)
{
	CALLGRIND_START_INSTRUMENTATION;
}

/* A step begins: its costs counted from here. */
void
callgrind_step_begin(void)
{
	CALLGRIND_TOGGLE_COLLECT;
}

/*
 * The step's next() returned: its costs so far dumped alone (the take),
 * the rest (the drop) dumped at its end; the caches are left as they are.
 */
void
callgrind_step_split(void)
{
	CALLGRIND_DUMP_STATS;
}

/* The step ends: its costs dumped alone if @keep, else dropped. */
void
callgrind_step_end(int keep)
{
	CALLGRIND_TOGGLE_COLLECT;
	if (keep)
		CALLGRIND_DUMP_STATS;
	else
		CALLGRIND_ZERO_STATS;
	CALLGRIND_STOP_INSTRUMENTATION;
}

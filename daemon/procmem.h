/* SPDX-License-Identifier: MIT */
/*
 * A process's own memory, as the kernel counts it: what infeedd takes
 * beyond its step rings and the datasets' mappings (infeedctl status).
 */
#ifndef INFEED_PROCMEM_H
#define INFEED_PROCMEM_H

#include <sys/types.h>

#include <stdint.h>

/**
 * procmem_private() - bytes of process @pid's resident anonymous memory
 * (heap, stacks) and page tables, from /proc/PID/status; shared memory
 * (rings) and file mappings (datasets, libraries) are not in it.  0 when
 * it cannot be read (the process is gone).
 */
uint64_t	procmem_private(pid_t pid);

#endif /* INFEED_PROCMEM_H */

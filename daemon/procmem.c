/* SPDX-License-Identifier: MIT */
/* A process's own memory, read from /proc (see procmem.h). */

#include <stdio.h>
#include <string.h>

#include "procmem.h"

/* RssAnon and VmPTE of a process, in bytes. */
uint64_t
procmem_private(pid_t pid)
{
	char			 path[64], line[256];
	unsigned long long	 kib, total = 0;
	FILE			*fp;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((fp = fopen(path, "re")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (sscanf(line, "RssAnon: %llu kB", &kib) == 1 ||
		    sscanf(line, "VmPTE: %llu kB", &kib) == 1)
			total += kib;
	}
	fclose(fp);
	return ((uint64_t)total * 1024);
}

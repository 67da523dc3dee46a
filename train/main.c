/* SPDX-License-Identifier: MIT */
/*
 * infeed-train - a trainer on a simulated pipelined and replicated IPU
 * system, fed by infeedd.
 *
 *   infeed-train train [options]        the pipelining tutorial
 *   infeed-train dataloading [options]  the efficient-data-loading tutorial
 *   infeed-train schedule [options]     one pipeline schedule, drawn
 *
 * Each command has --help.
 */
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "commands.h"
#include "version.h"

/* Print infeed-train's usage to @fp. */
static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: infeed-train COMMAND [OPTIONS]\n"
	    "\n"
	    "Commands:\n"
	    "  train        train the pipelining tutorial's network on "
	    "Fashion-MNIST\n"
	    "               through infeedd, then evaluate it on the test "
	    "set\n"
	    "  dataloading  the efficient-data-loading experiment: loader "
	    "alone,\n"
	    "               synthetic data, and real data from infeedd\n"
	    "  schedule     print (and draw) one pipeline schedule\n"
	    "\n"
	    "infeed-train COMMAND --help lists the command's options;\n"
	    "infeed-train --version prints the version.\n");
}

/* Run the command that the first argument names. */
int
main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return (2);
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return (0);
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("infeed-train %s\n", INFEED_VERSION);
		return (0);
	}
	/* The layers' matrices are small: a second BLAS thread only spins,
	 * and takes a core from infeedd's workers on the same host. */
	openblas_set_num_threads(1);

	/* getopt names the program after argv[0] in its messages. */
	if (strcmp(argv[1], "train") == 0)
		argv[1] = (char *)"infeed-train train";
	else if (strcmp(argv[1], "dataloading") == 0)
		argv[1] = (char *)"infeed-train dataloading";
	else if (strcmp(argv[1], "schedule") == 0)
		argv[1] = (char *)"infeed-train schedule";
	if (strcmp(argv[1], "infeed-train train") == 0)
		return (cmd_train(argc - 1, argv + 1));
	if (strcmp(argv[1], "infeed-train dataloading") == 0)
		return (cmd_dataloading(argc - 1, argv + 1));
	if (strcmp(argv[1], "infeed-train schedule") == 0)
		return (cmd_schedule(argc - 1, argv + 1));
	fprintf(stderr, "infeed-train: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return (2);
}

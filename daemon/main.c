/* SPDX-License-Identifier: MIT */
/*
 * infeedd: serve device steps of training data to trainers.  This file
 * reads the command line; daemon.c starts, runs and stops the daemon.
 */

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "daemon.h"
#include "forker.h"
#include "log.h"
#include "number.h"
#include "paths.h"
#include "version.h"

/* Print how to run us. */
static void
main_usage(FILE *fp)
{
	fprintf(fp,
	    "usage: infeedd [--config FILE] [--socket PATH] [--workers N] "
	    "[--verbose]\n"
	    "\n"
	    "Serve device steps of training data to trainers over a Unix "
	    "socket.\n"
	    "\n"
	    "  -c, --config FILE   catalogue and settings (default %s)\n"
	    "  -s, --socket PATH   listen here (default: [infeedd] socket, "
	    "or %s)\n"
	    "  -w, --workers N     worker processes (default: [infeedd] "
	    "workers, or one per CPU; auto: the pool sizes itself)\n"
	    "  -v, --verbose       log debug messages too\n"
	    "  -V, --version       print the version and exit\n"
	    "  -h, --help          print this help and exit\n",
	    INFEEDD_DEFAULT_CONFIG, INFEEDD_DEFAULT_SOCKET);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "workers", required_argument, NULL, 'w' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct daemon_args	 args = { INFEEDD_DEFAULT_CONFIG, NULL, 0, true,
				    false, true };
	struct daemon		*d;
	uint64_t		 workers;
	int		 ch, verbose = 0;

	/* A fork server that infeedd started again (forker_exec()). */
	if (argc == 2 && strcmp(argv[1], "--fork-server") == 0)
		forker_serve();

	while ((ch = getopt_long(argc, argv, "c:s:w:vVh", longopts, NULL))
	    != -1) {
		switch (ch) {
		case 'c':
			args.config_path = optarg;
			break;
		case 's':
			args.socket_path = optarg;
			break;
		case 'w':
			if (strcmp(optarg, "auto") == 0) {
				args.workers_auto = true;
				args.workers = 0;
				break;
			}
			if (number_parse_u64(optarg, 1, INFEED_MAX_WORKERS,
			    &workers, NULL) != 0) {
				fprintf(stderr, "infeedd: --workers %s: expected "
				    "auto or a number from 1 to %d\n", optarg,
				    INFEED_MAX_WORKERS);
				return (2);
			}
			args.workers = (unsigned)workers;
			args.workers_auto = false;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'V':
			printf("infeedd %s\n", INFEED_VERSION);
			return (0);
		case 'h':
			main_usage(stdout);
			return (0);
		default:
			main_usage(stderr);
			return (2);
		}
	}
	if (optind != argc) {
		fprintf(stderr, "infeedd: unexpected argument '%s'\n",
		    argv[optind]);
		main_usage(stderr);
		return (2);
	}

	log_init("infeedd", verbose);
	signal(SIGPIPE, SIG_IGN);
	args.service = true;
	d = daemon_start(&args);
	daemon_run(d);
	daemon_free(d);
	log_info("stopped");
	return (0);
}

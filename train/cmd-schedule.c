/* SPDX-License-Identifier: MIT */
/*
 * infeed-train schedule: print a pipeline schedule as the reference's slot
 * tables do, with its makespan, bubble and peak stash, in unit costs
 * (forward 1, backward --backward-cost, recompute 1, copies free).
 *
 * --profile DIR draws the same unit schedule as a trace, one unit = 1 µs,
 * through the cost model with costmodel_unit_config(), so the trace's
 * length equals the printed makespan.  Exit status: 0, 1 if the profile
 * cannot be written, 2 for a usage error or a refused combination.
 */

#include <sys/stat.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "costmodel.h"
#include "schedule.h"
#include "trace.h"

#define CMD_SCHEDULE_CELL	64

/* What the command line asked for. */
struct cmd_schedule_opts {
	int		 stages;
	int		 micro;
	int		 kind;
	bool		 training;
	bool		 recompute;
	double		 tb;
	bool		 json;
	const char	*profile;
};

int		cmd_schedule(int, char **);	/* called by main.c */
static void	cmd_schedule_usage(FILE *);
static int	cmd_schedule_parse(int, char **, struct cmd_schedule_opts *);
static void	cmd_schedule_table(const struct schedule *);
static int	cmd_schedule_profile(const struct schedule *, double,
    const char *);

static const struct option cmd_schedule_longopts[] = {
	{ "stages",		  required_argument, NULL, 'n' },
	{ "gradient-accumulation", required_argument, NULL, 'm' },
	{ "schedule",		  required_argument, NULL, 's' },
	{ "inference",		  no_argument,	     NULL, 'i' },
	{ "recompute",		  no_argument,	     NULL, 'r' },
	{ "backward-cost",	  required_argument, NULL, 'b' },
	{ "json",		  no_argument,	     NULL, 'j' },
	{ "profile",		  required_argument, NULL, 'p' },
	{ "help",		  no_argument,	     NULL, 'h' },
	{ NULL,			  0,		     NULL, 0 }
};

/* Print how to call the command. */
static void
cmd_schedule_usage(FILE *f)
{
	fputs("usage: infeed-train schedule --stages N "
	    "--gradient-accumulation M\n"
	    "           [--schedule pipelined|sharded|grouped|interleaved|"
	    "gpipe|1f1b]\n"
	    "           [--inference] [--recompute] [--backward-cost X] "
	    "[--json]\n"
	    "           [--profile DIR]\n"
	    "\n"
	    "Print the slot table of one weight update (a row per slot, a "
	    "column per IPU),\n"
	    "its makespan and bubble in units of the forward time, and the "
	    "peak number of\n"
	    "stashed micro-batch activations per stage.\n"
	    "\n"
	    "  -n, --stages N                 pipeline stages = IPUs per "
	    "replica (1..64)\n"
	    "  -m, --gradient-accumulation M  micro-batches per weight update "
	    "(with --inference:\n"
	    "                                 per run, i.e. device "
	    "iterations)\n"
	    "  -s, --schedule NAME            pipelined (PopTorch, default), "
	    "sharded (PopTorch\n"
	    "                                 ShardedExecution = TF "
	    "Sequential), grouped and\n"
	    "                                 interleaved (TF), gpipe and 1f1b "
	    "(asynchronous references)\n"
	    "  -i, --inference                forward passes only\n"
	    "  -r, --recompute                recompute each forward before "
	    "its backward (stages < N-1)\n"
	    "  -b, --backward-cost X          backward time / forward time "
	    "(default 2)\n"
	    "  -j, --json                     end with one line of JSON: "
	    "schedule, stages,\n"
	    "                                 gradient_accumulation, slots, "
	    "makespan, bubble_fraction,\n"
	    "                                 peak_stashed, training, "
	    "recompute, backward_cost\n"
	    "  -p, --profile DIR              write DIR/schedule.json "
	    "(Perfetto/chrome://tracing) and\n"
	    "                                 DIR/schedule.svg of the unit "
	    "schedule, 1 unit = 1 us\n"
	    "  -h, --help                     this text\n", f);
}

/* Fill @o from the command line; 0, 1 for --help, -1 on a usage error. */
static int
cmd_schedule_parse(int argc, char **argv, struct cmd_schedule_opts *o)
{
	char	*end;
	long	 v;
	int	 ch;

	memset(o, 0, sizeof *o);
	o->stages = -1;
	o->micro = -1;
	o->kind = SCHEDULE_PIPELINED;
	o->training = true;
	o->tb = 2;
	optind = 0;	/* glibc: rescan, main.c may have used getopt */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":n:m:s:irb:jp:h",
	    cmd_schedule_longopts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			if (cli_int("stages", optarg, 1, SCHEDULE_MAX_STAGES,
			    &v) == -1)
				return (-1);
			o->stages = (int)v;
			break;
		case 'm':
			if (cli_int("gradient-accumulation", optarg, 1,
			    SCHEDULE_MAX_MICRO, &v) == -1)
				return (-1);
			o->micro = (int)v;
			break;
		case 's':
			if ((o->kind = schedule_parse(optarg)) == -1) {
				fprintf(stderr, "infeed-train schedule: "
				    "unknown schedule \"%s\"; choose "
				    "pipelined, sharded, grouped, interleaved, "
				    "gpipe or 1f1b\n", optarg);
				return (-1);
			}
			break;
		case 'i':
			o->training = false;
			break;
		case 'r':
			o->recompute = true;
			break;
		case 'b':
			errno = 0;
			o->tb = strtod(optarg, &end);
			if (end == optarg || *end != '\0' || errno != 0 ||
			    !isfinite(o->tb) || o->tb <= 0 || o->tb > 1e6) {
				fprintf(stderr, "infeed-train schedule: "
				    "--backward-cost is the backward time in "
				    "forward times, a number above 0 and at "
				    "most 1e6 (typically 2), not \"%s\"\n",
				    optarg);
				return (-1);
			}
			break;
		case 'j':
			o->json = true;
			break;
		case 'p':
			o->profile = optarg;
			break;
		case 'h':
			return (1);
		case ':':
			fprintf(stderr, "infeed-train schedule: %s needs a "
			    "value; see --help\n", argv[optind - 1]);
			return (-1);
		default:
			fprintf(stderr, "infeed-train schedule: unknown option "
			    "%s; see --help\n", argv[optind - 1]);
			return (-1);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "infeed-train schedule: unexpected argument "
		    "\"%s\"; every setting is an option, see --help\n",
		    argv[optind]);
		return (-1);
	}
	if (o->stages == -1 || o->micro == -1) {
		fprintf(stderr, "infeed-train schedule: give --stages N and "
		    "--gradient-accumulation M, for example --stages 4 "
		    "--gradient-accumulation 8\n");
		return (-1);
	}
	return (0);
}

/* Print the slot table: a row per slot, a column per IPU, "·" for idle. */
static void
cmd_schedule_table(const struct schedule *s)
{
	const char	*word = schedule_slot_word(s->kind);
	char		 cell[CMD_SCHEDULE_CELL], head[16];
	int		 width = 4, slotw, t, k, len, pad;

	for (t = 0; t < s->nslots; t++)
		for (k = 0; k < s->stages; k++) {
			schedule_cell(s, t, k, cell, sizeof cell);
			len = (int)strlen(cell);
			if (len > width)
				width = len;
		}
	snprintf(head, sizeof head, "%d", s->nslots - 1);
	slotw = (int)strlen(word) > (int)strlen(head) ? (int)strlen(word) :
	    (int)strlen(head);
	printf("%-*s", slotw, word);
	for (k = 0; k < s->stages; k++) {
		snprintf(head, sizeof head, "IPU%d", k);
		printf("  %-*s", k + 1 < s->stages ? width : 0, head);
	}
	putchar('\n');
	for (t = 0; t < s->nslots; t++) {
		printf("%*d", slotw, t);
		for (k = 0; k < s->stages; k++) {
			pad = k + 1 < s->stages ? width : 0;
			if (schedule_cell(s, t, k, cell, sizeof cell) == 0)
				/* A middle dot: two bytes, one column. */
				printf("  \xc2\xb7%*s", pad > 1 ? pad - 1 : 0,
				    "");
			else
				printf("  %-*s", pad, cell);
		}
		putchar('\n');
	}
}

/* Write the unit schedule's trace as DIR/schedule.json and .svg. */
static int
cmd_schedule_profile(const struct schedule *s, double tb, const char *dir)
{
	struct ipu_config	 cfg;
	struct stage_cost	 st[SCHEDULE_MAX_STAGES];
	struct run_shape	 shape;
	struct device_timing	 dt;
	struct timeline		*tl;
	char			 path[PATH_MAX], err[512];
	int			 k, rc = -1;

	if (mkdir(dir, 0777) == -1 && errno != EEXIST) {
		fprintf(stderr, "infeed-train schedule: cannot create the "
		    "profile directory %s: %s\n", dir, strerror(errno));
		return (-1);
	}
	costmodel_unit_config(&cfg, tb);
	memset(st, 0, sizeof st);
	for (k = 0; k < s->stages; k++)
		st[k].flops = 1;
	run_shape_default(&shape, s->training);
	shape.synthetic = true;
	if ((tl = trace_new(s->stages, 0)) == NULL) {
		fprintf(stderr, "infeed-train schedule: out of memory\n");
		return (-1);
	}
	if (costmodel_evaluate(&cfg, s, st, &shape, &dt, tl) == -1) {
		fprintf(stderr, "infeed-train schedule: cannot trace the "
		    "schedule: %s\n", strerror(errno));
		goto out;
	}
	if (snprintf(path, sizeof path, "%s/schedule.json", dir) >=
	    (int)sizeof path) {
		fprintf(stderr, "infeed-train schedule: profile directory "
		    "name too long\n");
		goto out;
	}
	if (trace_write_json(tl, path, err, sizeof err) == -1) {
		fprintf(stderr, "infeed-train schedule: %s\n", err);
		goto out;
	}
	snprintf(path, sizeof path, "%s/schedule.svg", dir);
	if (trace_write_svg(tl, path, err, sizeof err) == -1) {
		fprintf(stderr, "infeed-train schedule: %s\n", err);
		goto out;
	}
	printf("profile: %s/schedule.json and %s/schedule.svg (1 unit = "
	    "1 us, %zu spans%s)\n", dir, dir, tl->nspans,
	    tl->dropped > 0 ? ", truncated" : "");
	rc = 0;
out:
	trace_free(tl);
	return (rc);
}

/* The schedule subcommand: argv[0] is "schedule". */
int
cmd_schedule(int argc, char **argv)
{
	struct cmd_schedule_opts	 o;
	struct schedule			 s;
	char				 err[512];
	int				 peak[SCHEDULE_MAX_STAGES], k, rc;
	double				 span, bubble;

	if ((rc = cmd_schedule_parse(argc, argv, &o)) != 0) {
		if (rc == 1) {
			cmd_schedule_usage(stdout);
			return (0);
		}
		return (2);
	}
	if (schedule_build(&s, o.kind, o.stages, o.micro, o.training,
	    o.recompute, err, sizeof err) == -1) {
		fprintf(stderr, "infeed-train schedule: %s\n", err);
		return (2);
	}
	span = schedule_unit_makespan(&s, o.tb);
	bubble = schedule_bubble_fraction(&s, o.tb);
	schedule_peak_stash(&s, peak);

	printf("%s schedule, %d IPU%s, %s %d, %s%s, tF = 1, tB = %g\n\n",
	    schedule_name(s.kind), s.stages, s.stages == 1 ? "" : "s",
	    s.training ? "gradient accumulation" : "micro-batches", s.micro,
	    s.training ? "training" : "inference",
	    o.recompute && s.training ? " with recomputation" : "", o.tb);
	cmd_schedule_table(&s);
	printf("\n%ss: %d (%s)\n", schedule_slot_word(s.kind), s.nslots,
	    s.lockstep ? "lock-step" : "asynchronous, unit slots");
	printf("makespan: %g units of tF\n", span);
	printf("bubble: %.1f %% of %d IPU%s x makespan\n", 100 * bubble,
	    s.stages, s.stages == 1 ? "" : "s");
	printf("peak stashed activations per stage (micro-batches):");
	for (k = 0; k < s.stages; k++)
		printf(" %d", peak[k]);
	putchar('\n');

	rc = 0;
	if (o.profile != NULL && cmd_schedule_profile(&s, o.tb, o.profile) ==
	    -1)
		rc = 1;
	if (o.json) {
		printf("{\"schedule\":\"%s\",\"stages\":%d,"
		    "\"gradient_accumulation\":%d,\"training\":%s,"
		    "\"recompute\":%s,\"backward_cost\":%.17g,\"slots\":%d,"
		    "\"makespan\":%.17g,\"bubble_fraction\":%.17g,"
		    "\"peak_stashed\":[", schedule_name(s.kind), s.stages,
		    s.micro, s.training ? "true" : "false",
		    o.recompute && s.training ? "true" : "false", o.tb,
		    s.nslots, span, bubble);
		for (k = 0; k < s.stages; k++)
			printf("%s%d", k > 0 ? "," : "", peak[k]);
		printf("]}\n");
	}
	schedule_free(&s);
	fflush(stdout);
	return (rc);
}

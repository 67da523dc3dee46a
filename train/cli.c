/* SPDX-License-Identifier: MIT */
/*
 * cli.c - table-driven option parsing for infeed-train's commands.
 *
 * getopt_long does the matching (abbreviations, its own messages); a
 * table row then stores the value where the command keeps it, checking
 * whole numbers and numbers on the way.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fail.h"
#include "number.h"

#define CLI_MAX_OPTS	64

/* Parse a whole number from @lo to @hi for option @opt. */
int
cli_int(const char *opt, const char *s, long lo, long hi, long *v)
{
	uint64_t	n;

	if (lo < 0 || number_parse_u64(s, (uint64_t)lo, (uint64_t)hi, &n,
	    NULL) != 0) {
		fprintf(stderr, "infeed-train: --%s takes a whole number from "
		    "%ld to %ld, got '%s'\n", opt, lo, hi, s);
		return (-1);
	}
	*v = (long)n;
	return (0);
}

/* Parse a finite number for option @opt, or say what is wrong. */
int
cli_float(const char *opt, const char *s, float *v)
{
	char *end;

	errno = 0;
	*v = strtof(s, &end);
	if (errno || end == s || *end != '\0' || !isfinite(*v) || *v < 0) {
		fprintf(stderr, "infeed-train: --%s takes a non-negative "
		    "number, got '%s'\n", opt, s);
		return (-1);
	}
	return (0);
}

/* Say why the command line is refused; the usage-error status. */
int
cli_refuse(const char *fmt, ...)
{
	char	err[512];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(err, sizeof(err), fmt, ap);
	va_end(ap);
	fprintf(stderr, "infeed-train: %s\n", err);
	return (2);
}

/* List or set an --ipu cost-model figure. */
int
cli_ipu(struct ipu_config *cfg, const char *arg)
{
	char err[512];

	if (strcmp(arg, "help") == 0) {
		ipu_config_print(cfg, stdout, "  ");
		return (1);
	}
	if (ipu_config_parse(cfg, arg, err, sizeof(err)) < 0) {
		fprintf(stderr, "infeed-train: %s\n", err);
		return (2);
	}
	return (0);
}

/* The getopt_long table of @cmd's rows, in their order. */
static void
cli_longopts(const struct cli_command *cmd, struct option *lo)
{
	const struct cli_opt	*o;
	size_t			 i;

	if (cmd->nopts > CLI_MAX_OPTS)
		abort();
	for (i = 0; i < cmd->nopts; i++) {
		o = &cmd->opts[i];
		lo[i].name = o->name;
		lo[i].has_arg = o->kind == CLI_TRUE || o->kind == CLI_FALSE ||
		    o->kind == CLI_HELP ? no_argument : required_argument;
		lo[i].flag = NULL;
		lo[i].val = o->id;
	}
	memset(&lo[i], 0, sizeof(lo[i]));
}

/* The first row of @cmd with getopt's value @id, or NULL. */
static const struct cli_opt *
cli_find(const struct cli_command *cmd, int id)
{
	size_t i;

	for (i = 0; i < cmd->nopts; i++)
		if (cmd->opts[i].id == id)
			return (&cmd->opts[i]);
	return (NULL);
}

/* Act on row @o with the current optarg; 0, 1 done or 2 refused. */
static int
cli_store(const struct cli_command *cmd, const struct cli_opt *o,
    void *args)
{
	char	*p = (char *)args + o->off;
	long	 v;

	switch (o->kind) {
	case CLI_STRING:
		*(const char **)(void *)p = optarg;
		return (0);
	case CLI_TRUE:
	case CLI_FALSE:
		*(bool *)p = o->kind == CLI_TRUE;
		return (0);
	case CLI_INT:
	case CLI_U32:
	case CLI_U64:
		if (cli_int(o->name, optarg, o->lo, o->hi, &v) < 0)
			return (2);
		if (o->kind == CLI_INT)
			*(int *)(void *)p = v;
		else if (o->kind == CLI_U32)
			*(uint32_t *)(void *)p = v;
		else
			*(uint64_t *)(void *)p = v;
		return (0);
	case CLI_FLOAT:
		return (cli_float(o->name, optarg, (float *)(void *)p) < 0 ?
		    2 : 0);
	case CLI_OWN:
		return (cmd->own(args, o->id, optarg));
	case CLI_HELP:
		cmd->usage(stdout);
		return (1);
	}
	abort();
}

/* Parse argv's options by @cmd's table into @args. */
int
cli_parse(const struct cli_command *cmd, int argc, char **argv, void *args)
{
	struct option		 lo[CLI_MAX_OPTS + 1];
	const struct cli_opt	*o;
	int			 c, rc;

	cli_longopts(cmd, lo);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if ((o = cli_find(cmd, c)) == NULL) {
			fprintf(stderr, "%s --help lists the options.\n",
			    cmd->name);
			return (2);
		}
		if ((rc = cli_store(cmd, o, args)) != 0)
			return (rc);
	}
	return (0);
}

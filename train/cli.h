/* SPDX-License-Identifier: MIT */
/*
 * cli.h - the command-line options of infeed-train's commands as tables:
 * each row names an option and says where its value goes, and one parser
 * (getopt_long underneath) fills a command's arguments from argv.
 */
#ifndef INFEED_TRAIN_CLI_H
#define INFEED_TRAIN_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "costmodel.h"

/* What an option does with its value. */
enum cli_kind {
	CLI_STRING,	/* const char *: the argument itself */
	CLI_TRUE,	/* bool: set, no argument */
	CLI_FALSE,	/* bool: cleared, no argument */
	CLI_INT,	/* int: a whole number from lo to hi */
	CLI_U32,	/* uint32_t: a whole number from lo to hi */
	CLI_U64,	/* uint64_t: a whole number from lo to hi */
	CLI_FLOAT,	/* float: a finite number, not negative */
	CLI_OWN,	/* the command's own handler takes the argument */
	CLI_HELP,	/* print the usage, and done */
};

/* One row of a command's option table. */
struct cli_opt {
	const char	*name;	/* without the leading "--" */
	int		 id;	/* getopt's value: aliases share one */
	enum cli_kind	 kind;
	size_t		 off;	/* the field: offsetof in the args */
	long		 lo, hi;	/* a whole number's range */
};

/* A command: its name for messages, its option table and handlers. */
struct cli_command {
	const char		*name;	/* "infeed-train train" */
	const struct cli_opt	*opts;
	size_t			 nopts;
	void			(*usage)(FILE *);
	/* CLI_OWN options: 0 go on, 1 done, 2 usage error (said). */
	int			(*own)(void *args, int id, const char *arg);
};

/**
 * cli_parse() - parse argv's options by @cmd's table into @args, in order;
 * the first row with an option's id says what to do (so an alias acts,
 * and is named in messages, as the option it stands for).  Returns 0 to
 * run (optind is the first operand), 1 done (help printed), 2 a usage
 * error (said on stderr).
 */
int cli_parse(const struct cli_command *cmd, int argc, char **argv,
    void *args);

/**
 * cli_int() - parse --@opt's @s as a whole number in [@lo, @hi] (@lo at
 * least 0) into *@v; on failure print the advice on stderr and return -1.
 */
int cli_int(const char *opt, const char *s, long lo, long hi, long *v);

/**
 * cli_float() - parse --@opt's @s as a finite non-negative number into
 * *@v; on failure print the advice on stderr and return -1.
 */
int cli_float(const char *opt, const char *s, float *v);

/**
 * cli_refuse() - print "infeed-train: " and the formatted reason (at most
 * 511 bytes of it) on stderr; returns 2, the usage-error status.
 */
int cli_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * cli_ipu() - --ipu @arg: "help" prints @cfg's settings and returns 1;
 * KEY=VALUE sets one and returns 0, or says why not and returns 2.
 */
int cli_ipu(struct ipu_config *cfg, const char *arg);

#endif

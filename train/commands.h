/* SPDX-License-Identifier: MIT */
/*
 * commands.h - infeed-train's commands; each parses its own options from
 * argv (argv[0] is the command's name) and returns the exit status:
 * 0 done, 1 failed at run time, 2 bad usage.
 */
#ifndef INFEED_TRAIN_COMMANDS_H
#define INFEED_TRAIN_COMMANDS_H

int cmd_train(int argc, char **argv);
int cmd_dataloading(int argc, char **argv);
int cmd_schedule(int argc, char **argv);

#endif

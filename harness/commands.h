/* The `bench` subcommands. Each takes argv after the command name (argv[0] is
 * the command) and returns the process exit status. main.c holds the table. */
#ifndef BENCH_COMMANDS_H
#define BENCH_COMMANDS_H

int cmd_run(int argc, char **argv);        /* bench run SCENARIO.json ...        (harness/cmd_run.c) */
int cmd_worker(int argc, char **argv);     /* internal: one repetition in a child (harness/worker.c) */
int cmd_list(int argc, char **argv);       /* bench list                          (harness/cmd_list.c) */
int cmd_generate(int argc, char **argv);   /* bench generate ...                  (harness/cmd_generate.c) */
int cmd_model(int argc, char **argv);      /* bench model info|convert|synth ...  (harness/cmd_model.c) */

#endif

/* The `bench` subcommands. Each takes argv after the command name (argv[0] is
 * the command) and returns the process exit status. main.c holds the table. */
#ifndef BENCH_COMMANDS_H
#define BENCH_COMMANDS_H

int cmd_run(int argc, char **argv);        /* bench run SCENARIO.json ...        (harness/cli/cmd_run.c) */
int cmd_exec(int argc, char **argv);       /* bench exec SCENARIO --variant k=v   (harness/cli/cmd_exec.c) */
int cmd_worker(int argc, char **argv);     /* internal: one repetition in a child (harness/child/worker.c) */
int cmd_list(int argc, char **argv);       /* bench list                          (harness/cli/cmd_list.c) */
int cmd_generate(int argc, char **argv);   /* bench generate ...                  (harness/cli/cmd_generate.c) */
int cmd_model(int argc, char **argv);      /* bench model info|convert|synth ...  (harness/cli/cmd_model.c) */
int cmd_plot(int argc, char **argv);       /* bench plot RESULTS_DIR              (harness/cli/cmd_plot.c) */
int cmd_show(int argc, char **argv);       /* bench show RESULTS_DIR              (harness/cli/cmd_show.c) */
int cmd_compare(int argc, char **argv);    /* bench compare A B                   (harness/cli/cmd_compare.c) */
int cmd_history(int argc, char **argv);    /* bench history results/<scenario>    (harness/cli/cmd_history.c) */
int cmd_plan(int argc, char **argv);       /* bench plan SCENARIO --shards N      (harness/cli/cmd_plan.c) */
int cmd_merge(int argc, char **argv);      /* bench merge DIR...                  (harness/cli/cmd_merge.c) */
int cmd_sweep(int argc, char **argv);      /* bench sweep SCENARIO.json           (harness/cli/cmd_sweep.c) */
int cmd_tokenize(int argc, char **argv);   /* bench tokenize --model F --text T   (harness/cli/cmd_tokenize.c) */
int cmd_serve(int argc, char **argv);      /* bench serve --model F --port N      (harness/cli/cmd_serve.c) */

#endif

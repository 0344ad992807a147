/* bench: the driver. One table of subcommands; exit() is called only here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "engines/core/runtime/modreg.h"
#include "harness/cli/cliargs.h"
#include "kinds.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

typedef struct command {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv);
    int hidden;
} command;

static const command commands[] = {
    {"run", "run a scenario: every variant x repetition in a fresh process, with metrics", cmd_run, 0},
    {"generate", "run one engine on one prompt and print the text and speeds", cmd_generate, 0},
    {"list", "list every engine module found, with its options and devices", cmd_list, 0},
    {"model", "model tools: info, convert, synth, shapes", cmd_model, 0},
    {"tokenize", "a vocabulary's token ids for a text (no weights needed)", cmd_tokenize, 0},
    {"serve", "serve one engine over an OpenAI-compatible HTTP API (/v1/completions)", cmd_serve, 0},
    {"exec", "one repetition of one variant in this process, for perf and valgrind", cmd_exec, 0},
    {"plot", "figures (PNG, SVG) and report.html of a results directory", cmd_plot, 0},
    {"show", "the summary table of a results directory (a finished, interrupted or merged run)", cmd_show, 0},
    {"compare", "compare two runs: changes, noise test, verdicts; exit 1 on a regression", cmd_compare, 0},
    {"history", "plot each metric across the runs of a scenario, by commit time", cmd_history, 0},
    {"sweep", "sustained load: a serving scenario at several offered rates, the knee, validity, a figure", cmd_sweep, 0},
    {"plan", "split a scenario's variants x repetitions into shards for several machines", cmd_plan, 0},
    {"merge", "join the shards' results into one results.json, statistics per machine type", cmd_merge, 0},
    {"worker", "(internal) one repetition, driven by `bench run`", cmd_worker, 1},
    {NULL, NULL, NULL, 0},
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench <command> [options]      (bench <command> --help for each)\n\n"
            "A benchmarking and memory-profiling harness for LLM inference.\n\ncommands:\n");
    for (const command *c = commands; c->name; c++)
        if (!c->hidden) fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f,
            "\nexamples:\n"
            "  bench run scenarios/mmap_vs_pread.json\n"
            "  bench generate --model stories260K.bin --tokenizer tok512.bin --prompt \"The little dog\" --steps 200\n"
            "  bench model synth --shape llama-110m --dtype f32 --format gguf -o /tmp/llama-110m.gguf\n"
            "  bench list\n\n"
            "Exit status, every command: 0 done; 2 a usage error (unknown command or option, a missing or\n"
            "bad value, an unknown module, a bad scenario); 1 and others as each command's --help says.\n");
}

/* The jemalloc alloc module, dlopen'd, needs static TLS that glibc sets aside only
 * when told at startup: run again, once, with the tunable (workers inherit it). */
static void main_static_tls(char **argv) {
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && strstr(t, "optional_static_tls")) return;
    /* under valgrind /proc/self/exe is valgrind's tool, and an exec would leave valgrind
     * anyway: stay (give GLIBC_TUNABLES yourself to load jemalloc under valgrind) */
    if (RUNNING_ON_VALGRIND) return;
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s%sglibc.rtld.optional_static_tls=16384", t ? t : "", t && *t ? ":" : "");
    if (setenv("GLIBC_TUNABLES", buf, 1)) return;
    execv("/proc/self/exe", argv);
    /* no exec: go on; only jemalloc will fail to load, with dlopen's message */
}

int main(int argc, char **argv) {
    main_static_tls(argv);
    bench_kinds_use();
    char err[512];
    if (modreg_check_env(err, sizeof(err))) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (const command *c = commands; c->name; c++)
        if (!strcmp(argv[1], c->name)) return c->fn(argc - 1, argv + 1);
    /* a near miss gets the command meant ("bench genrate": did you mean generate?) */
    const char *names[sizeof(commands) / sizeof(commands[0])];
    int k = 0;
    for (const command *c = commands; c->name; c++)
        if (!c->hidden) names[k++] = c->name;
    names[k] = NULL;
    const char *near = cli_nearest(argv[1], names);
    if (near) {
        fprintf(stderr, "bench: unknown command \"%s\": did you mean %s? (bench --help lists the commands)\n", argv[1],
                near);
        return 2;
    }
    fprintf(stderr, "bench: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}

/* bench worker: one repetition of one variant in a fresh process (harness/child/worker.h).
 * Reads the spec file once and hands it to the worker of its kind (harness/scenario/kind.h). */
#include <cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/child/mapguard.h"
#include "harness/child/worker.h"
#include "harness/cli/commands.h"
#include "harness/scenario/kind.h"
#include "util/ut_fs.h"

static void wk_usage(FILE *f) {
    fprintf(f,
            "usage: bench worker --spec FILE [--events FD --ack FD]\n\n"
            "(internal) One repetition of one variant, as `bench run` starts it in a fresh process.\n"
            "The spec files of a run are kept in its results directory (specs/v<N>.json); without\n"
            "--events the worker prints its phases on stderr; `bench exec` runs the same code\n"
            "from a scenario, the easier entry point for perf and valgrind on one variant.\n"
            "  --callgrind   dump callgrind stats at each phase's end and print no timings\n"
            "                (how `bench run` counts instructions per phase)\n"
            "  --accuracy FILE  instead of the timed repetition, the untimed accuracy pass: the variant's\n"
            "                logits against the exact kernels with an f32 cache (docs/accuracy.md), as JSON\n"
            "                into FILE (how `bench run` measures the \"accuracy\" metric)\n\n"
            "example:\n"
            "  perf stat -e page-faults,major-faults bench worker --spec results/mmap_vs_pread/<run>/specs/v0.json\n");
}

int cmd_worker(int argc, char **argv) {
    const char *spec_path = NULL;
    int ev_fd = -1, ack_fd = -1;
    worker_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { wk_usage(stdout); return 0; }
        else if (!strcmp(a, "--spec") && v) spec_path = argv[++i];
        else if (!strcmp(a, "--events") && v) ev_fd = atoi(argv[++i]);
        else if (!strcmp(a, "--ack") && v) ack_fd = atoi(argv[++i]);
        else if (!strcmp(a, "--callgrind") && worker_has_callgrind()) o.callgrind = 1;
        else if (!strcmp(a, "--accuracy") && v) o.accuracy_out = argv[++i];
        else {
            fprintf(stderr, "bench worker: unknown or incomplete argument \"%s\"\n", a);
            wk_usage(stderr);
            return 2;
        }
    }
    if (!spec_path || (ev_fd >= 0) != (ack_fd >= 0)) {
        fprintf(stderr, "bench worker: --spec is required; --events and --ack go together\n");
        wk_usage(stderr);
        return 2;
    }
    /* a model changed under its mapping: one line in the log, then death by SIGBUS, which the parent records */
    mg_install("bench worker", 1);
    char err[1024];
    char *text = ut_slurp(spec_path, SIZE_MAX, NULL, err, sizeof(err));
    if (!text) return worker_fail(ev_fd, err);
    /* parsed once: the spec's "kind" picks the worker, which reads the rest from the same tree;
     * the text goes back to the heap before the worker loads anything */
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kind");
    const sc_kind *kind = sc_kind_for_worker(cJSON_IsString(k) ? k->valuestring : NULL);
    if (!kind) snprintf(err, sizeof(err), "%s: no worker for the spec's kind \"%s\"", spec_path, cJSON_IsString(k) ? k->valuestring : "");
    int rc = kind ? kind->worker(j, spec_path, ev_fd, ack_fd, &o) : worker_fail(ev_fd, err);
    cJSON_Delete(j);
    return rc;
}

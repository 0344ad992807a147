/* bench serve: bench's own engine behind an OpenAI-compatible HTTP API
 * (harness/net/server.h), until SIGINT or SIGTERM. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/ut_parse.h"
#include "util/ut_clock.h"
#include "commands.h"
#include "harness/child/mapguard.h"
#include "harness/cli/cliargs.h"
#include "harness/net/chat_tmpl.h"
#include "harness/net/oai_req.h"
#include "harness/net/server.h"
#include "engines/core/runtime/engine.h"
#include "engines/core/runtime/modreg.h"

/* --max-batch's default. A server has no request count to size the batch by (the in-process
 * kind takes every request up to the workload's max_batch); 8 covers the concurrencies
 * serving benchmarks compare at (vLLM --max-num-seqs 8 in docs/http.md's example, 4 and 8 in
 * the acceptance runs), and bounds a per-sequence kv module to 8 caches of the context. */
#define SV_MAX_BATCH 8

static void usage(FILE *f) {
    char names[128];
    fprintf(f,
            "usage: bench serve --model FILE [--tokenizer FILE] [--host ADDR] [--port N] [--port-file FILE]\n"
            "                   [--name ID] [--threads N] [--ctx N] [--loader NAME] [--loader-opt k=v,...]\n"
            "                   [--kv NAME] [--kv-opt k=v,...] [--alloc NAME] [--alloc-opt k=v,...]\n"
            "                   [--kernels NAME] [--numerics exact|production] [--no-repack] [--cache-type T[/T]]\n"
            "                   [--scratch keep|pass] [--ubatch N] [--device NAME]\n"
            "                   [--device-opt k=v,...] [--header-timeout S] [--body-timeout S]\n"
            "                   [--max-connections N] [--max-per-ip N] [--max-batch N] [--kv-budget N|SIZE]\n"
            "                   [--chat-template NAME] [--lenient]\n\n"
            "Serves one engine (the modules as bench generate takes them) over OpenAI's completion endpoints\n"
            "until SIGINT or SIGTERM (docs/http.md says field by field what is honoured):\n"
            "  POST /v1/completions       prompt as text or token ids; max_tokens (16), stream (server-sent events),\n"
            "                             n (1 to %d choices, each its own sequence; choice i samples with seed + i),\n"
            "                             stop (a string or up to %d: the text ends before it, finish_reason \"stop\"),\n"
            "                             stop_token_ids (vLLM's), temperature (0: greedy), top_p, seed, ignore_eos,\n"
            "                             stream_options.include_usage; each choice also carries \"tokens\", its ids\n"
            "  POST /v1/chat/completions  messages (system, developer, user, assistant; text) rendered with the chat\n"
            "                             template, and the same fields (max_tokens or max_completion_tokens; default:\n"
            "                             the context left); chat.completion, or chat.completion.chunk events\n"
            "  GET  /health               200 once the model is loaded\n"
            "  GET  /v1/models            the model's id (--name, default: bench) and context\n"
            "  GET  /metrics              Prometheus text: requests running and waiting, KV memory, tokens, TTFT/TPOT\n"
            "Strict: a request field bench serve does not know is refused (400, naming it); the known ones it does not\n"
            "do (user, logprobs, penalties, logit_bias, ...) only when they ask for nothing, and the answer names them in\n"
            "its X-Bench-Ignored-Fields header. Not served: tools, logprobs, images, embeddings, several prompts at once.\n"
            "Concurrent requests are batched (continuous batching, as the in-process serving kind): one engine\n"
            "thread admits them as KV room allows and decodes the running ones together.\n\n"
            "  --max-batch N     requests decoded together at most (default %d; 1: one at a time)\n"
            "  --ubatch N        the most prompt tokens of one request a CPU forward pass takes (default 512, as\n"
            "                    llama.cpp's n_ubatch); the activations of such a pass are reserved in the load\n"
            "  --chat-template NAME  the chat template, one of %s (default: the model's\n"
            "                    tokenizer.chat_template when bench recognises it, by its markers: bench runs no Jinja; a\n"
            "                    template it does not recognise refuses chat until one is named; plain, lines \"ROLE: TEXT\"\n"
            "                    ending with \"assistant:\", when the model has none). The answer's X-Bench-Chat-Template\n"
            "                    header and system_fingerprint name the one used\n"
            "  --lenient         accept unknown request fields (named in X-Bench-Ignored-Fields) instead of refusing them\n"
            "  --kv-budget N|SIZE  the KV memory: N positions, or bytes with a unit (512MiB, 2GiB); with a\n"
            "                    per-sequence kv module it sets how many sequences fit (engine.h kv_budget)\n"
            "  --host ADDR       the IPv4 address to listen on (default 127.0.0.1: this machine only)\n"
            "  --port N          default 8080; 0: any free port, written to --port-file FILE once listening\n"
            "  --header-timeout S  a client's request line and headers must arrive within S seconds, however\n"
            "                    slowly they trickle (default %d, as nginx's client_header_timeout)\n"
            "  --body-timeout S  its body within S seconds after them (default %d)\n"
            "  --max-connections N  connections at once (default %d); more are closed as they come\n"
            "  --max-per-ip N    connections at once from one client address (default %d)\n",
            OR_MAX_N, OR_MAX_STOP, SV_MAX_BATCH, ct_names(names, sizeof(names)), HS_HEADER_TIMEOUT_S, HS_BODY_TIMEOUT_S, HS_MAX_CONNECTIONS, HS_MAX_PER_IP);
    cli_usage_modules(f);
    fprintf(f,
            "\nOn SIGINT or SIGTERM the requests waiting their turn get 503, those running end at their next\n"
            "token, and the server exits. A model file truncated or rewritten while mapped (--loader mmap)\n"
            "fails the request reading it (500, naming the file) and stops the server.\n\n"
            "Exit status: 0 stopped by a signal; 1 the model, the engine or the address failed; 2 a usage error;\n"
            "%d the model file changed under its mapping while serving.\n\n"
            "example:\n"
            "  bench serve --model ../shared/models/stories260K.bin --tokenizer ../shared/models/tok512.bin --port 8080\n"
            "  curl -N localhost:8080/v1/completions -d '{\"prompt\": \"The little dog\", \"max_tokens\": 32, \"stream\": true}'\n"
            "  curl localhost:8080/v1/chat/completions -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story\"}],\n"
            "                                              \"max_tokens\": 48, \"stop\": \".\", \"n\": 2, \"temperature\": 0.8}'\n",
            MG_EXIT_CHANGED);
}

static int sv_int(const char *opt, const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < lo || n > hi) {
        fprintf(stderr, "bench serve: %s %s: expected a whole number from %ld to %ld\n", opt, v, lo, hi);
        return -1;
    }
    *out = (int)n;
    return 0;
}

/* --kv-budget: positions (a bare number), or bytes with a unit, as a scenario's kv_budget. */
static int sv_kv_budget(const char *v, engine_spec *spec) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    uint64_t bytes = 0;
    if (end != v && !*end && !errno && n >= 1 && n <= (1ull << 40) && *v != '-') {
        spec->kv_budget_tokens = n;
        return 0;
    }
    if (*v != '-' && !ut_parse_size(v, &bytes) && bytes > 0) {
        spec->kv_budget_bytes = bytes;
        return 0;
    }
    fprintf(stderr, "bench serve: --kv-budget %s: expected positions (a whole number such as 4096) or bytes with a unit "
            "(such as 512MiB, 2GiB)\n", v);
    return -1;
}

/* --chat-template: one of chat_tmpl.h's names, else a usage error naming them. */
static int sv_chat_template(const char *v, hs_opts *ho) {
    char names[128];
    if (!ct_find(v)) {
        fprintf(stderr, "bench serve: --chat-template %s: expected one of %s\n", v, ct_names(names, sizeof(names)));
        return -1;
    }
    ho->chat_template = v;
    return 0;
}

/* every option, for the nearest-name hint on an unknown one */
static const char *const sv_known[] = {
    "--model", "--tokenizer", "--host", "--port", "--port-file", "--name", "--threads", "--ctx", "--loader",
    "--kv", "--alloc", "--loader-opt", "--kv-opt", "--alloc-opt", "--device", "--device-opt", "--kernels",
    "--numerics", "--scratch", "--ubatch", "--modules", "--cache-type", "--no-repack", "--header-timeout", "--body-timeout",
    "--max-connections", "--max-per-ip", "--max-batch", "--kv-budget", "--chat-template", "--lenient", "--help", NULL};

int cmd_serve(int argc, char **argv) {
    engine_spec spec = {.kv_k_type = ENGINE_KV_DEFAULT, .kv_v_type = ENGINE_KV_DEFAULT, .kv_defaulted = 1};
    int max_batch = 0, x;
    hs_opts ho = {.port = 8080};
    const char *lopt = NULL, *kopt = NULL, *aopt = NULL, *dopt = NULL, *port_file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && (i++, 1))
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (ARG("--model")) spec.model_path = v;
        else if (ARG("--tokenizer")) spec.tokenizer_path = v;
        else if (ARG("--host")) ho.host = v;
        else if (ARG("--port")) { if (sv_int(a, v, 0, 65535, &ho.port)) return CLI_EXIT_USAGE; }
        else if (ARG("--port-file")) port_file = v;
        else if (ARG("--name")) ho.model_name = v;
        else if (ARG("--header-timeout")) { if (sv_int(a, v, 1, 86400, &ho.header_timeout_s)) return CLI_EXIT_USAGE; }
        else if (ARG("--body-timeout")) { if (sv_int(a, v, 1, 86400, &ho.body_timeout_s)) return CLI_EXIT_USAGE; }
        else if (ARG("--max-connections")) { if (sv_int(a, v, 1, 1000000, &ho.max_connections)) return CLI_EXIT_USAGE; }
        else if (ARG("--max-per-ip")) { if (sv_int(a, v, 1, 1000000, &ho.max_per_ip)) return CLI_EXIT_USAGE; }
        else if (ARG("--max-batch")) { if (sv_int(a, v, 1, 4096, &max_batch)) return CLI_EXIT_USAGE; }
        else if (ARG("--kv-budget")) { if (sv_kv_budget(v, &spec)) return CLI_EXIT_USAGE; }
        else if (ARG("--threads")) { if (sv_int(a, v, 1, 1024, &spec.threads)) return CLI_EXIT_USAGE; }
        else if (ARG("--ctx")) { if (sv_int(a, v, 1, 1L << 24, &spec.max_pos)) return CLI_EXIT_USAGE; }
        else if (ARG("--ubatch")) { if (sv_int(a, v, ENGINE_UBATCH_MIN, 1L << 24, &spec.ubatch)) return CLI_EXIT_USAGE; }
        else if (ARG("--loader")) spec.loader = v;
        else if (ARG("--kv")) spec.kv = v;
        else if (ARG("--alloc")) spec.alloc = v;
        else if (ARG("--loader-opt")) lopt = v;
        else if (ARG("--kv-opt")) kopt = v;
        else if (ARG("--alloc-opt")) aopt = v;
        else if (ARG("--device")) spec.device = v;
        else if (ARG("--device-opt")) dopt = v;
        else if (ARG("--kernels")) spec.kernels = v;
        else if (ARG("--numerics")) {
            if (cli_enum_arg("serve", a, v, engine_numerics_parse, "exact or production", &x)) return CLI_EXIT_USAGE;
            spec.numerics = (engine_numerics)x;
        } else if (ARG("--scratch")) {
            if (cli_enum_arg("serve", a, v, engine_scratch_parse, "keep or pass", &x)) return CLI_EXIT_USAGE;
            spec.scratch = (engine_scratch)x;
        }
        else if (ARG("--chat-template")) { if (sv_chat_template(v, &ho)) return CLI_EXIT_USAGE; }
        else if (!strcmp(a, "--lenient")) ho.lenient = 1;
        else if (!strcmp(a, "--no-repack")) spec.repack = ENGINE_REPACK_OFF;
        else if (ARG("--modules")) spec.module_dir = v;
        else if (ARG("--cache-type")) {
            char e1[256];
            spec.kv_defaulted = 0;
            if (engine_parse_cache_type(v, &spec.kv_k_type, &spec.kv_v_type, e1, sizeof(e1))) {
                fprintf(stderr, "bench serve: --cache-type %s: %s\n", v, e1);
                return CLI_EXIT_USAGE;
            }
        }
        else if (ARG("--fault")) {
            /* the test suite's misbehaving server (server.h hs_opts.fault) */
            const char *hooks = getenv("BENCH_TEST_HOOKS");
            if (!hooks || strcmp(hooks, "1")) {
                fprintf(stderr, "bench serve: --fault is a test hook (BENCH_TEST_HOOKS=1 only)\n");
                return CLI_EXIT_USAGE;
            }
            ho.fault = v;
        }
        else return cli_bad_arg(stderr, "serve", a, sv_known);
#undef ARG
    }
    if (!spec.model_path) {
        fprintf(stderr, "bench serve: --model is required\n");
        return CLI_EXIT_USAGE;
    }
    /* a sequence for each request of the batch; the server batches as many as the engine got
     * (a per-sequence kv module under a budget may get fewer) */
    spec.max_seqs = max_batch ? max_batch : SV_MAX_BATCH;
    /* the prompts to come are not known: the activations of the longest pass, ubatch tokens, are
     * reserved in the load, as llama.cpp's server reserves its compute buffer for n_ubatch */
    spec.reserve_tokens = ENGINE_RESERVE_UBATCH;
    ho.max_batch = max_batch;
    /* blocked before any thread starts, so every thread inherits the mask and sigwait alone takes them */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);   /* a client that hangs up mid-stream is that request's end, not the server's */
    char err[1024];
    void *st[4] = {NULL, NULL, NULL, NULL};
    engine *e = NULL;
    hs_server *srv = NULL;
    int rc = 1;
    if (modreg_parse_opts(lopt, &spec.loader_opts, &st[0], err, sizeof(err)) ||
        modreg_parse_opts(kopt, &spec.kv_opts, &st[1], err, sizeof(err)) ||
        modreg_parse_opts(aopt, &spec.alloc_opts, &st[2], err, sizeof(err)) ||
        modreg_parse_opts(dopt, &spec.device_opts, &st[3], err, sizeof(err))) {
        fprintf(stderr, "bench serve: %s\n", err);
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    /* a mapped model truncated or rewritten while serving: the request reading it fails,
     * naming the file, and the server stops (not a bare "Bus error") */
    mg_install_recover("bench serve");
    ho.model_fault = mg_changed;
    int64_t t0 = ut_now_ns();
    if (engine_create(&spec, &e, err, sizeof(err))) {
        fprintf(stderr, "bench serve: %s\n", err);
        goto out;
    }
    int64_t t1 = ut_now_ns();
    if (hs_start(e, &ho, &srv, err, sizeof(err))) {
        fprintf(stderr, "bench serve: %s\n", err);
        goto out;
    }
    if (port_file) {
        /* written whole under another name and renamed: a reader never sees half a number */
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%d\n", hs_port(srv)) < 0 || fclose(f) || rename(tmp, port_file)) {
            fprintf(stderr, "bench serve: --port-file %s: cannot write: %s\n", port_file, strerror(errno));
            goto out;
        }
    }
    fprintf(stderr, "bench serve: %s loaded in %.3f s; listening on http://%s:%d; batching up to %d requests\n",
            spec.model_path, (double)(t1 - t0) * 1e-9, ho.host ? ho.host : "127.0.0.1", hs_port(srv), hs_max_batch(srv));
    /* a signal, or the model failed under a request (checked every tick) */
    const struct timespec tick = {.tv_sec = 0, .tv_nsec = 250 * 1000000};
    const char *failed = NULL;
    int sig = -1;
    while (sig < 0 && !(failed = hs_failed(srv))) sig = sigtimedwait(&stop, NULL, &tick);
    if (failed) {
        fprintf(stderr, "bench serve: stopping: %s\n", failed);
        rc = MG_EXIT_CHANGED;
    } else {
        fprintf(stderr, "bench serve: %s: stopping\n", strsignal(sig));
        rc = 0;
    }
out:
    hs_stop(srv);
    engine_destroy(e);
    for (int i = 0; i < 4; i++) free(st[i]);
    return rc;
}

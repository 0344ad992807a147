/* bench generate: one engine, one prompt. Text to stdout, measurements to stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "harness/child/mapguard.h"
#include "harness/cli/cliargs.h"
#include "engines/core/runtime/engine.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/runtime/accuracy.h"
#include "engines/core/runtime/modreg.h"
#include "engines/core/runtime/sampler.h"
#include "util/ut_clock.h"

static double now_s(void) { return (double)ut_now_ns() * 1e-9; }

/* The counters the summary on stderr quotes: the device's own figures, and the weights loader
 * mmap mapped by 2 MiB entries; -1 where nothing said them. */
typedef struct gen_figures { double ttft_ms, tpot_ms, mem_peak, h2d_gb_s, share_w, huge_bytes; } gen_figures;

static void gen_figure(void *user, const char *name, const char *unit, double v) {
    gen_figures *f = user;
    (void)unit;
    if (!strcmp(name, "loader.huge_bytes")) f->huge_bytes = v;
    else if (!strcmp(name, "device.ttft_event_ms")) f->ttft_ms = v;
    else if (!strcmp(name, "device.tpot_event_ms")) f->tpot_ms = v;
    else if (!strcmp(name, "device.gpu_mem_used_peak_B")) f->mem_peak = v;
    else if (!strcmp(name, "loader.h2d_gb_s")) f->h2d_gb_s = v;
    else if (!strcmp(name, "device.share_weights")) f->share_w = v;
}

/* Whether transparent huge pages are off on this kernel: then no file is mapped in 2 MiB
 * pages, however it is read in, and the note on small folios has no remedy to give. */
static int thp_off(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char buf[128] = "";
    if (!f) return 1;
    const int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    return !ok || strstr(buf, "[never]") != NULL;
}

/* --numerics' help, the same in bench generate and bench serve */
#define NUMERICS_HELP \
    "  --numerics N     what kernels auto may run: production (default: also a family that rounds x to\n" \
    "                   int8 for Q8_0/Q4_0 weights or to bf16 for bf16 prefill, as llama.cpp does, where\n" \
    "                   it is faster and its logits on this model are\n" \
    "                   within llama.cpp's own error, checked when auto measures) or exact (the exact\n" \
    "                   families only); docs/accuracy.md \"Production numerics\"\n"

/* --scratch's help, the same in bench generate and bench serve */
#define SCRATCH_HELP \
    "  --scratch S      the forward pass's activations: keep (default: one block from the allocator module,\n" \
    "                   kept between passes and grown when a pass needs more, as production engines keep\n" \
    "                   their compute buffers) or pass (a block taken and given back every pass: the\n" \
    "                   allocator on the engine's path, for allocator studies; with libc's malloc a\n" \
    "                   prefill's block is mapped and faulted in again every pass). CPU only\n"

/* --kernels' help: a line per family of kernels.c's table. */
static void usage_kernels(FILE *f) {
    char int8[256], bf16[256];
    kn_isa_list(int8, sizeof int8, KN_LIST_X_INT8);
    kn_isa_list(bf16, sizeof bf16, KN_LIST_X_BF16);
    fprintf(f, "  --kernels NAME   the CPU kernel family (bench list shows which run here): auto (default: the best\n"
               "                   exact one this CPU runs), or one of\n");
    for (int i = 0; i < kn_isa_count(); i++) {
        const char *name = kn_isa_name(i, NULL);
        fprintf(f, "                     %-12s %s\n", name, kn_isa_about(name));
    }
    fprintf(f, "                   The int8 families (%s) quantise x to int8 for Q8_0, Q4_0, Q4_K and Q6_K\n"
               "                   weights and the bf16 ones (%s) round x to bf16 for bf16 weights in prefill:\n"
               "                   faster, with logits a little off (docs/PERFORMANCE.md); the others are exact\n", int8, bf16);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench generate --model FILE [--tokenizer FILE] [--prompt TEXT] [--steps N]\n"
            "                      [--temperature T] [--topp P] [--seed S] [--threads N] [--ctx N]\n"
            "                      [--loader NAME] [--loader-opt k=v,...] [--kv NAME] [--kv-opt k=v,...]\n"
            "                      [--alloc NAME] [--alloc-opt k=v,...] [--device NAME] [--device-opt k=v,...]\n"
            "                      [--prompt-tokens N] [--bandwidth] [--kernels NAME] [--cache-type T[/T]]\n"
            "                      [--ids] [--quiet] [--trace-alloc FILE] [--tokenizer-fallback] [--llama-numerics]\n"
            "                      [--accuracy] [--no-repack] [--warmup N] [--numerics exact|production]\n"
            "                      [--scratch keep|pass] [--ubatch N]\n\n"
            "Runs one engine on one prompt: prints the text on stdout, then load time, prompt tokens,\n"
            "TTFT, prefill tokens/s and decode tokens/s on stderr.\n\n"
            "  --steps N        positions in all, the prompt's included (as llama2.c counts); default 256.\n"
            "                   Generation also stops if BOS is sampled.\n"
            "  --temperature T  0 (default) is greedy: argmax, first index on ties\n"
            "  --topp P         nucleus sampling when T > 0 (default 0.9)\n"
            "  --ctx N          context length; default: the model's declared context. Going past the\n"
            "                   declared figure is allowed, with a note (RoPE has no hard limit).\n"
            "  --ubatch N       the most prompt tokens one CPU forward pass takes (default 512, as llama.cpp's\n"
            "                   n_ubatch): a longer prompt runs in passes of N, the same bits either way\n"
            "  --prompt-tokens N  use N synthetic prompt tokens (BOS, then ids 3, 4, 5, ...) instead of --prompt\n"
            "  --warmup N       first run the whole generation (prefill and decode) N times untimed, as llama-bench\n"
            "                   warms up once, and print the first (cold) pass's figures beside the timed one's;\n"
            "                   default 0: the figures are then those of the first pass, which is what a person\n"
            "                   running one prompt waits for (the text printed is the timed pass's, the same either way)\n"
            "  --bandwidth      also measure, on the same threads, a read-only stream over a buffer as large as\n"
            "                   the weights decode reads per token, and report decode as a fraction of the\n"
            "                   bound it sets (read bytes/s / weight bytes per token); the STREAM triad (64 MiB\n"
            "                   arrays) is printed beside it. With --device cuda: a triad on the GPU.\n");
    usage_kernels(f);
    fprintf(f, "%s", NUMERICS_HELP);
    fprintf(f, "%s", SCRATCH_HELP);
    fprintf(f,
            "  --no-repack      keep every matrix in the file's layout; by default, where the kernel family\n"
            "                   decodes a rearranged Q4_0 natively (avx512 on a CPU with AVX512-VNNI, vnni,\n"
            "                   avx2-int8), the Q4_0 matrices are rearranged at load (16 rows interleaved for vnni\n"
            "                   and avx2-int8, else within rows), as llama.cpp repacks Q4_0 (in place, or into\n"
            "                   anonymous copies of a shared mapping): with the mmap loader they become anonymous\n"
            "                   memory; where bf16 prefill runs on bf16 dot products (avx512-bf16), bf16 matrices\n"
            "                   are grouped 16 rows at a time (in place, or into anonymous copies). CPU only\n");
    char types[256];
    engine_cache_type_names(types, sizeof types, " or ");
    fprintf(f,
            "  --cache-type T   the KV cache's element type, K and V alike: %s (default %s, as\n"
            "                   llama.cpp's; f32 is exact); K/V apart as q8_0/f16, or with --cache-type-k T and --cache-type-v T\n"
            "                   (llama.cpp's -ctk/-ctv). A block type needs head_dim a whole number of its blocks\n",
            types, bench_dtype_name(ENGINE_KV_DEFAULT));
    fprintf(f,
            "  --accuracy       after the timed run, untimed: this configuration's logits at every position of\n"
            "                   the run (the prompt's, then each decode step's, fed the reference's greedy tokens)\n"
            "                   against the exact kernels with an f32 cache on the same file: mean and max KL\n"
            "                   divergence, top-1 agreement, max and RMS logit error (docs/accuracy.md)\n"
            "  --device D       where the forward pass runs: cpu (default) or cuda (device_cuda.so; the loader\n"
            "                   and KV modules are then the CUDA ones: bench list shows them, e.g. --loader pinned\n"
            "                   --kv vmm); --device-opt gives the device module's options\n"
            "  --ids            print token ids (BOS first, space-separated) instead of text\n"
            "  --tokenizer-fallback  tokenize a vocabulary whose tokenizer.ggml.model or .pre bench does not\n"
            "                   know with the nearest one (SentencePiece, gpt-2's split), with a warning\n"
            "  --llama-numerics round as llama.cpp's CPU path does (its f16 KV cache, its RoPE angles), to\n"
            "                   compare with its logits and ids (docs/formats.md); CPU only\n"
            "  --trace-alloc FILE  record every allocator call (KV at load, the activations' block) to FILE,\n"
            "                   for the \"trace\" allocator workload (engines/core/runtime/alloc_trace.h, docs/scenarios.md);\n"
            "                   with --scratch pass, a pair for every forward pass\n");
    cli_usage_modules(f);
    fprintf(f,
            "\nExit status: 0 done; 1 the model or the engine failed; 2 a usage error (unknown option or\n"
            "module, a bad value), as for every bench command.\n\n"
            "example:\n"
            "  bench generate --model ../shared/models/stories260K.bin --tokenizer ../shared/models/tok512.bin \\\n"
            "                 --prompt \"The little dog\" --steps 200 --loader pread --kv dynamic\n");
}

/* A whole number option: "--steps abc" names the option and what it wanted. */
static int gen_int(const char *opt, const char *v, long lo, long hi, const char *why, int *out) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < lo || n > hi) {
        fprintf(stderr, "bench generate: %s %s: expected a whole number from %ld to %ld%s%s\n", opt, v, lo, hi, why ? " " : "",
                why ? why : "");
        return -1;
    }
    *out = (int)n;
    return 0;
}

/* Positions: 2^24, the most a model file may declare (the llama2.c header's bound) */
#define GEN_MAX_POS (1L << 24)
#define GEN_POS_WHY "(2^24 positions: the longest context bench takes)"
/* Threads: the pool makes one thread each, and past the cores they only contend */
#define GEN_MAX_THREADS 1024L
#define GEN_THREADS_WHY "(one pool thread each; past the CPU's cores more only contend)"

static int gen_float(const char *opt, const char *v, float lo, float hi, int lo_open, float *out) {
    char *end;
    float x = strtof(v, &end);
    if (end == v || *end || !(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
        fprintf(stderr, "bench generate: %s %s: expected a number in %s%g, %g]\n", opt, v, lo_open ? "(" : "[", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* 1 when the engine failed because a module name given is not there: a usage error */
static int gen_unknown_module(const engine_spec *spec) {
    const char *fam[] = {"loader", "kv", "alloc"}, *name[] = {spec->loader, spec->kv, spec->alloc};
    char *dir = modreg_default_dir(spec->module_dir), *ddir = dir ? modreg_device_dir(dir, spec->device) : NULL;
    int unknown = 0;
    for (int i = 0; i < 3 && ddir; i++) {
        if (!name[i]) continue;
        char *names = modreg_names(ddir, fam[i]);
        int found = 0;
        for (char *p = names; p && (p = strstr(p, name[i])); p++) {
            size_t l = strlen(name[i]);
            if ((p == names || p[-2] == ',') && (p[l] == 0 || p[l] == ',')) found = 1;
        }
        unknown |= names && !found;
        free(names);
    }
    free(ddir);
    free(dir);
    return unknown;
}

typedef struct gen_args {
    engine_spec spec;
    const char *prompt, *lopt, *kopt, *aopt, *dopt;     /* the --*-opt texts */
    int steps, print_ids, quiet, prompt_tokens, bandwidth, accuracy;
    int warmup;                                         /* untimed passes before the timed one */
    float temperature, topp;
    unsigned long long seed;
} gen_args;

/* The command line into g: -1 to go on, or the exit status to return now (0 for --help). */
static int gen_parse(int argc, char **argv, gen_args *g) {
    *g = (gen_args){.prompt = "", .steps = 256, .topp = (float)SAMPLER_DEFAULT_TOPP, .seed = SAMPLER_DEFAULT_SEED,
                    .spec = {.kv_k_type = ENGINE_KV_DEFAULT, .kv_v_type = ENGINE_KV_DEFAULT, .kv_defaulted = 1}};
    int x;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && (i++, 1))
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (ARG("--model")) g->spec.model_path = v;
        else if (ARG("--tokenizer")) g->spec.tokenizer_path = v;
        else if (ARG("--prompt")) g->prompt = v;
        else if (ARG("--steps")) { if (gen_int(a, v, 1, GEN_MAX_POS, GEN_POS_WHY, &g->steps)) return 2; }
        else if (ARG("--temperature")) { if (gen_float(a, v, 0, 1e6f, 0, &g->temperature)) return 2; }
        else if (ARG("--topp")) { if (gen_float(a, v, 0, 1, 1, &g->topp)) return 2; }
        else if (ARG("--seed")) {
            char *end;
            g->seed = strtoull(v, &end, 10);
            if (end == v || *end || v[0] == '-') {
                fprintf(stderr, "bench generate: --seed %s: expected a whole number >= 0\n", v);
                return 2;
            }
        }
        else if (ARG("--threads")) { if (gen_int(a, v, 1, GEN_MAX_THREADS, GEN_THREADS_WHY, &g->spec.threads)) return 2; }
        else if (ARG("--prompt-tokens")) { if (gen_int(a, v, 1, GEN_MAX_POS, GEN_POS_WHY, &g->prompt_tokens)) return 2; }
        else if (ARG("--warmup")) { if (gen_int(a, v, 0, 100, "(untimed passes; 1 is llama-bench's)", &g->warmup)) return 2; }
        else if (ARG("--ctx")) { if (gen_int(a, v, 1, GEN_MAX_POS, GEN_POS_WHY, &g->spec.max_pos)) return 2; }
        else if (ARG("--ubatch")) { if (gen_int(a, v, ENGINE_UBATCH_MIN, GEN_MAX_POS, GEN_POS_WHY, &g->spec.ubatch)) return 2; }
        else if (ARG("--loader")) g->spec.loader = v;
        else if (ARG("--kv")) g->spec.kv = v;
        else if (ARG("--alloc")) g->spec.alloc = v;
        else if (ARG("--loader-opt")) g->lopt = v;
        else if (ARG("--kv-opt")) g->kopt = v;
        else if (ARG("--alloc-opt")) g->aopt = v;
        else if (ARG("--device")) g->spec.device = v;
        else if (ARG("--device-opt")) g->dopt = v;
        else if (ARG("--kernels")) g->spec.kernels = v;
        else if (ARG("--numerics")) {
            if (cli_enum_arg("generate", a, v, engine_numerics_parse, "exact or production", &x)) return 2;
            g->spec.numerics = (engine_numerics)x;
        } else if (ARG("--scratch")) {
            if (cli_enum_arg("generate", a, v, engine_scratch_parse, "keep or pass", &x)) return 2;
            g->spec.scratch = (engine_scratch)x;
        }
        else if (ARG("--cache-type") || ARG("--cache-type-k") || ARG("--cache-type-v")) {
            bench_dtype k, vt;
            char e1[256];
            if (engine_parse_cache_type(v, &k, &vt, e1, sizeof(e1)) || (strcmp(a, "--cache-type") && strchr(v, '/'))) {
                fprintf(stderr, "bench generate: %s %s: %s\n", a, v,
                        strchr(v, '/') && strcmp(a, "--cache-type") ? "one type here (K/V goes to --cache-type)" : e1);
                return 2;
            }
            g->spec.kv_defaulted = 0;
            if (strcmp(a, "--cache-type-v")) g->spec.kv_k_type = k;
            if (strcmp(a, "--cache-type-k")) g->spec.kv_v_type = vt;
        }
        else if (ARG("--modules")) g->spec.module_dir = v;
        else if (ARG("--trace-alloc")) g->spec.trace_alloc = v;
        else if (!strcmp(a, "--ids")) g->print_ids = 1;
        else if (!strcmp(a, "--tokenizer-fallback")) g->spec.tokenizer_fallback = 1;
        else if (!strcmp(a, "--quiet")) g->quiet = 1;
        else if (!strcmp(a, "--bandwidth")) g->bandwidth = 1;
        else if (!strcmp(a, "--llama-numerics")) g->spec.llama_numerics = 1;
        else if (!strcmp(a, "--no-repack")) g->spec.repack = ENGINE_REPACK_OFF;
        else if (!strcmp(a, "--accuracy")) g->accuracy = 1;
        else {
            static const char *const known[] = {
                "--model", "--tokenizer", "--prompt", "--steps", "--temperature", "--topp", "--seed", "--threads",
                "--prompt-tokens", "--ctx", "--ubatch", "--loader", "--kv", "--alloc", "--loader-opt", "--kv-opt", "--alloc-opt",
                "--device", "--device-opt", "--modules", "--trace-alloc", "--ids", "--tokenizer-fallback", "--quiet",
                "--kernels", "--cache-type", "--cache-type-k", "--cache-type-v", "--accuracy",
                "--bandwidth", "--llama-numerics", "--no-repack", "--warmup", "--numerics", "--scratch", "--help", NULL};
            return cli_bad_arg(stderr, "generate", a, known);
        }
#undef ARG
    }
    if (!g->spec.model_path) {
        fprintf(stderr, "bench generate: --model is required\n");
        return 2;
    }
    return -1;
}

/* one generation's counts and times (now_s), for the figures printed after it */
typedef struct gen_run {
    int n_prompt, n;                    /* prompt tokens; tokens in ids, prompt included */
    double t_load, t1, t_first, t_end;  /* load's length; prefill start, first token, end */
    int warmup;                         /* untimed passes before this one (--warmup) */
    double c1, c_first, c_end;          /* the first, cold, pass's t1, t_first, t_end when warmup > 0 */
    int c_n;                            /* its tokens in ids, prompt included */
    double step_min;                    /* the timed pass's fastest decode step, seconds (0: none) */
    int reserved;                       /* tokens the pass's scratch was reserved for in the load (0: none) */
} gen_run;

/* the figures on stderr: load, kernels, KV cache, TTFT, prefill and decode rates, device */
static void gen_print_figures(const gen_args *g, engine *e, const gen_run *r) {
    const model *m = engine_model(e);
    int decoded = r->n - r->n_prompt - 1;
    gen_figures f = {-1, -1, -1, -1, -1, -1};
    bench_counter_sink sink = {.emit = gen_figure, .user = &f};
    engine_counters(e, &sink);
    const double weights = (double)model_weight_bytes(m), huge = f.huge_bytes;
    fprintf(stderr, "load         %.1f ms (%s loader%s%s, %.1f MB of weights", r->t_load * 1e3,
            g->spec.loader ? g->spec.loader : "mmap", strcmp(engine_device(e), "cpu") ? " on " : "",
            strcmp(engine_device(e), "cpu") ? engine_device(e) : "", weights / 1e6);
    /* decode's speed moves by a quarter with it (loader_mmap.c), so it is said beside the load */
    if (huge >= 0) fprintf(stderr, "; %.1f MB of the file mapped in 2 MiB pages", huge / 1e6);
    if (r->reserved) fprintf(stderr, "; activations reserved for %d tokens", r->reserved);
    fputs(")\n", stderr);
    if (huge >= 0 && weights >= 64e6 && huge < 0.5 * weights && !thp_off())
        fprintf(stderr, "             note: most of the weights are mapped in 4 KiB pages: the page cache holds the file in the small\n"
                        "             folios a write leaves (decode reads f32 llama-110m ~25%% slower so); `dd if=%s\n"
                        "             iflag=nocache count=0` drops them, and the next load reads the file in whole 2 MiB folios\n",
                g->spec.model_path);
    if (!strcmp(engine_device(e), "cpu")) {
        fprintf(stderr, "kernels      %s\n", kn_isa());
        if (engine_kernels_note(e)[0]) fprintf(stderr, "             %s\n", engine_kernels_note(e));
    }
    /* said only where it happened: the layout then differs from the file's, and with mmap so
     * does the memory (the rearranged pages are anonymous) */
    if (engine_repacked_matrices(e) > 0) {
        const uint64_t copied = engine_repacked_copied_bytes(e);
        const int bf16 = engine_repacked_bf16(e), q4 = engine_repacked_matrices(e) - bf16;
        const int g16 = engine_repacked_q4_0_g16(e);
        const char *how = g16 == q4 ? " (16 rows interleaved)" : g16 ? " (some 16 rows interleaved, some within rows)"
                                                                     : " (within rows)";
        char what[160];
        if (q4 && bf16) snprintf(what, sizeof what, "%d Q4_0 matrices%s and %d bf16 matrices", q4, how, bf16);
        else snprintf(what, sizeof what, "%d %s matrices%s", q4 ? q4 : bf16, q4 ? "Q4_0" : "bf16", q4 ? how : "");
        fprintf(stderr, "repacked     %s, %.1f MiB rearranged at load, %s (--no-repack keeps the file's layout)\n", what,
                (double)engine_repacked_bytes(e) / 1048576.0,
                copied ? "into anonymous copies of the shared file pages" : "in place");
    }
    char ct[24];
    engine_cache_type_name(engine_kv_k_type(e), engine_kv_v_type(e), ct, sizeof(ct));
    engine_kv_mem km = engine_kv_memory(e);
    fprintf(stderr, "KV cache     %s, %.2f MiB reserved (%llu B a position), %.2f MiB used\n", ct, km.reserved / 1048576.0,
            (unsigned long long)engine_kv_token_bytes(e), (km.live + km.cached) / 1048576.0);
    fprintf(stderr, "prompt       %d tokens\n", r->n_prompt);
    if (r->warmup > 0) {
        /* the cold pass first, so that the lines scripts read (prefill, decode) stay the timed one's */
        int cdec = r->c_n - r->n_prompt - 1;
        fprintf(stderr, "cold         first pass: TTFT %.2f ms, prefill %.1f tokens/s", (r->c_first - r->c1) * 1e3,
                r->n_prompt / (r->c_first - r->c1));
        if (cdec > 0) fprintf(stderr, ", decode %.1f tokens/s", cdec / (r->c_end - r->c_first));
        fprintf(stderr, "; the figures below are warm: pass %d of %d (--warmup %d)\n", r->warmup + 1, r->warmup + 1, r->warmup);
    }
    fprintf(stderr, "TTFT         %.2f ms\n", (r->t_first - r->t1) * 1e3);
    fprintf(stderr, "prefill      %.1f tokens/s\n", r->n_prompt / (r->t_first - r->t1));
    if (decoded > 0)
        fprintf(stderr, "decode       %.1f tokens/s (%d tokens, TPOT %.3f ms, the fastest %.3f ms)\n", decoded / (r->t_end - r->t_first),
                decoded, (r->t_end - r->t_first) * 1e3 / decoded, r->step_min * 1e3);
    if (strcmp(engine_device(e), "cpu")) {
        fprintf(stderr, "%-12s TTFT %.3f ms, TPOT %.3f ms (events); %.1f MB device memory at peak; load %.2f GB/s to the device",
                engine_device(e), f.ttft_ms, f.tpot_ms, f.mem_peak / 1e6, f.h2d_gb_s);
        if (f.share_w >= 0) fprintf(stderr, "; weights %.0f%% of a decode pass", 100 * f.share_w);
        fputc('\n', stderr);
    }
}

/* --bandwidth: decode against the memory bound, prefill against the compute peak */
static void gen_print_bandwidth(const gen_args *g, engine *e, const gen_run *r) {
    const model *m = engine_model(e);
    int decoded = r->n - r->n_prompt - 1;
    /* the weights a decode step streams: every matrix, the classifier included;
     * of an untied embedding table only one row is read */
    double per_token = (double)model_weight_bytes(m);
    const model_tensor *emb = model_find(m, "token_embd.weight");
    if (model_find(m, "output.weight") && emb) per_token -= (double)emb->nbytes;
    double bw, triad = 0, peak = 0, peak8 = 0, best_peak = 0, ppeak = 0;
    char best_name[32] = "";
    const char *parith = "", *pfamily = "";
    const char *what = "read";
    if (strcmp(engine_device(e), "cpu")) {
        bw = engine_device_bandwidth(e, 0, 5);
        what = "triad";
    } else {
        /* the engine's own pool size: --threads, or every online CPU */
        long nt = g->spec.threads > 0 ? g->spec.threads : sysconf(_SC_NPROCESSORS_ONLN);
        tp_pool *pool = tp_create(nt > 0 ? (int)nt : 1);
        bw = pool ? kn_read_bandwidth(pool, (size_t)per_token, 5) : 0;
        triad = pool ? kn_triad_bandwidth(pool, 64u << 20, 5) : 0;
        peak = pool ? kn_peak_gops(pool, 0) : 0;
        peak8 = pool ? kn_peak_gops(pool, 1) : 0;
        /* the arithmetic prefill ran on: the family auto chose for the dtype most of the
         * weights are in, which may round x (int8, bf16) and so have another peak */
        ppeak = pool ? kn_peak_prefill_gops(pool, model_main_dtype(m->tensors, m->n_tensors), &parith, &pfamily) : 0;
        /* a named family's own peak says how near it runs to what it could; the CPU's best
         * exact family's (auto's) says how near to what this CPU could: a plain C family at 70%
         * of its own peak is at 4% of this */
        if (pool && !kn_auto_active() && strcmp(kn_isa(), kn_isa_resolve("auto"))) {
            char named[32];
            snprintf(named, sizeof(named), "%s", kn_isa());
            if (!kn_set_isa("auto")) {
                best_peak = kn_peak_gops(pool, 0);
                snprintf(best_name, sizeof(best_name), "%s", kn_isa());
                kn_set_isa(named);
            }
        }
        tp_destroy(pool);
    }
    double bound = bw / per_token, tps = decoded / (r->t_end - r->t_first);
    /* the bound is the best of 5 reads; the fastest step is decode's figure of the same kind,
     * which a busy machine's interruptions touch as little as they touch the bound's */
    if (bw > 0)
        fprintf(stderr, "bandwidth    %.1f GB/s %s%s%s; %.1f MB read per token; bound %.1f tokens/s; decode at %.0f%% of it "
                "(the fastest step at %.0f%%)\n", bw / 1e9, what, strcmp(engine_device(e), "cpu") ? " on " : " at that size",
                strcmp(engine_device(e), "cpu") ? engine_device(e) : "", per_token / 1e6, bound, 100.0 * tps / bound,
                r->step_min > 0 ? 100.0 / r->step_min / bound : 0.0);
    else
        fprintf(stderr, "bandwidth    could not be measured on %s\n", engine_device(e));
    if (triad > 0)
        fprintf(stderr, "triad        %.1f GB/s (64 MiB arrays, STREAM counting); decode at %.0f%% of its bound\n",
                triad / 1e9, 100.0 * tps * per_token / triad);
    if (peak > 0) {
        /* prefill's matrix work: every blk.* matrix once per prompt token, the classifier
         * once (only the last position's logits are computed); attention is left out
         * (at 128 positions of llama-110m it is about 1% more) */
        double blk = 0, cls = 0;
        for (int i = 0; i < m->n_tensors; i++) {
            const model_tensor *t = &m->tensors[i];
            if (t->n_dims != 2) continue;
            if (!strncmp(t->name, "blk.", 4)) blk += (double)t->ne[0] * (double)t->ne[1];
            else if (!strcmp(t->name, "output.weight")) cls = (double)t->ne[0] * (double)t->ne[1];
        }
        if (cls == 0 && emb) cls = (double)emb->ne[0] * (double)emb->ne[1];
        double gflop = 2.0 * (r->n_prompt * blk + cls) / 1e9, rate = gflop / (r->t_first - r->t1);
        fprintf(stderr, "compute      prefill %.1f GFLOP in %.1f ms = %.1f GFLOP/s; peak %.1f GFLOP/s f32 FMA (%.0f%%)",
                gflop, (r->t_first - r->t1) * 1e3, rate, peak, 100.0 * rate / peak);
        if (peak8 > 0) fprintf(stderr, ", %.1f GOP/s int8 dot (%.0f%%)", peak8, 100.0 * rate / peak8);
        if (best_peak > 0) fprintf(stderr, "; this CPU's best, %s: %.1f GFLOP/s f32 FMA (%.0f%%)", best_name, best_peak, 100.0 * rate / best_peak);
        if (ppeak > 0)
            fprintf(stderr, "; prefill ran %s's %s: peak %.1f GOP/s (%.0f%%)", pfamily, parith, ppeak, 100.0 * rate / ppeak);
        fputc('\n', stderr);
    }
}

/* --accuracy: untimed, after everything measured: one engine at a time, the timed one
 * (*e) gone first. 0, or -1 with the message printed. */
static int gen_accuracy(const gen_args *g, engine **e, const int *ids, const gen_run *r) {
    char err[1024];
    engine_destroy(*e);
    *e = NULL;
    engine_spec ref = acc_reference_spec(&g->spec);
    acc_figures af;
    int gen = r->n - r->n_prompt;
    if (gen < 1) {
        fprintf(stderr, "bench generate: --accuracy needs a generated token or more (raise --steps)\n");
        return -1;
    }
    if (acc_measure(&g->spec, &ref, ids, r->n_prompt, gen, &af, err, sizeof(err))) {
        fprintf(stderr, "bench generate: %s\n", err);
        return -1;
    }
    int on_device = ref.device != g->spec.device;   /* acc_reference_spec moved it to the CPU */
    fprintf(stderr, "accuracy     KL mean %.6g max %.6g nats, top-1 %.2f%%, logit error max %.3g rms %.3g of the largest "
            "(%d positions, against %s exact kernels and an f32 cache)\n", af.kl_mean, af.kl_max, 100 * af.top1,
            af.err_max, af.err_rms, af.n_pos, on_device ? "the CPU's" : "the");
    return 0;
}

/* One generation from the prompt in ids[0 .. n_prompt): prefill, then decode up to position
 * steps or BOS, the tokens into ids, the times into r (t1, t_first, t_end, n). 0, or -1 said. */
static int gen_pass(engine *e, sampler *smp, int *ids, int n_prompt, int steps, gen_run *r) {
    const tokenizer *tok = engine_tokenizer(e);
    char err[1024];
    float *logits;
    /* prefill: the whole prompt in one batch; its last logits give the first new token */
    r->t1 = now_s();
    if (engine_forward(e, 0, ids, n_prompt, 0, &logits, err, sizeof(err))) {
        fprintf(stderr, "bench generate: %s\n", err);
        return -1;
    }
    int n = n_prompt;
    ids[n++] = engine_sample(e, smp, logits);
    r->t_first = now_s();
    /* position n-1 is fed next; positions 0 .. steps-1 are fed in all */
    r->step_min = 0;
    for (double ts = r->t_first, te; n - 1 < steps && ids[n - 1] != tokenizer_bos(tok); ts = te) {
        if (engine_forward(e, 0, &ids[n - 1], 1, n - 1, &logits, err, sizeof(err))) {
            fprintf(stderr, "bench generate: %s\n", err);
            return -1;
        }
        ids[n++] = engine_sample(e, smp, logits);
        te = now_s();
        if (!r->step_min || te - ts < r->step_min) r->step_min = te - ts;
    }
    r->t_end = now_s();
    r->n = n;
    return 0;
}

int cmd_generate(int argc, char **argv) {
    gen_args g;
    int rc = gen_parse(argc, argv, &g);
    if (rc >= 0) return rc;
    int steps = g.steps, n_prompt;
    char err[1024];
    void *ls = NULL, *ks = NULL, *as = NULL, *ds = NULL;
    engine *e = NULL;
    sampler *smp = NULL;
    int *ids = NULL;
    rc = 1;
    if (modreg_parse_opts(g.lopt, &g.spec.loader_opts, &ls, err, sizeof(err)) ||
        modreg_parse_opts(g.kopt, &g.spec.kv_opts, &ks, err, sizeof(err)) ||
        modreg_parse_opts(g.aopt, &g.spec.alloc_opts, &as, err, sizeof(err)) ||
        modreg_parse_opts(g.dopt, &g.spec.device_opts, &ds, err, sizeof(err))) {
        fprintf(stderr, "bench generate: %s\n", err);
        rc = 2;
        goto out;
    }

    gen_run r = {0};
    double t0 = now_s();
    /* a mapped model truncated or rewritten while it runs: one line naming it, exit MG_EXIT_CHANGED */
    mg_install("bench generate", 0);
    if (engine_create(&g.spec, &e, err, sizeof(err))) {
        fprintf(stderr, "bench generate: %s\n", err);
        if (gen_unknown_module(&g.spec)) rc = 2;
        goto out;
    }
    if (mg_test_truncate(g.spec.model_path) < 0) goto out;
    r.t_load = now_s() - t0;
    const model *m = engine_model(e);
    const tokenizer *tok = engine_tokenizer(e);
    if (!tok) {
        fprintf(stderr, "bench generate: %s has no vocabulary; give one with --tokenizer\n", g.spec.model_path);
        goto out;
    }
    ids = malloc((size_t)(steps + 1) * sizeof(int));
    smp = sampler_create(m->cfg.vocab_size, g.temperature, g.topp, g.seed);
    if (!ids || !smp) { fprintf(stderr, "bench generate: out of memory\n"); goto out; }
    if (g.prompt_tokens > 0) {
        n_prompt = g.prompt_tokens < steps + 1 ? g.prompt_tokens : steps + 1;
        ids[0] = tokenizer_bos(tok);
        for (int i = 1; i < n_prompt; i++) ids[i] = 3 + (i - 1) % (m->cfg.vocab_size - 3);
    } else {
        n_prompt = tokenizer_encode(tok, g.prompt, 1, 0, ids, steps + 1, err, sizeof(err));
    }
    if (n_prompt == -TOK_ERR_TOO_MANY) {
        /* the ids buffer holds --steps + 1: the limit the tokenizer met is --steps' */
        fprintf(stderr, "bench generate: --steps %d: the prompt needs more than %d tokens, and --steps counts the prompt's "
                        "positions too; raise --steps\n", steps, steps + 1);
        goto out;
    }
    if (n_prompt < 0) { fprintf(stderr, "bench generate: prompt: %s\n", err); goto out; }
    if (n_prompt > steps) {
        fprintf(stderr, "bench generate: the prompt has %d tokens, more than --steps %d\n", n_prompt, steps);
        goto out;
    }

    /* the prompt's pass finds its activations faulted in, as llama.cpp's finds its compute
     * buffer: a load's work, in the load's time (engine.h engine_reserve_scratch) */
    double t_res = now_s();
    if (engine_reserve_scratch(e, n_prompt, &r.reserved, err, sizeof(err))) {
        fprintf(stderr, "bench generate: %s\n", err);
        goto out;
    }
    r.t_load += now_s() - t_res;
    r.n_prompt = n_prompt;
    r.warmup = g.warmup;
    for (int pass = 0; pass < g.warmup; pass++) {
        if (gen_pass(e, smp, ids, n_prompt, steps, &r)) goto out;
        if (!pass) {
            r.c1 = r.t1, r.c_first = r.t_first, r.c_end = r.t_end, r.c_n = r.n;
        }
        /* the timed pass starts as the first did: an empty sequence, the sampler at its seed */
        engine_reset(e, 0);
        sampler_free(smp);
        if (!(smp = sampler_create(m->cfg.vocab_size, g.temperature, g.topp, g.seed))) {
            fprintf(stderr, "bench generate: out of memory\n");
            goto out;
        }
    }
    if (gen_pass(e, smp, ids, n_prompt, steps, &r)) goto out;
    int n = r.n;

    char buf[16];
    if (g.print_ids) {
        for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    } else {
        for (int i = 1; i < n; i++) fputs(tokenizer_decode(tok, ids[i - 1], ids[i], buf, sizeof(buf)), stdout);
        printf("\n");
    }
    fflush(stdout);
    /* a synth model's weights are random (bench model synth): say so, or its words read as a bug */
    const char *mname = engine_model(e)->name;
    if (!g.quiet && !g.print_ids && mname && !strncmp(mname, "synth-", 6))
        fprintf(stderr, "bench generate: note: %s has random weights (bench model synth): its text is noise, its "
                        "speed and memory are a real model's of its shape\n", mname);
    if (!g.quiet) gen_print_figures(&g, e, &r);
    if (g.bandwidth && n - n_prompt - 1 > 0) gen_print_bandwidth(&g, e, &r);
    if (g.accuracy && gen_accuracy(&g, &e, ids, &r)) goto out;
    rc = 0;
out:
    sampler_free(smp);
    free(ids);
    engine_destroy(e);
    free(ls);
    free(ks);
    free(as);
    free(ds);
    return rc;
}

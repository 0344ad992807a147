/* bench list: every module found, with family, devices and options. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "commands.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/compute/kernels_tune.h"
#include "engines/abi/kv.h"
#include "engines/core/runtime/modreg.h"
#include "harness/scenario/trace.h"

/* The capabilities a module declares, by the names docs/modules.md uses. */
static void list_caps(const bench_module *m, char *out, size_t n) {
    static const struct { uint64_t bit; const char *name; } caps[] = {
        {BENCH_CAP_KV_SHARED_POOL, "shared-pool"},   {BENCH_CAP_KV_PREFIX_SHARE, "prefix-share"},
        {BENCH_CAP_KV_FORK, "fork"},                 {BENCH_CAP_ALLOC_THREAD_SAFE, "thread-safe"},
        {BENCH_CAP_ALLOC_RESET, "reset"},            {BENCH_CAP_LOADER_MAPS_FILE, "maps-file"},
    };
    out[0] = 0;
    size_t used = 0;
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
        if (m->caps & caps[i].bit) used += (size_t)snprintf(out + used, used < n ? n - used : 0, "%s%s", used ? ", " : "", caps[i].name);
    if (!strcmp(m->family, "kv")) {
        const struct bench_kv_iface *k = m->iface;
        used += (size_t)snprintf(out + used, used < n ? n - used : 0, "%scache types:", used ? "; " : "");
        for (int t = 0; t < BENCH_DTYPE_COUNT; t++)
            if (bench_kv_stores(k, (bench_dtype)t))
                used += (size_t)snprintf(out + used, used < n ? n - used : 0, " %s", bench_dtype_name((bench_dtype)t));
    }
}

/* An option's type with its range or choices: "size 4096..1g", "enum shared|private". */
static void list_type(const bench_option *o, char *out, size_t n) {
    static const char *const names[] = {"?", "bool", "int", "size", "enum", "string"};
    const char *t = o->type >= BENCH_OPT_BOOL && o->type <= BENCH_OPT_STRING ? names[o->type] : "?";
    if (o->type == BENCH_OPT_ENUM) snprintf(out, n, "enum %s", o->choices);
    else if ((o->type == BENCH_OPT_INT || o->type == BENCH_OPT_SIZE) && o->min < o->max)
        snprintf(out, n, "%s %lld..%lld", t, (long long)o->min, (long long)o->max);
    else if (o->type == BENCH_OPT_STRING) snprintf(out, n, "string (< %d bytes)", BENCH_OPT_STRING_MAX);
    else snprintf(out, n, "%s", t);
    if (o->flags & BENCH_OPTF_SIZES_POOL) strncat(out, " (sizes the pool)", n - strlen(out) - 1);
}

/* One key's entries of the tuner's cache, each with when and under what load it was measured. */
static void list_tuned_entries(const kt_table *t, const char *indent) {
    char desc[1536], when[160];
    kt_table one = {.n = 1};
    for (int i = 0; i < t->n; i++) {
        one.e[0] = t->e[i];
        kt_describe(&one, desc, sizeof(desc));
        kt_describe_when(&t->e[i], when, sizeof(when));
        printf("%s%s\n%s  measured: %s\n", indent, desc, indent, when);
    }
}

/* Production numerics' entries of one thread count: one key per model checked, each naming its
 * file (engine_numerics_model_id), with the check's outcome per rounding family. */
static int list_tuned_production(const char *p, const char *base, kt_table *t) {
    char prefix[KT_KEY_MAX + 32], err[512], (*keys)[KT_KEY_MAX] = calloc(64, KT_KEY_MAX);
    if (!keys) return 0;
    kt_production_key(base, "", prefix, sizeof(prefix));
    int n = kt_cache_keys(p, prefix, keys, 64, err, sizeof(err)), shown = 0;
    for (int k = 0; k < n; k++) {
        if (kt_cache_load(p, keys[k], ~0u, t, err, sizeof(err)) < 0 || !t->n) continue;
        const char *file = strstr(keys[k] + strlen(prefix), "file=");
        printf("      production numerics, model %s (the int8 families competing, each checked on the model):\n",
               file ? file + 5 : keys[k] + strlen(prefix));
        list_tuned_entries(t, "        ");
        shown++;
    }
    free(keys);
    return shown;
}

/* auto's measured choices for this machine and build, per thread count (kernels_tune.h), each
 * with when and under what load it was measured: a choice made on a busy machine is not kept,
 * and one from long ago on a machine since changed is what `--retune` is for. Production
 * numerics' entries follow, per model. */
static void list_tuned(void) {
    char path[1024], key[KT_KEY_MAX], err[512];
    const char *p = kt_cache_path(path, sizeof(path));
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int shown = 0;
    kt_table *t = calloc(1, sizeof(*t));
    if (!t) return;
    for (int threads = 1; p && threads <= (cpus > 0 ? cpus : 1) && threads <= 256; threads++) {
        kt_key(threads, key, sizeof(key));
        int rc = kt_cache_load(p, key, ~0u, t, err, sizeof(err));
        if (rc < 0) {
            printf("  measured by auto: %s\n", err);
            break;
        }
        if (!shown++) printf("  measured by auto on this machine and build (%s; the fastest exact family per dtype and phase):\n", p);
        printf("    %d thread%s:\n", threads, threads > 1 ? "s" : "");
        int any = t->n;
        list_tuned_entries(t, "      ");
        any += list_tuned_production(p, key, t);
        if (!any) printf("      nothing yet\n");
    }
    if (!shown)
        printf("  measured by auto: nothing yet for this machine and build (%s); the first run with auto measures it\n",
               p ? p : "no cache path: set $HOME or $XDG_CACHE_HOME");
    free(t);
}

/* --retune: every kept entry of this machine and build measured again, thread count by thread
 * count, on matrices of the shapes they were measured on. 0, or 1 when one failed. */
static int list_retune(void) {
    char path[1024], key[320], note[2048], err[512];
    const char *p = kt_cache_path(path, sizeof(path));
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int done = 0, rc = 0;
    if (!p) {
        fprintf(stderr, "bench list: --retune: no cache path (set $HOME or $XDG_CACHE_HOME)\n");
        return 1;
    }
    for (int threads = 1; threads <= (cpus > 0 ? cpus : 1) && threads <= 256; threads++) {
        kt_key(threads, key, sizeof(key));
        tp_pool *pool = tp_create(threads);
        int r = pool ? kt_retune(pool, p, key, note, sizeof(note), err, sizeof(err)) : -1;
        tp_destroy(pool);
        if (r < 0) {
            fprintf(stderr, "bench list: --retune, %d threads: %s\n", threads, pool ? err : "no thread pool");
            rc = 1;
        } else if (r == 0) {
            printf("retuned %d thread%s: %s\n", threads, threads > 1 ? "s" : "", note);
            done++;
        }
    }
    if (!done && !rc) printf("retune: nothing kept for this machine and build in %s\n", p);
    return rc;
}

int cmd_list(int argc, char **argv) {
    const char *dir = NULL;
    int retune = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench list [--modules DIR] [--retune]\n\n"
                   "Lists every engine module found (default: $BENCH_MODULE_PATH, else modules/ beside the bench binary,\n"
                   "and a device's modules in the directory of its name there, e.g. modules/cuda/), with its family,\n"
                   "devices, capabilities and options (name, type, range, default). DIR may be several folders\n"
                   "separated by ':', searched in order. A module that cannot run on this machine (a CUDA\n"
                   "module without a GPU) is marked \"not usable here\". Then the built-in kernel families and the\n"
                   "trace formats a serving scenario reads.\n\n"
                   "It ends with what kernels auto measured on this machine and build, each entry with when and under\n"
                   "what load. --retune first measures every such entry again (on matrices of the shapes it was\n"
                   "measured on), keeping it only when no other process used the CPUs meanwhile.\n");
            return 0;
        } else if (!strcmp(argv[i], "--modules") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--retune")) {
            retune = 1;
        } else {
            fprintf(stderr, "bench list: unknown argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    if (retune && list_retune()) return 1;
    modreg r;
    char warn[4096], err[512];
    if (modreg_open_all(dir, &r, warn, sizeof(warn), err, sizeof(err))) {
        fprintf(stderr, "bench list: %s\n", err);
        modreg_close(&r);
        return 1;
    }
    if (warn[0]) fprintf(stderr, "%s", warn);
    printf("modules in %s\n", r.dir);
    for (int fi = 0; modreg_family(fi); fi++) {
        const char *f = modreg_family(fi);
        printf("\n%s:\n", f);
        if (!strcmp(f, "device")) printf("  %-10s %s  [devices: cpu]\n", "cpu", "the core's own forward pass (built in, the default)");
        for (int i = 0; i < r.n; i++) {
            const bench_module *m = r.v[i].mod;
            if (strcmp(m->family, f)) continue;
            int usable = !m->score || m->score() > 0;
            printf("  %-10s %s  [devices: %s]%s\n", m->name, m->summary, m->devices ? m->devices : "cpu",
                   usable ? "" : "  (not usable here)");
            char caps[256];
            list_caps(m, caps, sizeof(caps));
            if (caps[0]) printf("      capabilities: %s\n", caps);
            if (strcmp(m->devices ? m->devices : "cpu", "cpu") || r.dir[strcspn(r.dir, ":")])
                printf("      from %s\n", r.v[i].path);
            for (const bench_option *o = m->options; o && o->name; o++) {
                char type[160];
                list_type(o, type, sizeof(type));
                printf("      %-15s %-34s default %-7s %s\n", o->name, type, o->def, o->help);
            }
        }
    }
    /* the kernels are built in, not modules, but are chosen the same way (--kernels, a scenario axis) */
    char named_only[256];
    kn_isa_list(named_only, sizeof named_only, KN_LIST_NAMED_ONLY);
    printf("\nkernels (CPU, built in; auto: the first exact one this CPU runs; the int8 and bf16 ones round x, and %s %s\n"
           "exact but for measuring: those run only when named):\n", named_only, strchr(named_only, ',') ? "are" : "is");
    for (int i = 0; i < kn_isa_count(); i++) {
        int here = 0;
        const char *name = kn_isa_name(i, &here);
        const char *how = !here ? "(not on this CPU)" : !strcmp(name, kn_isa_resolve("auto")) ? "runs here (auto)"
                        : kn_isa_exact(name) && !kn_isa_auto_candidate(name) ? "runs here (named only)" : "runs here";
        printf("  %-12s %s\n", name, how);
    }
    /* the exact families' view: a model's production numerics may choose vnni or avx2-int8,
     * which read Q4_0 with 16 rows interleaved (bench generate's "repacked" line says) */
    printf("  auto here decodes Q8_0 and Q4_0 %s; Q4_0 matrices are %s at load%s (repack; --no-repack keeps the file's)\n",
           kn_x_split(BENCH_Q8_0) ? "on x split into three int8 parts (exact, AVX512-VNNI)" : "with the weights widened to f32",
           kn_repacks(BENCH_Q4_0) ? "rearranged" : "not rearranged",
           kn_repack_dt(BENCH_Q4_0) == KN_Q4_0_G16 ? " (16 rows interleaved)" : kn_repacks(BENCH_Q4_0) ? " (within rows)" : "");
    printf("  bf16 matrices are grouped at load, 16 rows at a time (repack) %s\n",
           kn_repacks(BENCH_BF16) ? "for the bf16 dot-product GEMM in use"
                                  : "where prefill runs on avx512-bf16 (named, or auto's choice for a model)");
    list_tuned();
    /* read from the table of formats, as a scenario's trace.format is */
    printf("\ntrace formats (a serving scenario's workload.requests.trace.format, docs/serving.md):\n");
    for (int i = 0; i < tr_format_count(); i++) printf("  %-12s %s\n", tr_format_name(i), tr_format_get(i)->about);
    modreg_close(&r);
    return 0;
}

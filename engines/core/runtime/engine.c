#include "engine.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/alloc.h"
#include "engines/abi/kv.h"
#include "engines/abi/loader.h"
#include "engines/modules/common/kv_types.h" /* the KV element types: names, and what each costs */
#include "engines/core/runtime/alloc_trace.h"
#include "engines/core/runtime/alloc_fault.h"
#include "devhost.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/compute/kernels_tune.h"
#include "modreg.h"
#include "engines/core/compute/threadpool.h"
#include "engines/core/compute/transformer.h"
#include "repack.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

struct engine {
    model *m;
    tokenizer *tok;
    modreg_entry loader_mod, kv_mod, alloc_mod;
    const struct bench_loader_iface *loader;
    const struct bench_alloc_iface *alloc;
    void *loader_ctx, *alloc_ctx;
    /* the KV instance: its vtable and context, held here once; the forward pass (tf_ctx.kv)
     * and a device (bench_dev_model.kv) point at this handle */
    bench_kv kv;
    void *loader_opts, *kv_opts, *alloc_opts;   /* the modules' options structs, filled by modreg */
    bench_allocator allocator;      /* the module's, or the trace recorder wrapping it */
    at_recorder *trace;             /* spec->trace_alloc; NULL: none */
    af_state *fault;                /* test hook: every Nth allocation fails (alloc_fault.h); NULL: none */
    bench_host host;
    tp_pool *pool;
    bench_tensor_ref *refs;     /* (n_tensors) */
    const void **data;          /* (n_tensors) tensor bytes, owned by the loader */
    tf_weights w;
    repack rp;                  /* the matrices rearranged at load (engine_spec.repack) */
    tf_ctx tf;
    float *logits;              /* (max_seqs, vocab) */
    tf_span *spans;             /* (max_seqs) a batched decode's */
    devhost *dev;               /* NULL: the forward pass runs on the CPU (transformer.c) */
    int max_pos, max_seqs;
    int ubatch;                 /* the most tokens of one sequence a CPU pass takes (engine_spec.ubatch) */
    bench_dtype k_type, v_type;     /* the KV cache's element types */
    int kv_pooled;              /* the kv module has one pool for every sequence (BENCH_CAP_KV_SHARED_POOL) */
    void (*on_region)(void *user, const void *addr, size_t len, const char *name);
    void *region_user;
    char kernels_note[1536];    /* what auto runs, measured or read (kernels_tune.h); "" when not auto */
    kt_table *kt;               /* production numerics: auto's table, checked once the engine runs; else NULL */
};

/* Names the whole pages inside [addr, addr+len) (the kernel needs CONFIG_ANON_VMA_NAME,
 * Linux 5.17+; failure is expected elsewhere and ignored), and tells the spec's
 * on_region, which is how the harness finds the regions on kernels without it. */
/* The modules' messages (bench_logf): on stderr, where the worker's own go, one line each. */
static void engine_log(const bench_host *h, const char *msg) {
    (void)h;
    fprintf(stderr, "%s\n", msg);
}


/* Every page of the weights the loader holds privately (pread's buffer, an aligned copy) read
 * once, a byte a page, on the pool's threads, before the first forward pass needs them. The
 * loader wrote those pages through the kernel, and in a KVM guest the translation user space
 * reads them by may still be built on its first access: on a 2-vCPU AMD EPYC (family 26 model
 * 2) guest the first 32-token prefill of llama-110m q8_0 through pread took 195-200 ms against
 * 37-41 ms warm, its GEMM running at a sixth of its speed (issue 37; bench generate --warmup 1).
 * This moves that cost into load, where it belongs. Shared and read-only file mappings are the
 * loader's to touch or leave (loader_mmap.c's touch option): touching them reads a cold file in
 * at load, the work a lazy mmap defers. */
typedef struct engine_touch_job {
    const engine *e;
    long page;
} engine_touch_job;

static void engine_touch_task(void *arg, int task, int n_tasks) {
    const engine_touch_job *j = arg;
    const engine *e = j->e;
    const bench_loader l = {e->loader, e->loader_ctx};
    unsigned sum = 0;
    for (int i = task; i < e->m->n_tensors; i += n_tasks) {
        const size_t len = (size_t)e->refs[i].nbytes;
        const unsigned char *p = e->data[i];
        if (!p || !len || bench_loader_memory_kind(&l, p, len) != BENCH_LOADER_MEM_PRIVATE) continue;
        sum += bench_touch_pages(p, len, (size_t)j->page);
    }
    (void)sum;
}

static void engine_touch_private(engine *e) {
    engine_touch_job j = {e, sysconf(_SC_PAGESIZE)};
    if (j.page <= 0) j.page = 4096;
    tp_run(e->pool, engine_touch_task, &j, tp_threads(e->pool));
}

void engine_numerics_model_id(const char *path, char *buf, size_t len) {
    struct stat st;
    char s[1200], file[64];
    uint64_t h = 1469598103934665603ull;
    int ok = path && !stat(path, &st);
    snprintf(s, sizeof(s), "%s:%lld:%lld", path ? path : "", ok ? (long long)st.st_size : 0LL, ok ? (long long)st.st_mtime : 0LL);
    for (const char *c = s; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    /* the file's name, for people reading `bench list`: the cache's separators made harmless */
    const char *base = path ? strrchr(path, '/') : NULL;
    snprintf(file, sizeof(file), "%s", base ? base + 1 : path ? path : "");
    for (char *c = file; *c; c++)
        if (*c == ';' || *c == '=' || (unsigned char)*c < 0x20 || *c == 0x7f) *c = '_';
    snprintf(buf, len, "model=%016llx;file=%s", (unsigned long long)h, file);
}

/* auto by measurement, on the model's own matrices (kernels_tune.h): a failure keeps the flags'
 * choice and says so in the note, since the run itself is not wrong for it. */
static void engine_tune_kernels(engine *e, const engine_spec *spec) {
    kt_mat *mats = malloc((size_t)(e->m->n_tensors ? e->m->n_tensors : 1) * sizeof(*mats));
    int n = 0;
    char err[512];
    if (!mats) {
        snprintf(e->kernels_note, sizeof(e->kernels_note), "kernels auto: the flags' order (out of memory to measure)");
        return;
    }
    for (int i = 0; i < e->m->n_tensors; i++) {
        const model_tensor *t = &e->m->tensors[i];
        if (t->n_dims != 2 || !e->data[i] || t->ne[0] % (int64_t)bench_dtype_block_elems(t->dtype)) continue;
        mats[n++] = (kt_mat){e->data[i], t->dtype, (int)t->ne[1], (int)t->ne[0]};
    }
    char id[128];
    if (spec->numerics == ENGINE_NUMERICS_PRODUCTION) {
        engine_numerics_model_id(spec->model_path, id, sizeof(id));
        e->kt = malloc(sizeof(*e->kt));   /* NULL (out of memory): this engine runs exact numerics */
    }
    if (n && kt_auto_numerics(e->pool, mats, n, kt_mode_from_env(), e->kt ? id : NULL, e->kt, e->kernels_note,
                              sizeof(e->kernels_note), err, sizeof(err)))
        snprintf(e->kernels_note, sizeof(e->kernels_note), "kernels auto: the flags' order (%s)", err);
    free(mats);
}

/* Production numerics, once the engine runs: each family that rounds x and was faster than the
 * exact choice (a PENDING entry of auto's table) is checked on the model (engine_numerics_check),
 * and chosen only where acc_production_ok holds; then the table is applied and kept. */
static void engine_settle_numerics(engine *e) {
    int any = 0;
    for (int i = 0; e->kt && i < e->kt->n; i++) {
        kt_entry *k = &e->kt->e[i];
        if (k->acc != KT_ACC_PENDING) continue;
        acc_figures f, llama;
        char err[512];
        int ok = !engine_numerics_check(e, k->dt, k->prefill, k->acc_family, k->exact, &f, &llama, err, sizeof(err)) &&
                 acc_production_ok(&f, &llama);
        kt_settle_bound(k, llama.kl_mean, llama.err_rel, llama.top1);
        kt_settle(k, ok, f.kl_mean, f.kl_max, f.err_rel, f.top1);
        any = 1;
    }
    char err[512];
    if (any && kt_commit(e->kt, e->kernels_note, sizeof(e->kernels_note), err, sizeof(err)))
        snprintf(e->kernels_note, sizeof(e->kernels_note), "kernels auto: the flags' order (%s)", err);
}

const char *engine_kernels_note(const engine *e) { return e->kernels_note; }

const struct kt_table *engine_kernels_table(const engine *e) { return e->kt; }

/* One pass of engine_numerics_check: n positions of ids into out (n, vocab). */
static int engine_numerics_pass(engine *e, const int *ids, int n, int prefill, float *out, char *err, size_t errlen) {
    const size_t vocab = (size_t)e->m->cfg.vocab_size;
    engine_reset(e, 0);
    int rc = prefill ? engine_forward_all(e, 0, ids, n, 0, out, err, errlen) : 0;
    for (int p = 0; !prefill && !rc && p < n; p++) {
        float *l;
        if (!(rc = engine_forward(e, 0, &ids[p], 1, p, &l, err, errlen))) memcpy(out + (size_t)p * vocab, l, vocab * sizeof(float));
    }
    engine_reset(e, 0);
    return rc;
}

int engine_numerics_check(engine *e, bench_dtype dt, int prefill, const char *family, const char *exact, acc_figures *out,
                          acc_figures *llama, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    memset(llama, 0, sizeof(*llama));
    if (e->dev || !kn_auto_active()) return bench_errf(err, errlen, "numerics check: for kernels auto on the CPU only");
    const int vocab = e->m->cfg.vocab_size, n = e->max_pos < ENGINE_NUMERICS_POS ? e->max_pos : ENGINE_NUMERICS_POS;
    char was[32];
    snprintf(was, sizeof(was), "%s", kn_auto_family(dt, prefill));
    int ids[ENGINE_NUMERICS_POS];
    /* a fixed sequence, BOS (1) first, spread over the vocabulary: the same for every family */
    for (int i = 0; i < n; i++) ids[i] = (int)((1u + 7919u * (unsigned)i) % (unsigned)vocab);
    float *ref = malloc((size_t)n * vocab * sizeof(float)), *var = malloc((size_t)n * vocab * sizeof(float));
    int rc = -1;
    if (!ref || !var) bench_errc(err, errlen, BENCH_ERR_NOMEM, "numerics check: out of memory for %d x %d logits", n, vocab);
    else if (kn_set_tuned_rounding(dt, prefill, exact) || kn_set_tuned_rounding(dt, prefill, family))  /* both, before a pass */
        bench_errf(err, errlen, "numerics check: %s or %s cannot run %s here", exact, family, bench_dtype_name(dt));
    else if (!kn_set_tuned_rounding(dt, prefill, exact) && !engine_numerics_pass(e, ids, n, prefill, ref, err, errlen) &&
             !kn_set_tuned_rounding(dt, prefill, family) && !engine_numerics_pass(e, ids, n, prefill, var, err, errlen)) {
        acc_compare(ref, var, n, vocab, out);
        rc = 0;
        /* llama.cpp's own error here: the exact family again, on x rounded as llama.cpp rounds it */
        if (!kn_set_tuned_rounding(dt, prefill, exact) && !kn_set_llama_x(dt, 1)) {
            if (!engine_numerics_pass(e, ids, n, prefill, var, err, errlen)) acc_compare(ref, var, n, vocab, llama);
            else rc = -1;
            kn_set_llama_x(dt, 0);
        }
    }
    kn_set_tuned_rounding(dt, prefill, was);
    free(ref);
    free(var);
    return rc;
}

/* An engine enum's name from its table of names (NULL-terminated, in the enum's order), and
 * the value of a name (-1 for one the table does not hold). */
static const char *engine_enum_name(const char *const *names, unsigned v) {
    for (unsigned i = 0; names[i]; i++)
        if (i == v) return names[i];
    return "?";
}

static int engine_enum_parse(const char *const *names, const char *name) {
    for (int i = 0; name && names[i]; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

static const char *const engine_numerics_names[] = ENGINE_NUMERICS_NAMES;
static const char *const engine_scratch_names[] = ENGINE_SCRATCH_NAMES;

const char *engine_numerics_name(engine_numerics n) { return engine_enum_name(engine_numerics_names, (unsigned)n); }
int engine_numerics_parse(const char *name) { return engine_enum_parse(engine_numerics_names, name); }
const char *engine_scratch_name(engine_scratch s) { return engine_enum_name(engine_scratch_names, (unsigned)s); }
int engine_scratch_parse(const char *name) { return engine_enum_parse(engine_scratch_names, name); }

/* The loaders reopen the files the model was parsed from: each must still be that file. */
static int engine_open_file(const bench_host *h, const char *path, int flags, char *err, size_t errlen) {
    const engine *e = (const engine *)((const char *)h - offsetof(engine, host));
    return model_reopen_file(e->m, path, flags, err, errlen);
}

static void name_region(const bench_host *h, void *addr, size_t len, int kind) {
    const engine *e = (const engine *)((const char *)h - offsetof(engine, host));
    const char *name = bench_region_name(kind);
    if (!name) {
        fprintf(stderr, "bench: a module named a region of unknown kind %d; it is counted as unnamed memory\n", kind);
        return;
    }
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)addr + page - 1) & ~(page - 1), end = ((uintptr_t)addr + len) & ~(page - 1);
    /* Without the name the kernel may merge the region with a neighbouring anonymous
     * mapping, and the harness, which finds it by address, would then share one VMA's
     * resident pages between them by length. A flag the neighbours lack keeps it a VMA
     * of its own; DONTFORK is harmless here because the engine never forks. */
    if (end > a && prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, a, end - a, name) != 0)
        madvise((void *)a, end - a, MADV_DONTFORK);
    if (e->on_region) e->on_region(e->region_user, addr, len, name);
}

static int kv_is_pooled(const bench_module *kv) { return !!(kv->caps & BENCH_CAP_KV_SHARED_POOL); }

/* The pool size and max_seqs for a KV budget (engine.h: kv_budget_*). *pool_bytes gets the
 * pool's size for a module with a shared pool; 0 otherwise. */
static int size_kv(const engine_spec *spec, const bench_module *kv, uint64_t token_bytes, int max_pos,
                   int *max_seqs, uint64_t *pool_bytes, char *err, size_t errlen) {
    int want = spec->max_seqs > 0 ? spec->max_seqs : 1;
    *pool_bytes = 0;
    *max_seqs = want;
    if (spec->kv_budget_bytes && spec->kv_budget_tokens)
        return bench_errf(err, errlen, "engine: a KV budget of %llu bytes and of %llu positions: give one of them",
                          (unsigned long long)spec->kv_budget_bytes, (unsigned long long)spec->kv_budget_tokens);
    if (spec->kv_budget_tokens > UINT64_MAX / token_bytes)
        return bench_errf(err, errlen, "engine: a KV budget of %llu positions overflows", (unsigned long long)spec->kv_budget_tokens);
    uint64_t budget = spec->kv_budget_bytes ? spec->kv_budget_bytes : spec->kv_budget_tokens * token_bytes;
    if (!budget) return 0;
    if (kv_is_pooled(kv)) {
        char given[160];
        if (modreg_pool_opt_given(kv, &spec->kv_opts, given, sizeof(given)))
            return bench_errc(err, errlen, BENCH_ERR_INVALID, "kv %s: option %s and a KV budget of %llu bytes both size the pool; "
                              "give one of them", kv->name, given, (unsigned long long)budget);
        *pool_bytes = budget;
        return 0;
    }
    /* one cache per sequence, each at full context: the budget decides how many */
    uint64_t per_seq = token_bytes * (uint64_t)max_pos, fit = budget / per_seq;
    if (fit < 1)
        return bench_errf(err, errlen, "kv %s: a KV budget of %llu bytes holds no sequence: each takes %d positions x %llu bytes = %llu bytes "
                          "(raise the budget or lower the context)", kv->name, (unsigned long long)budget, max_pos,
                          (unsigned long long)token_bytes, (unsigned long long)per_seq);
    *max_seqs = spec->max_seqs > 0 && (uint64_t)spec->max_seqs < fit ? spec->max_seqs : fit > 1 << 20 ? 1 << 20 : (int)fit;
    return 0;
}

/* device: NULL for the CPU's modules, else the device's (the allocator always is the host's).
 * *filled: the module's options struct, from opts. */
static int load_module(const engine_spec *spec, const char *device, const char *family, const char *name,
                       const bench_opts *opts, modreg_entry *out, void **filled, char *err, size_t errlen) {
    int rc = modreg_load_for(spec->module_dir, device, family, name, out, err, errlen);
    if (rc) return rc;
    if (out->mod->score && out->mod->score() == 0)
        return bench_errc(err, errlen, BENCH_ERR_REFUSED, "%s module %s is not usable on this machine", family, name);
    return modreg_fill_opts(out->mod, opts, filled, err, errlen);
}

int engine_create(const engine_spec *spec, engine **out, char *err, size_t errlen) {
    *out = NULL;
    engine *e = calloc(1, sizeof(*e));
    if (!e) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory");
    int rc = -BENCH_ERR_FAIL;
    kn_init();
    if (spec->kernels && *spec->kernels) {
        char have[160];
        if (!kn_isa_known(spec->kernels)) {
            kn_isa_list(have, sizeof(have), KN_LIST_ALL);
            bench_errf(err, errlen, "unknown kernels \"%s\" (have: auto, %s)", spec->kernels, have);
            goto err;
        }
        if (kn_set_isa(spec->kernels)) {
            kn_isa_list(have, sizeof(have), KN_LIST_RUNNABLE);
            bench_errf(err, errlen, "kernels %s: this CPU cannot run them (it runs: %s)", spec->kernels, have);
            goto err;
        }
    }
    e->on_region = spec->on_region;
    e->region_user = spec->region_user;
    if (model_open(spec->model_path, spec->tokenizer_path, &e->m, err, errlen)) goto err;
    const model_config *c = &e->m->cfg;
    if (e->m->vocab.n &&
        tokenizer_create_ex(&e->m->vocab, spec->tokenizer_fallback ? TOKENIZER_FALLBACK : 0, &e->tok, err, errlen))
        goto err;
    if (e->tok && tokenizer_warning(e->tok)[0]) fprintf(stderr, "bench: %s\n", tokenizer_warning(e->tok));

    e->max_pos = spec->max_pos > 0 ? spec->max_pos : c->seq_len;
    if (spec->ubatch && spec->ubatch < ENGINE_UBATCH_MIN) {
        rc = bench_errc(err, errlen, BENCH_ERR_INVALID, "ubatch %d: expected %d or more (or 0: %d)", spec->ubatch,
                        ENGINE_UBATCH_MIN, ENGINE_UBATCH);
        goto err;
    }
    e->ubatch = spec->ubatch > 0 ? spec->ubatch : ENGINE_UBATCH;
    if (e->max_pos > c->seq_len_header)
        fprintf(stderr, "bench: note: context %d is past the %d positions %s declares; RoPE extends, quality is the model's business\n",
                e->max_pos, c->seq_len_header, e->m->name);

    /* The platform choice, made here once: off the CPU a device module owns the forward
     * pass, and the loader and KV modules are those built for that device. */
    const char *device = spec->device && *spec->device && strcmp(spec->device, "cpu") ? spec->device : NULL;
    void *stream = NULL;
    if (device && spec->llama_numerics) {
        bench_errf(err, errlen, "llama.cpp's rounding (llama_numerics) is emulated on the CPU only, not on device %s", device);
        goto err;
    }
    if (device && (rc = devhost_open(spec->module_dir, device, &spec->device_opts, &e->dev, &stream, err, errlen))) goto err;
    if ((rc = load_module(spec, NULL, "alloc", spec->alloc ? spec->alloc : "libc", &spec->alloc_opts, &e->alloc_mod,
                          &e->alloc_opts, err, errlen)) ||
        (rc = load_module(spec, device, "loader", spec->loader ? spec->loader : "mmap", &spec->loader_opts, &e->loader_mod,
                          &e->loader_opts, err, errlen)) ||
        (rc = load_module(spec, device, "kv", spec->kv ? spec->kv : "prealloc", &spec->kv_opts, &e->kv_mod, &e->kv_opts,
                          err, errlen)))
        goto err;
    e->alloc = e->alloc_mod.mod->iface;
    e->loader = e->loader_mod.mod->iface;
    e->kv.iface = e->kv_mod.mod->iface;
    /* their interface versions were checked when they loaded (modreg.c) */
    e->k_type = spec->kv_k_type;
    e->v_type = spec->kv_v_type;
    if (spec->kv_defaulted)
        e->k_type = e->v_type = engine_default_cache_type(bench_kv_stores(e->kv.iface, ENGINE_KV_DEFAULT) ? 1u << ENGINE_KV_DEFAULT : 0);
    if (!bench_kv_stores(e->kv.iface, e->k_type) || !bench_kv_stores(e->kv.iface, e->v_type)) {
        char have[128] = "";
        for (int t = 0; t < BENCH_DTYPE_COUNT; t++)
            if (bench_kv_stores(e->kv.iface, (bench_dtype)t))
                snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s%s", have[0] ? ", " : "", bench_dtype_name((bench_dtype)t));
        rc = bench_errc(err, errlen, BENCH_ERR_REFUSED, "kv %s%s%s stores %s, not a %s K / %s V cache", e->kv_mod.mod->name,
                        device ? " on " : "", device ? device : "", have, bench_dtype_name(e->k_type), bench_dtype_name(e->v_type));
        goto err;
    }

    int threads = spec->threads > 0 ? spec->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if (!(e->pool = tp_create(threads))) { bench_errf(err, errlen, "cannot start %d threads", threads); goto err; }

    if ((rc = e->alloc->create(e->alloc_opts, &e->alloc_ctx, err, errlen))) goto err;
    e->allocator = (bench_allocator){e->alloc, e->alloc_ctx};
    if (spec->trace_alloc) {
        if (at_recorder_open(spec->trace_alloc, &e->allocator, &e->trace, err, errlen)) goto err;
        e->allocator = *at_recorder_allocator(e->trace);
    }
    uint64_t fail_every = af_every_from_env();
    if (fail_every) {
        if (!(e->fault = malloc(sizeof(*e->fault)))) { bench_errf(err, errlen, "out of memory"); goto err; }
        af_wrap(e->fault, &e->allocator, fail_every);
        e->allocator = e->fault->self;
    }
    e->host = (bench_host){.parallel_for = tp_run, .pool = e->pool, .n_threads = threads,
                           .alloc = &e->allocator, .name_region = name_region,
                           .device = device ? device : "cpu", .stream = stream, .log = engine_log,
                           .open_file = engine_open_file};

    int n = e->m->n_tensors;
    e->refs = calloc((size_t)n, sizeof(*e->refs));
    e->data = calloc((size_t)n, sizeof(*e->data));
    if (!e->refs || !e->data) { rc = bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory"); goto err; }
    for (int i = 0; i < n; i++) {
        const model_tensor *t = &e->m->tensors[i];
        e->refs[i] = (bench_tensor_ref){t->name, t->dtype, t->file, t->offset, t->nbytes};
    }
    if ((rc = e->loader->open(e->loader_opts, &e->host, &e->loader_ctx, err, errlen))) goto err;
    if ((rc = e->loader->load(e->loader_ctx, (const char *const *)e->m->files, e->m->n_files, e->refs, n, e->data, err, errlen)))
        goto err;
    rc = -BENCH_ERR_FAIL;
    if (tf_bind(e->m, e->data, &e->w, err, errlen)) goto err;
    if (!e->dev) engine_touch_private(e);
    /* the choices are process-wide: a rounding one an earlier engine's check accepted holds for
     * that engine's model only, so it goes; this engine's tuning puts back what its own allows */
    if (!e->dev && kn_auto_active()) {
        kn_drop_rounding();
        engine_tune_kernels(e, spec);
    }

    uint64_t pool_bytes = 0;
    e->kv_pooled = kv_is_pooled(e->kv_mod.mod);
    if ((rc = size_kv(spec, e->kv_mod.mod, engine_kv_token_bytes(e), e->max_pos, &e->max_seqs, &pool_bytes, err, errlen)))
        goto err;
    bench_kv_shape shape = {.n_layers = c->n_layers, .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads,
                            .head_dim = c->dim / c->n_heads, .max_pos = e->max_pos, .max_seqs = e->max_seqs,
                            .attn_f16 = spec->llama_numerics, .k_type = e->k_type, .v_type = e->v_type,
                            .pool_bytes = pool_bytes};
    if ((rc = e->kv.iface->create(&shape, e->kv_opts, &e->host, &e->kv.ctx, err, errlen))) goto err;
    rc = -BENCH_ERR_FAIL;
    if (e->dev && devhost_bind(e->dev, c, &e->w, e->max_pos, &e->kv, err, errlen)) goto err;
    e->logits = malloc((size_t)e->max_seqs * (size_t)c->vocab_size * sizeof(float));
    e->spans = malloc((size_t)e->max_seqs * sizeof(*e->spans));
    if (!e->logits || !e->spans) { rc = bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory"); goto err; }
    e->tf = (tf_ctx){.cfg = c, .w = &e->w, .pool = e->pool, .kv = &e->kv, .alloc = &e->allocator,
                     .llama_numerics = spec->llama_numerics, .scratch_per_pass = spec->scratch == ENGINE_SCRATCH_PASS};
    engine_settle_numerics(e);
    /* after the tuning, which measures the file's layout, and after production numerics settled
     * which families run, whose kernels the layout is chosen for (kn_repack_dt): a rounding
     * family still being checked runs as the exact one until then */
    if (!e->dev && spec->repack != ENGINE_REPACK_OFF) {
        repack_weights(&e->w, c->n_layers, &(bench_loader){e->loader, e->loader_ctx}, &e->host, &e->rp);
        if (e->rp.skipped)
            fprintf(stderr, "bench: note: %d matrices keep the file's layout: the loader does not say how their "
                            "memory is held, or it could be neither written nor copied\n", e->rp.skipped);
    }
    if (spec->reserve_tokens > 0 && (rc = engine_reserve_scratch(e, spec->reserve_tokens, NULL, err, errlen))) goto err;
    *out = e;
    return 0;
err:
    engine_destroy(e);
    return rc < 0 ? rc : -BENCH_ERR_FAIL;
}

int engine_reserve_scratch(engine *e, int n_tokens, int *reserved, char *err, size_t errlen) {
    if (reserved) *reserved = 0;
    if (e->dev || e->tf.scratch_per_pass || n_tokens <= 0) return 0;
    if (n_tokens > e->ubatch) n_tokens = e->ubatch; /* a longer prompt runs in passes of ubatch */
    if (tf_reserve(&e->tf, n_tokens))
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "out of memory reserving the forward pass's scratch for %d tokens",
                          n_tokens);
    if (reserved) *reserved = n_tokens;
    return 0;
}

void engine_destroy(engine *e) {
    if (!e) return;
    if (e->kv.iface && e->kv.ctx) e->kv.iface->destroy(e->kv.ctx);
    tf_release(&e->tf); /* before the allocator module it came from */
    tf_unbind(&e->w);
    repack_release(&e->rp);
    if (e->loader && e->loader_ctx) e->loader->close(e->loader_ctx);
    char terr[256];
    if (at_recorder_close(e->trace, terr, sizeof(terr))) fprintf(stderr, "bench: %s\n", terr);
    if (e->alloc && e->alloc_ctx) e->alloc->destroy(e->alloc_ctx);
    free(e->fault);
    tp_destroy(e->pool);
    devhost_close(e->dev); /* after the loader and KV modules: their device memory goes first */
    free(e->kv_opts);
    free(e->loader_opts);
    free(e->alloc_opts);
    modreg_entry_close(&e->kv_mod);
    modreg_entry_close(&e->loader_mod);
    modreg_entry_close(&e->alloc_mod);
    free(e->refs);
    free(e->data);
    free(e->logits);
    free(e->spans);
    free(e->kt);
    tokenizer_free(e->tok);
    model_free(e->m);
    free(e);
}

const model *engine_model(const engine *e) { return e->m; }
int engine_repacked_matrices(const engine *e) { return e->rp.matrices; }
int engine_repacked_bf16(const engine *e) { return e->rp.bf16; }
int engine_repacked_q4_0_g16(const engine *e) { return e->rp.q4_0_g16; }
uint64_t engine_repacked_bytes(const engine *e) { return e->rp.bytes; }
uint64_t engine_repacked_copied_bytes(const engine *e) { return e->rp.copied; }
const tokenizer *engine_tokenizer(const engine *e) { return e->tok; }

int engine_max_seqs(const engine *e) { return e->max_seqs; }

uint64_t engine_module_caps(const engine *e, const char *family) {
    const modreg_entry *m = !strcmp(family, "loader") ? &e->loader_mod : !strcmp(family, "kv") ? &e->kv_mod
                          : !strcmp(family, "alloc") ? &e->alloc_mod : NULL;
    return m && m->mod ? m->mod->caps : 0;
}
int engine_max_pos(const engine *e) { return e->max_pos; }
int engine_ubatch(const engine *e) { return e->ubatch; }

uint64_t engine_kv_token_bytes(const engine *e) {
    const model_config *c = &e->m->cfg;
    uint64_t kv_dim = (uint64_t)c->n_kv_heads * (uint64_t)(c->dim / c->n_heads);
    return (uint64_t)c->n_layers * (bench_kv_row_bytes(e->k_type, (int)kv_dim) + bench_kv_row_bytes(e->v_type, (int)kv_dim));
}

/* One name of the KV element type table (kv_types.h). */
static int cache_type_one(const char *s, size_t len, bench_dtype *out) {
    const int t = kvq_type_parse(s, len);
    if (t < 0) return -1;
    *out = (bench_dtype)t;
    return 0;
}

void engine_cache_type_names(char *buf, size_t len, const char *last) { kvq_type_names(buf, len, SIZE_MAX, last); }

int engine_parse_cache_type(const char *text, bench_dtype *k, bench_dtype *v, char *err, size_t errlen) {
    const char *slash = text ? strchr(text, '/') : NULL;
    if (!text || !*text ||
        cache_type_one(text, slash ? (size_t)(slash - text) : strlen(text), k) ||
        cache_type_one(slash ? slash + 1 : text, slash ? strlen(slash + 1) : strlen(text), v)) {
        char names[256];
        engine_cache_type_names(names, sizeof names, " or ");
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "KV cache type \"%s\": expected %s, or K/V as in q8_0/f16",
                          text ? text : "", names);
    }
    return 0;
}

void engine_cache_type_name(bench_dtype k, bench_dtype v, char *buf, size_t n) {
    if (k == v) snprintf(buf, n, "%s", bench_dtype_name(k));
    else snprintf(buf, n, "%s/%s", bench_dtype_name(k), bench_dtype_name(v));
}

bench_dtype engine_kv_k_type(const engine *e) { return e->k_type; }
bench_dtype engine_kv_v_type(const engine *e) { return e->v_type; }

static int check_range(engine *e, int seq, int n, int pos0, char *err, size_t errlen) {
    if (seq < 0 || seq >= e->max_seqs)
        return bench_errf(err, errlen, "engine: sequence %d is outside 0..%d (engine_spec.max_seqs)", seq, e->max_seqs - 1);
    if (n <= 0 || pos0 < 0 || pos0 + n > e->max_pos)
        return bench_errf(err, errlen, "engine: positions %d..%d are outside the context of %d (raise it with --ctx)",
                          pos0, pos0 + n - 1, e->max_pos);
    return e->kv.iface->reserve(e->kv.ctx, seq, pos0 + n, err, errlen);
}

/* A prefix-sharing KV module keys its cache on the ids it is told. */
static void tell_tokens(engine *e, int seq, const int *tokens, int n, int pos0) {
    bench_kv_tokens(&e->kv, seq, pos0, n, tokens);
}

/* tokens at pos0.. of seq on the CPU, in passes of at most e->ubatch; out: the logits of the
 * last position (all 0) or of every one (all 1). The passes are of equal length give or take
 * one, so that each holds half of ubatch or more (>= ENGINE_UBATCH_MIN / 2) tokens and runs
 * the GEMMs, whose bits do not depend on how many tokens a pass has; a remainder of a few
 * tokens would run the matrix-vector kernels (1 to 8 tokens), which sum in another order. */
static int engine_cpu_forward(engine *e, int seq, const int *tokens, int n, int pos0, float *out, int all, char *err,
                              size_t errlen) {
    const size_t vocab = (size_t)e->m->cfg.vocab_size;
    const int passes = (n + e->ubatch - 1) / e->ubatch;
    for (int p = 0, i = 0; p < passes; p++) {
        const int m = (int)((int64_t)n * (p + 1) / passes) - i;
        if (tf_forward(&e->tf, seq, tokens + i, m, pos0 + i, all ? out + (size_t)i * vocab : out, all ? m : 1, err, errlen))
            return -1;
        i += m;
    }
    return 0;
}

int engine_forward(engine *e, int seq, const int *tokens, int n, int pos0, float **logits, char *err, size_t errlen) {
    int rc = check_range(e, seq, n, pos0, err, errlen);
    if (rc) return rc;
    tell_tokens(e, seq, tokens, n, pos0);
    if (e->dev ? devhost_forward(e->dev, seq, tokens, n, pos0, e->logits, 1, err, errlen)
               : engine_cpu_forward(e, seq, tokens, n, pos0, e->logits, 0, err, errlen))
        return -1;
    *logits = e->logits;
    return 0;
}

int engine_forward_all(engine *e, int seq, const int *tokens, int n, int pos0, float *out, char *err, size_t errlen) {
    int rc = check_range(e, seq, n, pos0, err, errlen);
    if (rc) return rc;
    tell_tokens(e, seq, tokens, n, pos0);
    return e->dev ? devhost_forward(e->dev, seq, tokens, n, pos0, out, n, err, errlen)
                  : engine_cpu_forward(e, seq, tokens, n, pos0, out, 1, err, errlen);
}

int engine_forward_batch(engine *e, const int *seqs, const int *tokens, const int *pos, int n, float **logits,
                         char *err, size_t errlen) {
    if (n < 1 || n > e->max_seqs)
        return bench_errf(err, errlen, "engine: a batch of %d sequences: expected 1..%d", n, e->max_seqs);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (seqs[j] == seqs[i]) return bench_errf(err, errlen, "engine: sequence %d is twice in one batch", seqs[i]);
    for (int i = 0; i < n; i++) {
        int rc = check_range(e, seqs[i], 1, pos[i], err, errlen);
        if (rc) return rc;
        tell_tokens(e, seqs[i], &tokens[i], 1, pos[i]);
        e->spans[i] = (tf_span){.seq = seqs[i], .pos0 = pos[i], .n = 1};
    }
    if (e->dev) {
        /* a device runs the batch one sequence at a time (device.h has no batched forward yet) */
        size_t vocab = (size_t)e->m->cfg.vocab_size;
        for (int i = 0; i < n; i++)
            if (devhost_forward(e->dev, seqs[i], &tokens[i], 1, pos[i], e->logits + (size_t)i * vocab, 1, err, errlen))
                return -1;
    } else if (tf_forward_spans(&e->tf, e->spans, n, tokens, e->logits, n, err, errlen)) {
        return -1;
    }
    *logits = e->logits;
    return 0;
}

int engine_reserve(engine *e, int seq, int n_pos, char *err, size_t errlen) {
    if (n_pos < 1) return bench_errf(err, errlen, "engine: reserve %d positions: expected at least 1", n_pos);
    return check_range(e, seq, n_pos, 0, err, errlen);
}

int engine_share_prefix(engine *e, int seq, const int *ids, int n, char *err, size_t errlen) {
    if (seq < 0 || seq >= e->max_seqs)
        return bench_errf(err, errlen, "engine: sequence %d is outside 0..%d (engine_spec.max_seqs)", seq, e->max_seqs - 1);
    return bench_kv_share_prefix(&e->kv, seq, ids, n, err, errlen);
}

engine_kv_mem engine_kv_memory(const engine *e) {
    bench_kv_memory m = bench_kv_mem(&e->kv);
    return (engine_kv_mem){.reserved = (double)m.reserved, .live = (double)m.used - (double)m.cached,
                           .cached = (double)m.cached, .wasted = (double)m.wasted, .shared_pool = e->kv_pooled};
}

void engine_reset(engine *e, int seq) {
    bench_kv_release(&e->kv, seq);
}

typedef struct prefix_sink { const bench_counter_sink *inner; const char *family; } prefix_sink;

static void emit_prefixed_as(void *user, const char *name, const char *unit, int cls, int better, double v) {
    const prefix_sink *p = user;
    char full[128];
    snprintf(full, sizeof(full), "%s.%s", p->family, name);
    bench_emit_as(p->inner, full, unit, cls, better, v);
}

static void emit_prefixed(void *user, const char *name, const char *unit, double v) {
    emit_prefixed_as(user, name, unit, BENCH_CTR_UNIT, BENCH_BETTER_NONE, v);
}

void engine_counters(const engine *e, const bench_counter_sink *sink) {
    prefix_sink ps;
    bench_counter_sink s = {emit_prefixed, &ps, emit_prefixed_as};
    ps = (prefix_sink){sink, "loader"};
    bench_loader_counters(&(bench_loader){e->loader, e->loader_ctx}, &s);
    ps = (prefix_sink){sink, "kv"};
    bench_kv_counters(&e->kv, &s);
    ps = (prefix_sink){sink, "alloc"};
    bench_alloc_counters(&(bench_allocator){e->alloc, e->alloc_ctx}, &s);
    ps = (prefix_sink){sink, "device"};
    if (e->dev) devhost_counters(e->dev, &s);
    bench_emit_as(sink, "engine.scratch_allocs", "count", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)e->tf.scratch_allocs);
    /* the activations' kept block (0 under scratch=pass) and the pass length that bounds it */
    bench_emit_as(sink, "engine.scratch_bytes", "B", BENCH_CTR_EXACT, BENCH_BETTER_LOWER, (double)e->tf.scratch_bytes);
    bench_emit_as(sink, "engine.ubatch", "tokens", BENCH_CTR_INFO, BENCH_BETTER_NONE, (double)e->ubatch);
    if (e->fault) {     /* the test hook's counts (alloc_fault.h): shown, never judged */
        bench_emit_as(sink, "engine.alloc_fault_calls", "count", BENCH_CTR_INFO, BENCH_BETTER_NONE, (double)e->fault->calls);
        bench_emit_as(sink, "engine.alloc_fault_failed", "count", BENCH_CTR_INFO, BENCH_BETTER_NONE, (double)e->fault->failed);
    }
}

int engine_sample(engine *e, sampler *s, float *logits) {
    int token;
    if (e->dev && devhost_sample(e->dev, s, &token) == 0) return token;
    return sampler_sample(s, logits);
}

const char *engine_device(const engine *e) { return e->dev ? devhost_name(e->dev) : "cpu"; }

double engine_device_bandwidth(engine *e, size_t bytes_per_array, int reps) {
    return e->dev ? devhost_bandwidth(e->dev, bytes_per_array, reps) : 0;
}

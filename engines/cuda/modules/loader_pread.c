/* loader "pread" on CUDA (pageable): each chunk of the files is pread into one pageable
 * buffer, then cudaMemcpy'd to the device. The driver stages pageable memory through
 * its own pinned buffers, and the copy waits for each read: the baseline that loader
 * "pinned" overlaps. Counters: engines/cuda/ld_cuda.h. */
#include "engines/cuda/cu_util.h"
#include "engines/cuda/ld_cuda.h"

typedef struct pread_opts {
    uint64_t chunk;
} pread_opts;

static const bench_option pread_options[] = {
    BENCH_OPTION_SIZE(pread_opts, chunk, "16m", 4096, 1ll << 30, "bytes per read and per copy"),
    BENCH_OPTION_END,
};

typedef struct pread_ctx {
    ldc l;
    uint64_t chunk;
    uint8_t *buf;                   /* (chunk) pageable staging */
    const char *const *files;       /* during load() */
} pread_ctx;

static int pread_open(const void *opts, const bench_host *host, void **out, char *err, size_t errlen) {
    pread_ctx *c = calloc(1, sizeof(*c));
    if (!c) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader pread: out of memory");
    if (ldc_init(&c->l, "loader pread", host, err, errlen)) goto fail;
    c->chunk = ((const pread_opts *)opts)->chunk;
    if (c->chunk < 4096 || c->chunk > (1ull << 30)) {
        bench_errf(err, errlen, "loader pread: option chunk=%llu: expected 4k..1g", (unsigned long long)c->chunk);
        goto fail;
    }
    *out = c;
    return 0;
fail:
    free(c);
    return -1;
}

static int p_wait(void *u, int slot, char *err, size_t errlen) { (void)u, (void)slot, (void)err, (void)errlen; return 0; }
static int p_submit(void *u, int slot, char *err, size_t errlen) { (void)u, (void)slot, (void)err, (void)errlen; return 0; }

static int p_read(void *u, int slot, const stg_chunk *ch, char *err, size_t errlen) {
    pread_ctx *c = u;
    (void)slot;
    return ldc_read(&c->l, ch->file, c->files[ch->file], c->buf, ch->off, ch->len, err, errlen);
}

static int p_copy(void *u, int slot, const stg_copy *cp, char *err, size_t errlen) {
    pread_ctx *c = u;
    (void)slot;
    CU_TRY(cudaMemcpy((uint8_t *)c->l.dev + cp->dst, c->buf + cp->slot_off, cp->len, cudaMemcpyHostToDevice),
           "loader pread: cudaMemcpy");
    c->l.h2d_bytes += cp->len;
    return 0;
}

static const stg_ops pread_ops = {p_wait, p_read, p_copy, p_submit};

static int pread_load(void *ctx, const char *const *files, int n_files, const bench_tensor_ref *t, int n,
                      const void **data, char *err, size_t errlen) {
    pread_ctx *c = ctx;
    if (ldc_begin(&c->l, files, n_files, t, n, data, err, errlen)) return -1;
    stg_piece *pieces = ldc_pieces(&c->l, t, n);
    stg_plan plan = {0};
    c->buf = malloc((size_t)c->chunk);
    c->files = files;
    int rc = !pieces || !c->buf ? bench_errc(err, errlen, BENCH_ERR_NOMEM, "loader pread: out of memory")
                                : stg_plan_make(pieces, n, (size_t)c->chunk, 0, &plan, err, errlen);
    if (!rc) rc = stg_run(&plan, 1, &pread_ops, c, err, errlen);
    if (ldc_end(&c->l, rc ? NULL : err, rc ? 0 : errlen) && !rc) rc = -1;
    stg_plan_free(&plan);
    free(pieces);
    free(c->buf);
    c->buf = NULL;
    c->files = NULL;
    return rc;
}

static void pread_counters(void *ctx, const bench_counter_sink *s) {
    pread_ctx *c = ctx;
    ldc_counters(&c->l, s);
}

static void pread_close(void *ctx) {
    pread_ctx *c = ctx;
    if (!c) return;
    ldc_close(&c->l);
    free(c);
}

static const struct bench_loader_iface pread_iface = {
    .version = BENCH_LOADER_IFACE_VERSION,
    .open = pread_open,
    .load = pread_load,
    .counters = pread_counters,
    .close = pread_close,
};

static const bench_module pread_module = {
    .api_version = BENCH_MODULE_API_VERSION,
    .family = "loader",
    .name = "pread",
    .summary = "pageable: pread each chunk into one malloc'd buffer, then cudaMemcpy it to the device",
    .devices = "cuda",
    .options = pread_options,
    .opts_size = sizeof(pread_opts),
    .score = cu_score,
    .iface = &pread_iface,
};

BENCH_MODULE_EXPORT const bench_module *bench_module_init(void) { return &pread_module; }

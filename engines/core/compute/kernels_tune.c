/* auto chosen by measurement: see kernels_tune.h. */
#include "kernels_tune.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "kernels.h"
#include "util/ut_clock.h"
#include "util/ut_cpuload.h"
#include "util/ut_fs.h"

#define KT_MAX_DECODE_BYTES (2ull << 30)    /* a larger model is timed on its first 2 GiB */
#define KT_LOAD_MIN_S 0.3                   /* the shortest window the machine's load is read over */

static double kt_now(void) { return 1e-9 * (double)ut_now_ns(); }

/* ---- the key ---- */

static uint64_t kt_fnv(const char *s, uint64_t h) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The first value of "name<spaces>: value" in /proc/cpuinfo. */
static void kt_cpuinfo(const char *name, char *out, size_t len) {
    snprintf(out, len, "?");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    size_t nl = strlen(name);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, name, nl) || (line[nl] != ' ' && line[nl] != '\t' && line[nl] != ':')) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        colon++;
        while (*colon == ' ') colon++;
        colon[strcspn(colon, "\n")] = 0;
        snprintf(out, len, "%s", colon);
        break;
    }
    fclose(f);
}

typedef struct kt_buildid {
    char hex[2 * 20 + 1];
} kt_buildid;

/* The main program's GNU build-id (the linker's hash of the code): a rebuilt bench is another
 * build, whose kernels may differ, so its measurements are not reused. */
static int kt_phdr(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    kt_buildid *b = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
            const char *name = p + sizeof(*nh), *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                size_t n = nh->n_descsz < 20 ? nh->n_descsz : 20;
                for (size_t k = 0; k < n; k++) snprintf(b->hex + 2 * k, 3, "%02x", (unsigned char)desc[k]);
                return 1;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 1;   /* the first object is the main program: stop there */
}

void kt_key(int threads, char *buf, size_t len) {
    char model[128], fam[16], mod[16], step[16], flags[4096];
    kt_cpuinfo("model name", model, sizeof(model));
    kt_cpuinfo("cpu family", fam, sizeof(fam));
    kt_cpuinfo("model", mod, sizeof(mod));
    kt_cpuinfo("stepping", step, sizeof(step));
    kt_cpuinfo("flags", flags, sizeof(flags));
    kt_buildid b = {"unknown"};
    dl_iterate_phdr(kt_phdr, &b);
    for (char *c = model; *c; c++)
        if (*c == '\t' || *c == ';') *c = ' ';
    snprintf(buf, len, "cpu=%s;fms=%s/%s/%s;flags=%016llx;build=%s;threads=%d", model, fam, mod, step,
             (unsigned long long)kt_fnv(flags, 1469598103934665603ull), b.hex, threads);
}

const char *kt_cache_path(char *buf, size_t len) {
    const char *env = getenv("BENCH_KERNELS_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && *env) snprintf(buf, len, "%s", env);
    else if (xdg && *xdg) snprintf(buf, len, "%s/bench/kernels-auto.tsv", xdg);
    else if (home && *home) snprintf(buf, len, "%s/.cache/bench/kernels-auto.tsv", home);
    else return NULL;
    return buf;
}

int kt_mode_from_env(void) {
    const char *m = getenv("BENCH_KERNELS_TUNE");
    if (!m || !*m) return KT_TUNE;
    if (!strcmp(m, "0") || !strcmp(m, "off")) return KT_OFF;
    if (!strcmp(m, "read")) return KT_READ;
    return KT_TUNE;
}

/* ---- measuring ---- */

/* The exact families this CPU runs; the reference (portable) only where it is the only one. */
static int kt_families(char fam[KT_MAX_FAMILIES][16]) {
    int n = 0, portable = 0;
    const char *ref = kn_isa_reference();
    for (int i = 0; i < kn_isa_count(); i++) {
        int here;
        const char *name = kn_isa_name(i, &here);
        if (!here || !kn_isa_auto_candidate(name)) continue;
        if (!strcmp(name, ref)) {
            portable = 1;
            continue;
        }
        if (n < KT_MAX_FAMILIES) snprintf(fam[n++], 16, "%s", name);
    }
    if (!n && portable) snprintf(fam[n++], 16, "%s", ref);
    return n;
}

/* fam's n_exact exact families, then, under production numerics, every family this CPU runs
 * that rounds x for dt (engine.h engine_numerics). Returns how many. */
static int kt_families_for(char fam[KT_MAX_FAMILIES][16], int n_exact, int production, bench_dtype dt) {
    int n = n_exact;
    for (int i = 0; production && i < kn_isa_count() && n < KT_MAX_FAMILIES; i++) {
        int here;
        const char *name = kn_isa_name(i, &here);
        if (here && kn_isa_rounds(name, dt)) snprintf(fam[n++], 16, "%s", name);
    }
    return n;
}

static char kt_scaled_family[16];
static double kt_scale_factor = 1;

void kt_test_scale(const char *family, double factor) {
    snprintf(kt_scaled_family, sizeof(kt_scaled_family), "%s", family && factor != 1 ? family : "");
    kt_scale_factor = family ? factor : 1;
}

typedef struct kt_bufs {
    float *x, *y;       /* (KT_PREFILL_N, largest cols), (KT_PREFILL_N, largest rows) */
    int *idx;           /* (n): the matrices of one dtype */
} kt_bufs;

static void kt_bufs_free(kt_bufs *b) {
    free(b->x);
    free(b->y);
    free(b->idx);
}

/* Buffers for products with every matrix of m at n = KT_PREFILL_N. 0, or -1 out of memory. */
static int kt_bufs_init(kt_bufs *b, const kt_mat *m, int n) {
    int max_rows = 1, max_cols = 1;
    for (int i = 0; i < n; i++) {
        if (m[i].rows > max_rows) max_rows = m[i].rows;
        if (m[i].cols > max_cols) max_cols = m[i].cols;
    }
    *b = (kt_bufs){malloc((size_t)KT_PREFILL_N * max_cols * sizeof(float)), malloc((size_t)KT_PREFILL_N * max_rows * sizeof(float)),
                   malloc((size_t)(n ? n : 1) * sizeof(int))};
    if (!b->x || !b->y || !b->idx) {
        kt_bufs_free(b);
        return -1;
    }
    for (size_t i = 0; i < (size_t)KT_PREFILL_N * max_cols; i++) b->x[i] = (float)((i * 7919u) % 1000u) * 1e-3f - 0.5f;
    return 0;
}

/* The matrices of dtype dt into b->idx, up to KT_MAX_DECODE_BYTES (at least one); their bytes,
 * and the largest one's index (-1 when there is none). Returns how many. */
static int kt_select(const kt_mat *m, int n, int dt, kt_bufs *b, double *bytes, int *largest) {
    int n_idx = 0;
    *bytes = 0;
    *largest = -1;
    for (int i = 0; i < n; i++) {
        if ((int)m[i].dt != dt) continue;
        double mb = (double)bench_dtype_row_bytes(m[i].dt, m[i].cols) * m[i].rows;
        if (*largest < 0 || (double)m[i].rows * m[i].cols > (double)m[*largest].rows * m[*largest].cols) *largest = i;
        if (*bytes + mb > (double)KT_MAX_DECODE_BYTES && n_idx) continue;
        b->idx[n_idx++] = i;
        *bytes += mb;
    }
    return n_idx;
}

/* Seconds for one pass of family fam: every decode matrix at n = 1, or the prefill one at
 * KT_PREFILL_N; < 0 when fam is not one this CPU runs. Leaves fam as auto's choice. */
static double kt_pass(tp_pool *pool, const kt_mat *m, const int *idx, int n_idx, int prefill, const char *fam, const kt_bufs *b) {
    const bench_dtype dt = m[idx[0]].dt;
    if (kn_set_tuned_rounding(dt, prefill, fam)) return -1;     /* an exact family, or one kt_families_for lists */
    double t0 = kt_now();
    for (int k = 0; k < n_idx; k++) {
        const kt_mat *a = &m[idx[k]];
        kn_matmul(pool, b->y, b->x, prefill ? KT_PREFILL_N : 1, a->w, a->dt, a->rows, a->cols);
    }
    double s = kt_now() - t0;
    return kt_scaled_family[0] && !strcmp(fam, kt_scaled_family) ? s * kt_scale_factor : s;
}

int kt_pick(const double *rate, const int *rounds, int n, int base, int prefill, int *rounding) {
    const double margin = prefill ? KT_MARGIN : KT_MARGIN_DECODE;
    int pick = -1;
    for (int f = 0; f < n; f++)
        if (!rounds[f] && (pick < 0 || rate[f] > rate[pick])) pick = f;
    /* the flags' choice stays unless another is faster by more than the margin */
    if (base >= 0 && (pick < 0 || rate[pick] <= rate[base] * (1.0 + margin))) pick = base;
    /* among the families that round x and beat that choice, the first listed (the 512-bit one
     * before avx2-int8) stays unless a later one beats it by the margin as well: one pass's
     * noise put avx2-int8 3.5% ahead of vnni in Q6_K decode on Zen 4, where vnni decoded the
     * model 1.14x faster (6 paired rounds, docs/PERFORMANCE.md "Against llama.cpp on Zen 4") */
    int r = -1;
    for (int f = 0; f < n; f++)
        if (rounds[f] && (pick < 0 || rate[f] > rate[pick] * (1.0 + margin)) && (r < 0 || rate[f] > rate[r] * (1.0 + margin)))
            r = f;
    *rounding = r;
    return pick;
}

static int kt_measure_one(tp_pool *pool, const kt_mat *m, const int *idx, int n_idx, int prefill, double work,
                          char fam[KT_MAX_FAMILIES][16], int n_fam, const kt_bufs *b, kt_entry *e) {
    const bench_dtype dt = m[idx[0]].dt;
    double best[KT_MAX_FAMILIES];
    for (int f = 0; f < n_fam; f++) best[f] = 1e300;
    for (int round = 0; round <= KT_ROUNDS; round++)
        for (int k = 0; k < n_fam; k++) {
            int f = (k + round) % n_fam;    /* each family first in some round: no order favours one */
            double s = kt_pass(pool, m, idx, n_idx, prefill, fam[f], b);
            if (s < 0) return -1;
            if (round > 0 && s < best[f]) best[f] = s;     /* round 0 warms caches and pages */
        }
    kn_set_tuned(dt, prefill, NULL);
    const char *base = kn_auto_family(dt, prefill);
    *e = (kt_entry){.dt = dt, .prefill = prefill, .n_families = n_fam, .bytes = work,
                    .bound_kl_mean = NAN, .bound_err_rel = NAN, .bound_top1 = NAN};
    int base_i = -1, rounds[KT_MAX_FAMILIES];
    for (int f = 0; f < n_fam; f++) {
        snprintf(e->family[f], sizeof(e->family[f]), "%s", fam[f]);
        e->rate[f] = work / best[f] / 1e9;
        rounds[f] = kn_isa_rounds(fam[f], dt);
        if (!strcmp(fam[f], base)) base_i = f;
    }
    int r;
    const int pick = kt_pick(e->rate, rounds, n_fam, base_i, prefill, &r);
    snprintf(e->chosen, sizeof(e->chosen), "%s", fam[pick]);
    /* a family that rounds x runs only once the caller's check on the model accepts it (kt_settle) */
    if (r >= 0) {
        e->acc = KT_ACC_PENDING;
        snprintf(e->exact, sizeof(e->exact), "%s", fam[pick]);
        snprintf(e->acc_family, sizeof(e->acc_family), "%s", fam[r]);
        snprintf(e->chosen, sizeof(e->chosen), "%s", fam[r]);
    }
    return 0;
}

/* Every dtype of m, both phases, into out->e. 0, or -1 with err. */
static int kt_measure_all(tp_pool *pool, const kt_mat *m, int n, char fam[KT_MAX_FAMILIES][16], int n_fam, kt_bufs *b,
                          kt_table *out, char *err, size_t errlen) {
    for (int dt = 0; dt < BENCH_DTYPE_COUNT; dt++) {
        double bytes;
        int largest, n_idx = kt_select(m, n, dt, b, &bytes, &largest);
        if (!n_idx) continue;
        const kt_mat *big = &m[largest];
        double flops = 2.0 * big->rows * (double)big->cols * KT_PREFILL_N;
        char fam_dt[KT_MAX_FAMILIES][16];
        memcpy(fam_dt, fam, sizeof(fam_dt));
        int nf = kt_families_for(fam_dt, n_fam, out->production, (bench_dtype)dt);
        if (kt_measure_one(pool, m, b->idx, n_idx, 0, bytes, fam_dt, nf, b, &out->e[out->n]) ||
            kt_measure_one(pool, m, &largest, 1, 1, flops, fam_dt, nf, b, &out->e[out->n + 1]))
            return bench_errf(err, errlen, "kernels auto: a family this CPU runs was refused");
        for (int k = 0; k < 2; k++) {
            out->e[out->n + k].rows = big->rows;
            out->e[out->n + k].cols = big->cols;
        }
        out->n += 2;
    }
    return 0;
}

int kt_measure(tp_pool *pool, const kt_mat *m, int n, kt_table *out, char *err, size_t errlen) {
    char fam[KT_MAX_FAMILIES][16];
    int n_fam = kt_families(fam);
    out->n = 0;
    out->from_cache = 0;
    out->busy = 0;
    if (!kn_auto_active()) return bench_errf(err, errlen, "kernels auto: a family was asked by name; nothing to measure");
    if (!n_fam) return bench_errf(err, errlen, "kernels auto: no exact family runs on this CPU");
    kt_bufs b;
    if (kt_bufs_init(&b, m, n)) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kernels auto: out of memory for the timing buffers");
    /* the load over the whole measurement: the pool's threads are this process's own time */
    ut_cpu_snap s0, s1;
    ut_cpu_read(&s0);
    double t0 = kt_now();
    int rc = kt_measure_all(pool, m, n, fam, n_fam, &b, out, err, errlen);
    /* /proc/stat counts in ticks (10 ms): a small model's measurement of a few ms would be a
     * tick or two, and one tick of another process's would read as a busy machine. So the
     * window is at least KT_LOAD_MIN_S, the rest of it idle here, where others show plainly. */
    double left = KT_LOAD_MIN_S - (kt_now() - t0);
    if (left > 0) nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = (long)(left * 1e9)}, NULL);
    ut_cpu_read(&s1);
    ut_cpu_load l = ut_cpu_between(&s0, &s1, 0);
    out->busy = ut_cpu_busy(&l);
    for (int i = 0; i < out->n; i++) {
        out->e[i].when = (double)time(NULL);
        out->e[i].load1 = s1.ok ? s1.load1 : NAN;
        out->e[i].others = l.others;
    }
    kt_bufs_free(&b);
    return rc;
}

/* The family e recorded as best after its choice, or NULL when it recorded no other. */
static const char *kt_runner_up(const kt_entry *e) {
    int r = -1;
    for (int f = 0; f < e->n_families; f++)
        if (strcmp(e->family[f], e->chosen) && (r < 0 || e->rate[f] > e->rate[r])) r = f;
    return r < 0 ? NULL : e->family[r];
}

int kt_recheck(tp_pool *pool, const kt_mat *m, int n, const kt_table *t, char *why, size_t whylen) {
    kt_bufs b;
    if (whylen) why[0] = 0;
    if (kt_bufs_init(&b, m, n)) return -1;
    int stale = 0;
    for (int i = 0; i < t->n && !stale; i++) {
        const kt_entry *e = &t->e[i];
        const char *runner = kt_runner_up(e);
        double bytes;
        int largest, n_idx = kt_select(m, n, e->dt, &b, &bytes, &largest);
        if (!runner || !n_idx) continue;
        const int *idx = e->prefill ? &largest : b.idx;
        int k = e->prefill ? 1 : n_idx;
        double c1 = kt_pass(pool, m, idx, k, e->prefill, e->chosen, &b), r = kt_pass(pool, m, idx, k, e->prefill, runner, &b),
               c2 = kt_pass(pool, m, idx, k, e->prefill, e->chosen, &b);
        kn_set_tuned(e->dt, e->prefill, NULL);
        double c = c1 < c2 ? c1 : c2;
        /* a family that no longer runs here is a stale entry as well */
        if (c1 < 0 || r < 0 || c > r * (1.0 + KT_RECHECK_MARGIN)) {
            stale = 1;
            snprintf(why, whylen, "%s %s: %s now %.2fx as fast as the kept %s", bench_dtype_name(e->dt),
                     e->prefill ? "prefill" : "decode", runner, r > 0 ? c / r : 0.0, e->chosen);
        }
    }
    kt_bufs_free(&b);
    return stale;
}

/* ---- the cache file: a line per (key, dtype, phase), tab-separated ----
 *   KEY  DTYPE  decode|prefill  CHOSEN  WORK  FAMILY=RATE,FAMILY=RATE  v2  ROWSxCOLS  WHEN  LOAD1  OTHERS  CHECKED
 * Version 1 lines end after the rates; version 2 adds the version column and then the
 * largest matrix's shape, the Unix time, the 1-minute load average and the share of the CPUs
 * others used ("-": unknown), and the Unix time a quiet re-check last confirmed it (0: never). A bench of version 1 reads a version 2 line as its own (the
 * extra columns end its last rate's number), and a later version appends its columns after
 * these, so each reads the others' files. */
/* Version 3 appends a column where production numerics checked a family that rounds x:
 * accepted|refused:FAMILY:EXACT:KL_MEAN:KL_MAX:ERR_REL:TOP1 (kt_entry's acc fields); version 4
 * appends :BOUND_KL_MEAN:BOUND_ERR_REL:BOUND_TOP1 to it (llama.cpp's own figures, kt_entry's
 * bound_*), which a version 3 reader's sscanf leaves unread. */
#define KT_FILE_VERSION 4
#define KT_FIELDS 12

static double kt_num_or_nan(const char *s) { return strcmp(s, "-") ? strtod(s, NULL) : NAN; }

static int kt_parse(char *line, char *key, size_t keylen, kt_entry *e) {
    char *f[KT_FIELDS];
    int nf = 1;
    line[strcspn(line, "\n")] = 0;
    f[0] = line;
    for (char *tab; nf < KT_FIELDS && (tab = strchr(f[nf - 1], '\t')); nf++) {
        *tab = 0;
        f[nf] = tab + 1;
    }
    if (nf < 6) return -1;
    snprintf(key, keylen, "%s", f[0]);
    int dt = bench_dtype_parse(f[1]);
    if (dt < 0 || (strcmp(f[2], "decode") && strcmp(f[2], "prefill"))) return -1;
    *e = (kt_entry){.dt = (bench_dtype)dt, .prefill = !strcmp(f[2], "prefill"), .bytes = strtod(f[4], NULL), .load1 = NAN, .others = NAN,
                    .bound_kl_mean = NAN, .bound_err_rel = NAN, .bound_top1 = NAN};
    snprintf(e->chosen, sizeof(e->chosen), "%s", f[3]);
    if (nf > 6) {
        if (f[6][0] != 'v' || atoi(f[6] + 1) < 2 || nf < KT_FIELDS || sscanf(f[7], "%dx%d", &e->rows, &e->cols) != 2) return -1;
        char *more = strchr(f[11], '\t');
        f[11][strcspn(f[11], "\t")] = 0;  /* a later version's columns follow */
        char state[16];
        double b[3];
        const int got = more ? sscanf(more + 1, "%15[a-z]:%15[^:]:%15[^:]:%lf:%lf:%lf:%lf:%lf:%lf:%lf", state, e->acc_family,
                                      e->exact, &e->kl_mean, &e->kl_max, &e->err_rel, &e->top1, &b[0], &b[1], &b[2]) : 0;
        if (got >= 7) e->acc = !strcmp(state, "accepted") ? KT_ACC_ACCEPTED : KT_ACC_REFUSED;
        if (got == 10) e->bound_kl_mean = b[0], e->bound_err_rel = b[1], e->bound_top1 = b[2];
        e->when = strtod(f[8], NULL);
        e->load1 = kt_num_or_nan(f[9]);
        e->others = kt_num_or_nan(f[10]);
        e->checked = strtod(f[11], NULL);
    }
    for (char *tok = strtok(f[5], ","); tok && e->n_families < KT_MAX_FAMILIES; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq) return -1;
        *eq = 0;
        snprintf(e->family[e->n_families], sizeof(e->family[0]), "%s", tok);
        e->rate[e->n_families++] = strtod(eq + 1, NULL);
    }
    return e->n_families ? 0 : -1;
}

int kt_cache_load(const char *path, const char *key, unsigned dts, kt_table *out, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    out->n = 0;
    if (!f) return errno == ENOENT ? 1 : bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    char line[1024], k[sizeof(out->key)];
    unsigned have[2] = {0, 0};
    int lineno = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        kt_entry e;
        if (kt_parse(line, k, sizeof(k), &e)) {
            fclose(f);
            return bench_errf(err, errlen, "%s: line %d is not KEY, DTYPE, decode|prefill, FAMILY, WORK, FAMILY=RATE,... "
                              "(remove the file to measure again)", path, lineno);
        }
        if (strcmp(k, key) || !(dts >> e.dt & 1u) || out->n >= (int)(sizeof(out->e) / sizeof(out->e[0]))) continue;
        /* checked against the fixed bound of a version 3 bench, not llama.cpp's own cost on the
         * model: not kept, so the check is made again under today's rule */
        if ((e.acc == KT_ACC_ACCEPTED || e.acc == KT_ACC_REFUSED) && isnan(e.bound_err_rel)) continue;
        out->e[out->n++] = e;
        have[e.prefill] |= 1u << e.dt;
    }
    fclose(f);
    snprintf(out->key, sizeof(out->key), "%s", key);
    out->from_cache = 1;
    out->busy = 0;
    return (have[0] & dts) == dts && (have[1] & dts) == dts ? 0 : 1;
}

int kt_cache_keys(const char *path, const char *prefix, char (*keys)[KT_KEY_MAX], int max, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? 0 : bench_errf(err, errlen, "%s: %s", path, strerror(errno));
    char line[1024];
    int n = 0;
    size_t pl = strlen(prefix);
    while (fgets(line, sizeof(line), f)) {
        char *tab = strchr(line, '\t');
        if (!tab || strncmp(line, prefix, pl) || (size_t)(tab - line) >= KT_KEY_MAX) continue;
        *tab = 0;
        int seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = !strcmp(keys[i], line);
        if (!seen && n < max) memcpy(keys[n++], line, (size_t)(tab - line) + 1);
    }
    fclose(f);
    return n;
}

void kt_production_key(const char *base, const char *model_id, char *buf, size_t len) {
    /* a key cut at len names no entry: the check is made again, nothing wrong kept */
    const char *part[] = {base, ";numerics=production;", model_id};
    size_t at = 0;
    for (int i = 0; i < 3 && len; i++)
        for (const char *c = part[i]; *c && at + 1 < len; c++) buf[at++] = *c;
    if (len) buf[at] = 0;
}

static void kt_write_num(FILE *f, const char *fmt, double v) {
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputc('-', f);
}

static void kt_write_entry(FILE *f, const char *key, const kt_entry *e) {
    fprintf(f, "%s\t%s\t%s\t%s\t%.0f\t", key, bench_dtype_name(e->dt), e->prefill ? "prefill" : "decode", e->chosen, e->bytes);
    for (int i = 0; i < e->n_families; i++) fprintf(f, "%s%s=%.3f", i ? "," : "", e->family[i], e->rate[i]);
    fprintf(f, "\tv%d\t%dx%d\t%.0f\t", KT_FILE_VERSION, e->rows, e->cols, e->when);
    kt_write_num(f, "%.2f", e->load1);
    fputc('\t', f);
    kt_write_num(f, "%.3f", e->others);
    fprintf(f, "\t%.0f", e->checked);
    if (e->acc == KT_ACC_ACCEPTED || e->acc == KT_ACC_REFUSED)
        fprintf(f, "\t%s:%s:%s:%.3g:%.3g:%.4g:%.4f:%.3g:%.4g:%.4f", e->acc == KT_ACC_ACCEPTED ? "accepted" : "refused",
                e->acc_family, e->exact, e->kl_mean, e->kl_max, e->err_rel, e->top1, e->bound_kl_mean, e->bound_err_rel,
                e->bound_top1);
    fputc('\n', f);
}
int kt_cache_store(const char *path, const kt_table *t, char *err, size_t errlen) {
    char tmp[1100];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        ut_mkdirs(dir);     /* a failure shows at the fopen below */
    }
    FILE *out = fopen(tmp, "w");
    if (!out) return bench_errf(err, errlen, "%s: %s", tmp, strerror(errno));
    FILE *in = fopen(path, "r");
    if (in) {
        char line[1024], copy[1024], k[sizeof(t->key)];
        while (fgets(line, sizeof(line), in)) {
            kt_entry e;
            memcpy(copy, line, sizeof(copy));
            if (kt_parse(copy, k, sizeof(k), &e)) continue;     /* a damaged line is dropped */
            int replaced = 0;
            for (int i = 0; i < t->n && !replaced; i++)
                replaced = !strcmp(k, t->key) && t->e[i].dt == e.dt && t->e[i].prefill == e.prefill;
            if (!replaced) fputs(line, out);
        }
        fclose(in);
    }
    for (int i = 0; i < t->n; i++) kt_write_entry(out, t->key, &t->e[i]);
    int bad = ferror(out);
    if (fclose(out) || bad || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return bench_errf(err, errlen, "%s: %s", path, strerror(e));
    }
    return 0;
}

int kt_apply(const kt_table *t) {
    int rc = 0;
    for (int i = 0; i < t->n; i++) {
        const kt_entry *e = &t->e[i];
        /* a family that rounds x runs only where production numerics checked it on the model */
        const char *f = e->acc == KT_ACC_PENDING ? e->exact : e->chosen;
        if ((t->production ? kn_set_tuned_rounding : kn_set_tuned)(e->dt, e->prefill, f)) rc = -1;
    }
    return rc;
}

/* A refusal falls back to the exact choice, not to the next int8 family: vnni and avx2-int8
 * round x the same way (docs/accuracy.md: the same figures to 3 digits), so one refused is the
 * other refused. */
void kt_settle_bound(kt_entry *e, double kl_mean, double err_rel, double top1) {
    if (e->acc != KT_ACC_PENDING) return;
    e->bound_kl_mean = kl_mean;
    e->bound_err_rel = err_rel;
    e->bound_top1 = top1;
}

void kt_settle(kt_entry *e, int ok, double kl_mean, double kl_max, double err_rel, double top1) {
    if (e->acc != KT_ACC_PENDING) return;
    e->kl_mean = kl_mean;
    e->kl_max = kl_max;
    e->err_rel = err_rel;
    e->top1 = top1;
    e->acc = ok ? KT_ACC_ACCEPTED : KT_ACC_REFUSED;
    snprintf(e->chosen, sizeof(e->chosen), "%s", ok ? e->acc_family : e->exact);
    for (int f = 0; !ok && f < e->n_families; f++)
        if (!strcmp(e->family[f], e->acc_family)) {
            memmove(&e->family[f], &e->family[f + 1], (size_t)(e->n_families - f - 1) * sizeof(e->family[0]));
            memmove(&e->rate[f], &e->rate[f + 1], (size_t)(e->n_families - f - 1) * sizeof(e->rate[0]));
            e->n_families--;
            break;
        }
}

void kt_describe(const kt_table *t, char *buf, size_t len) {
    size_t used = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < t->n; i++) {
        const kt_entry *e = &t->e[i];
        int w = snprintf(buf + used, used < len ? len - used : 0, "%s%s %s %s (", i ? ", " : "", bench_dtype_name(e->dt),
                         e->prefill ? "prefill" : "decode", e->chosen);
        if (w > 0) used += (size_t)w;
        for (int f = 0; f < e->n_families; f++) {
            w = snprintf(buf + used, used < len ? len - used : 0, "%s%s %.1f", f ? ", " : "", e->family[f], e->rate[f]);
            if (w > 0) used += (size_t)w;
        }
        w = snprintf(buf + used, used < len ? len - used : 0, " %s)", e->prefill ? "GFLOP/s" : "GB/s");
        if (w > 0) used += (size_t)w;
        if (e->acc == KT_ACC_ACCEPTED || e->acc == KT_ACC_REFUSED) {
            w = snprintf(buf + used, used < len ? len - used : 0, " [%s %s on the model: KL mean %.3g, relative RMS %.2f%%, top-1 %.1f%%;"
                         " llama.cpp's rounding %.3g, %.2f%%, %.1f%%]",
                         e->acc_family, e->acc == KT_ACC_ACCEPTED ? "accepted" : "refused", e->kl_mean, 100 * e->err_rel,
                         100 * e->top1, e->bound_kl_mean, 100 * e->bound_err_rel, 100 * e->bound_top1);
            if (w > 0) used += (size_t)w;
        }
    }
}

void kt_describe_when(const kt_entry *e, char *buf, size_t len) {
    if (e->when <= 0) {
        snprintf(buf, len, "when and load not recorded (an older bench)");
        return;
    }
    time_t t = (time_t)e->when;
    struct tm tm;
    char at[32] = "?";
    if (gmtime_r(&t, &tm)) strftime(at, sizeof(at), "%Y-%m-%d %H:%M UTC", &tm);
    char load[32] = "?", others[32] = "?";
    if (isfinite(e->load1)) snprintf(load, sizeof(load), "%.2f", e->load1);
    if (isfinite(e->others)) snprintf(others, sizeof(others), "%.0f%%", 100 * e->others);
    int w = snprintf(buf, len, "%s, load average %s, others used %s of the CPUs", at, load, others);
    t = (time_t)e->checked;
    if (e->checked > 0 && w > 0 && (size_t)w < len && gmtime_r(&t, &tm)) {
        strftime(at, sizeof(at), "%Y-%m-%d %H:%M UTC", &tm);
        snprintf(buf + w, len - (size_t)w, "; confirmed by a quiet re-check %s", at);
    }
}

/* ---- measuring again what the file holds ---- */

/* Fills a matrix of dt with valid weights (a real row quantized where the writers can, else a
 * byte pattern whose scales are small normal numbers), so that no kernel meets NaN or a
 * denormal that a model's matrix would not have. */
static void kt_fill(uint8_t *w, bench_dtype dt, int rows, int cols) {
    size_t rb = bench_dtype_row_bytes(dt, cols);
    float *row = bench_dtype_writable(dt) ? malloc((size_t)cols * sizeof(float)) : NULL;
    if (row) {
        for (int c = 0; c < cols; c++) row[c] = (float)((c * 7919u) % 1000u) * 1e-3f - 0.5f;
        kn_quant_row(dt, row, w, cols);
    } else {
        memset(w, 0x11, rb);
    }
    free(row);
    for (int r = 1; r < rows; r++) memcpy(w + rb * (size_t)r, w, rb);
}

typedef struct kt_synth {
    kt_mat *m;          /* (n) */
    int n;
    uint8_t *buf[BENCH_DTYPE_COUNT];    /* each dtype's matrices, one after another */
} kt_synth;

static void kt_synth_free(kt_synth *s) {
    for (int d = 0; d < BENCH_DTYPE_COUNT; d++) free(s->buf[d]);
    free(s->m);
}

/* Matrices like the model's an entry was measured on: its largest shape (a v1 line has none:
 * 2048 columns, a multiple of every block, and rows to match its work), as many of them as
 * decode's working set holds. 0, or -1 out of memory. */
static int kt_synth_make(const kt_table *t, kt_synth *s) {
    *s = (kt_synth){0};
    int cap = 0;
    for (int d = 0; d < BENCH_DTYPE_COUNT; d++) {
        const kt_entry *dec = NULL, *pre = NULL;
        for (int i = 0; i < t->n; i++)
            if ((int)t->e[i].dt == d) *(t->e[i].prefill ? &pre : &dec) = &t->e[i];
        if (!dec && !pre) continue;
        const kt_entry *shape = dec && dec->rows > 0 ? dec : pre && pre->rows > 0 ? pre : NULL;
        int cols = shape ? shape->cols : 2048, rows = shape ? shape->rows : 0;
        size_t rb = bench_dtype_row_bytes((bench_dtype)d, cols);
        if (!rows) rows = pre ? (int)(pre->bytes / (2.0 * KT_PREFILL_N * cols)) : (int)((dec->bytes + (double)rb - 1) / (double)rb);
        if (rows < 1) rows = 1;
        size_t mb = rb * (size_t)rows, count = dec ? (size_t)((dec->bytes + (double)mb - 1) / (double)mb) : 1;
        if (count < 1) count = 1;
        if (count * mb > KT_MAX_DECODE_BYTES + mb) count = KT_MAX_DECODE_BYTES / mb + 1;
        kt_mat *grown = realloc(s->m, (size_t)(cap += (int)count) * sizeof(*s->m));
        if (!grown || !(s->buf[d] = malloc(count * mb))) {
            if (grown) s->m = grown;
            return -1;
        }
        s->m = grown;
        kt_fill(s->buf[d], (bench_dtype)d, rows, cols);
        for (size_t k = 0; k < count; k++) {
            if (k) memcpy(s->buf[d] + k * mb, s->buf[d], mb);    /* written, so each page is its own */
            s->m[s->n++] = (kt_mat){s->buf[d] + k * mb, (bench_dtype)d, rows, cols};
        }
    }
    return 0;
}

int kt_retune(tp_pool *pool, const char *path, const char *key, char *note, size_t notelen, char *err, size_t errlen) {
    kt_table *t = calloc(1, sizeof(*t)), *now = calloc(1, sizeof(*now));
    kt_synth s = {0};
    int rc = -1;
    if (notelen) note[0] = 0;
    if (!t || !now) {
        bench_errc(err, errlen, BENCH_ERR_NOMEM, "kernels auto: out of memory");
        goto out;
    }
    if ((rc = kt_cache_load(path, key, ~0u, t, err, errlen)) < 0) goto out;
    if (!t->n) {
        rc = 1;
        goto out;
    }
    if (kt_synth_make(t, &s)) {
        rc = bench_errc(err, errlen, BENCH_ERR_NOMEM, "kernels auto: out of memory for matrices of the kept shapes");
        goto out;
    }
    snprintf(now->key, sizeof(now->key), "%s", key);
    if ((rc = kt_measure(pool, s.m, s.n, now, err, errlen))) goto out;
    char desc[1024], serr[256] = "";
    kt_describe(now, desc, sizeof(desc));
    if (now->busy) snprintf(serr, sizeof(serr), "not kept: others used %.0f%% of the CPUs while it measured", 100 * now->e[0].others);
    else if (kt_cache_store(path, now, serr, sizeof(serr))) rc = bench_errf(err, errlen, "%s", serr);
    snprintf(note, notelen, "%s (%s)", desc, now->busy ? serr : "kept");
out:
    kt_synth_free(&s);
    free(t);
    free(now);
    return rc;
}

/* ---- at an engine's start ---- */

/* 1 when an entry of t waits for production numerics' check (kt_settle). */
static int kt_pending(const kt_table *t) {
    for (int i = 0; i < t->n; i++)
        if (t->e[i].acc == KT_ACC_PENDING) return 1;
    return 0;
}

/* Measures m into t (key set) and keeps it when the machine was quiet; saved says what became
 * of it. Busy is said on stderr once a process: bench run's workers each say it, not each engine. */
static int kt_auto_measure(tp_pool *pool, const kt_mat *m, int n, const char *p, kt_table *t, char *saved, size_t savedlen,
                           char *err, size_t errlen) {
    static int said_busy;
    int rc = kt_measure(pool, m, n, t, err, errlen);
    if (rc) return rc;
    char serr[256];
    if (t->busy) {
        snprintf(saved, savedlen, "; not kept: other processes used %.0f%% of the CPUs while it measured", 100 * t->e[0].others);
        if (!said_busy++)
            fprintf(stderr, "kernels auto: the machine was busy while auto measured (others used %.0f%% of the %ld CPUs): "
                            "its choice holds for this process only and is not kept%s%s\n",
                    100 * t->e[0].others, sysconf(_SC_NPROCESSORS_ONLN), p ? " in " : "", p ? p : "");
    } else if (p && kt_pending(t)) {
        snprintf(saved, savedlen, "; kept once the model's numerics are checked");
    } else if (p && kt_cache_store(p, t, serr, sizeof(serr))) {
        snprintf(saved, savedlen, "; not kept: %s", serr);
    } else if (p) {
        snprintf(saved, savedlen, "; kept in %s", p);
    }
    return 0;
}

/* 1 when an entry of t was neither measured nor confirmed by a quiet re-check within
 * KT_RECHECK_AGE_S: then the start re-checks. */
static int kt_recheck_due(const kt_table *t) {
    double now = (double)time(NULL);
    for (int i = 0; i < t->n; i++)
        if (now - (t->e[i].checked > t->e[i].when ? t->e[i].checked : t->e[i].when) > KT_RECHECK_AGE_S) return 1;
    return 0;
}

/* kt_recheck with the load read around it: a choice confirmed on a quiet machine is kept with
 * the time, so that the next starts of the day do not check it again. 1 stale, 0 it holds,
 * -1 out of memory (the kept choice is then used as it is). */
static int kt_auto_recheck(tp_pool *pool, const kt_mat *m, int n, const char *p, kt_table *t, char *stale, size_t stalelen) {
    ut_cpu_snap s0, s1;
    ut_cpu_read(&s0);
    double t0 = kt_now();
    int r = kt_recheck(pool, m, n, t, stale, stalelen);
    double left = KT_LOAD_MIN_S - (kt_now() - t0);
    if (left > 0) nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = (long)(left * 1e9)}, NULL);
    ut_cpu_read(&s1);
    ut_cpu_load l = ut_cpu_between(&s0, &s1, 0);
    if (r == 0 && !ut_cpu_busy(&l) && p) {
        char serr[256];
        for (int i = 0; i < t->n; i++) t->e[i].checked = (double)time(NULL);
        kt_cache_store(p, t, serr, sizeof(serr));     /* not kept: checked again at the next start */
    }
    return r < 0 ? 0 : r;
}

int kt_auto(tp_pool *pool, const kt_mat *m, int n, int mode, char *note, size_t notelen, char *err, size_t errlen) {
    return kt_auto_numerics(pool, m, n, mode, NULL, NULL, note, notelen, err, errlen);
}

int kt_auto_numerics(tp_pool *pool, const kt_mat *m, int n, int mode, const char *numerics_id, kt_table *out, char *note,
                     size_t notelen, char *err, size_t errlen) {
    if (notelen) note[0] = 0;
    if (out) *out = (kt_table){0};
    if (mode == KT_OFF) {
        snprintf(note, notelen, "kernels auto: the flags' order (BENCH_KERNELS_TUNE=0)");
        return 0;
    }
    unsigned dts = 0;
    for (int i = 0; i < n; i++) dts |= 1u << m[i].dt;
    kt_table *t = calloc(1, sizeof(*t));
    if (!t) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kernels auto: out of memory");
    char path[1024], key[sizeof(t->key)], stale[256] = "", saved[1300] = "";
    kt_key(tp_threads(pool), key, sizeof(key));
    if (numerics_id) {
        char base[sizeof(key)];
        snprintf(base, sizeof(base), "%s", key);
        kt_production_key(base, numerics_id, key, sizeof(key));
    }
    const char *p = kt_cache_path(path, sizeof(path));
    int rc = p ? kt_cache_load(p, key, dts, t, err, errlen) : 1;
    t->production = numerics_id != NULL;
    if (rc < 0) goto out;
    int checked = rc == 0 && mode == KT_TUNE && kt_recheck_due(t);
    if (checked && kt_auto_recheck(pool, m, n, p, t, stale, sizeof(stale)) == 1) rc = 1;
    if (rc == 1) {
        if (mode == KT_READ) {
            snprintf(note, notelen, "kernels auto: the flags' order (no measurement for this machine, build and %d threads in %s)",
                     tp_threads(pool), p ? p : "(no cache path)");
            rc = 0;
            goto out;
        }
        snprintf(t->key, sizeof(t->key), "%s", key);
        if ((rc = kt_auto_measure(pool, m, n, p, t, saved, sizeof(saved), err, errlen))) goto out;
    }
    if (kt_apply(t)) {
        rc = bench_errf(err, errlen, "kernels auto: %s names a family this CPU does not run (remove it to measure again)", p ? p : "the cache");
        goto out;
    }
    char desc[1024];
    kt_describe(t, desc, sizeof(desc));
    snprintf(note, notelen, "kernels auto (%s%s%s%s): %s", t->from_cache ? "measured earlier" : stale[0] ? "measured again, the kept choice was stale: " : "measured now",
             t->from_cache && checked ? ", re-checked now" : "", stale, saved, desc);
    if (out) *out = *t;
out:
    free(t);
    return rc;
}

int kt_commit(kt_table *t, char *note, size_t notelen, char *err, size_t errlen) {
    if (kt_apply(t)) return bench_errf(err, errlen, "kernels auto: a family of the measurement does not run here");
    char path[1024], serr[256] = "", desc[1024];
    const char *p = kt_cache_path(path, sizeof(path));
    int kept = !t->busy && p && !kt_cache_store(p, t, serr, sizeof(serr));
    kt_describe(t, desc, sizeof(desc));
    snprintf(note, notelen, "kernels auto (measured now, production numerics checked on the model; %s%s): %s",
             kept ? "kept in " : "not kept: ", kept ? p : t->busy ? "the machine was busy" : p ? serr : "no cache path", desc);
    return 0;
}

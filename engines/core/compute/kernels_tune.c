/* auto chosen by measurement: see kernels_tune.h. */
#include "kernels_tune.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"
#include "kernels.h"
#include "util/ut_clock.h"
#include "util/ut_fs.h"

#define KT_MAX_DECODE_BYTES (2ull << 30)    /* a larger model is timed on its first 2 GiB */

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

/* The exact families this CPU runs; portable only where it is the only one. */
static int kt_families(char fam[KT_MAX_FAMILIES][16]) {
    int n = 0, portable = 0;
    for (int i = 0; i < kn_isa_count(); i++) {
        int here;
        const char *name = kn_isa_name(i, &here);
        if (!here || !kn_isa_auto_candidate(name)) continue;
        if (!strcmp(name, "portable")) {
            portable = 1;
            continue;
        }
        if (n < KT_MAX_FAMILIES) snprintf(fam[n++], 16, "%s", name);
    }
    if (!n && portable) snprintf(fam[n++], 16, "portable");
    return n;
}

typedef struct kt_bufs {
    float *x, *y;
} kt_bufs;

/* Seconds for one pass: every decode matrix at n = 1, or the prefill one at KT_PREFILL_N. */
static double kt_pass(tp_pool *pool, const kt_mat *m, const int *idx, int n_idx, int n_tok, const kt_bufs *b) {
    double t0 = kt_now();
    for (int k = 0; k < n_idx; k++) {
        const kt_mat *a = &m[idx[k]];
        kn_matmul(pool, b->y, b->x, n_tok, a->w, a->dt, a->rows, a->cols);
    }
    return kt_now() - t0;
}

static int kt_measure_one(tp_pool *pool, const kt_mat *m, const int *idx, int n_idx, int prefill, double work,
                          char fam[KT_MAX_FAMILIES][16], int n_fam, const kt_bufs *b, kt_entry *e) {
    const bench_dtype dt = m[idx[0]].dt;
    double best[KT_MAX_FAMILIES];
    for (int f = 0; f < n_fam; f++) best[f] = 1e300;
    for (int round = 0; round <= KT_ROUNDS; round++)
        for (int k = 0; k < n_fam; k++) {
            int f = (k + round) % n_fam;    /* each family first in some round: no order favours one */
            if (kn_set_tuned(dt, prefill, fam[f])) return -1;
            double s = kt_pass(pool, m, idx, n_idx, prefill ? KT_PREFILL_N : 1, b);
            if (round > 0 && s < best[f]) best[f] = s;     /* round 0 warms caches and pages */
        }
    kn_set_tuned(dt, prefill, NULL);
    const char *base = kn_auto_family(dt, prefill);
    *e = (kt_entry){.dt = dt, .prefill = prefill, .n_families = n_fam, .bytes = work};
    int pick = -1, base_i = -1;
    for (int f = 0; f < n_fam; f++) {
        snprintf(e->family[f], sizeof(e->family[f]), "%s", fam[f]);
        e->rate[f] = work / best[f] / 1e9;
        if (!strcmp(fam[f], base)) base_i = f;
        if (pick < 0 || e->rate[f] > e->rate[pick]) pick = f;
    }
    /* the flags' choice stays unless another is faster by more than the margin */
    if (base_i >= 0 && e->rate[pick] <= e->rate[base_i] * (1.0 + KT_MARGIN)) pick = base_i;
    snprintf(e->chosen, sizeof(e->chosen), "%s", fam[pick]);
    return 0;
}

int kt_measure(tp_pool *pool, const kt_mat *m, int n, kt_table *out, char *err, size_t errlen) {
    char fam[KT_MAX_FAMILIES][16];
    int n_fam = kt_families(fam);
    out->n = 0;
    out->from_cache = 0;
    if (!kn_auto_active()) return bench_errf(err, errlen, "kernels auto: a family was asked by name; nothing to measure");
    if (!n_fam) return bench_errf(err, errlen, "kernels auto: no exact family runs on this CPU");
    int max_rows = 1, max_cols = 1;
    for (int i = 0; i < n; i++) {
        if (m[i].rows > max_rows) max_rows = m[i].rows;
        if (m[i].cols > max_cols) max_cols = m[i].cols;
    }
    kt_bufs b = {malloc((size_t)KT_PREFILL_N * max_cols * sizeof(float)), malloc((size_t)KT_PREFILL_N * max_rows * sizeof(float))};
    int *idx = malloc((size_t)(n ? n : 1) * sizeof(int));
    int rc = 0;
    if (!b.x || !b.y || !idx) {
        rc = bench_errc(err, errlen, BENCH_ERR_NOMEM, "kernels auto: out of memory for the timing buffers");
        goto out;
    }
    for (size_t i = 0; i < (size_t)KT_PREFILL_N * max_cols; i++) b.x[i] = (float)((i * 7919u) % 1000u) * 1e-3f - 0.5f;
    for (int dt = 0; dt < BENCH_DTYPE_COUNT && !rc; dt++) {
        int n_idx = 0, largest = -1;
        double bytes = 0;
        for (int i = 0; i < n; i++) {
            if ((int)m[i].dt != dt) continue;
            double mb = (double)bench_dtype_row_bytes(m[i].dt, m[i].cols) * m[i].rows;
            if (largest < 0 || (double)m[i].rows * m[i].cols > (double)m[largest].rows * m[largest].cols) largest = i;
            if (bytes + mb > (double)KT_MAX_DECODE_BYTES && n_idx) continue;
            idx[n_idx++] = i;
            bytes += mb;
        }
        if (!n_idx) continue;
        if (kt_measure_one(pool, m, idx, n_idx, 0, bytes, fam, n_fam, &b, &out->e[out->n++])) {
            rc = bench_errf(err, errlen, "kernels auto: a family this CPU runs was refused");
            break;
        }
        double flops = 2.0 * m[largest].rows * (double)m[largest].cols * KT_PREFILL_N;
        if (kt_measure_one(pool, m, &largest, 1, 1, flops, fam, n_fam, &b, &out->e[out->n++])) {
            rc = bench_errf(err, errlen, "kernels auto: a family this CPU runs was refused");
            break;
        }
    }
out:
    free(b.x);
    free(b.y);
    free(idx);
    return rc;
}

/* ---- the cache file: a line per (key, dtype, phase), tab-separated ----
 *   KEY  DTYPE  decode|prefill  CHOSEN  WORK  FAMILY=RATE,FAMILY=RATE */

static int kt_parse(char *line, char *key, size_t keylen, kt_entry *e) {
    char *f[6];
    line[strcspn(line, "\n")] = 0;
    f[0] = line;
    for (int i = 1; i < 6; i++) {
        char *tab = strchr(f[i - 1], '\t');
        if (!tab) return -1;
        *tab = 0;
        f[i] = tab + 1;
    }
    snprintf(key, keylen, "%s", f[0]);
    int dt = bench_dtype_parse(f[1]);
    if (dt < 0 || (strcmp(f[2], "decode") && strcmp(f[2], "prefill"))) return -1;
    *e = (kt_entry){.dt = (bench_dtype)dt, .prefill = !strcmp(f[2], "prefill"), .bytes = strtod(f[4], NULL)};
    snprintf(e->chosen, sizeof(e->chosen), "%s", f[3]);
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
        out->e[out->n++] = e;
        have[e.prefill] |= 1u << e.dt;
    }
    fclose(f);
    snprintf(out->key, sizeof(out->key), "%s", key);
    out->from_cache = 1;
    return (have[0] & dts) == dts && (have[1] & dts) == dts ? 0 : 1;
}

static void kt_write_entry(FILE *f, const char *key, const kt_entry *e) {
    fprintf(f, "%s\t%s\t%s\t%s\t%.0f\t", key, bench_dtype_name(e->dt), e->prefill ? "prefill" : "decode", e->chosen, e->bytes);
    for (int i = 0; i < e->n_families; i++) fprintf(f, "%s%s=%.3f", i ? "," : "", e->family[i], e->rate[i]);
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
    for (int i = 0; i < t->n; i++)
        if (kn_set_tuned(t->e[i].dt, t->e[i].prefill, t->e[i].chosen)) rc = -1;
    return rc;
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
    }
}

int kt_auto(tp_pool *pool, const kt_mat *m, int n, int mode, char *note, size_t notelen, char *err, size_t errlen) {
    if (notelen) note[0] = 0;
    if (mode == KT_OFF) {
        snprintf(note, notelen, "kernels auto: the flags' order (BENCH_KERNELS_TUNE=0)");
        return 0;
    }
    unsigned dts = 0;
    for (int i = 0; i < n; i++) dts |= 1u << m[i].dt;
    kt_table *t = calloc(1, sizeof(*t));
    if (!t) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "kernels auto: out of memory");
    char path[1024], key[sizeof(t->key)];
    kt_key(tp_threads(pool), key, sizeof(key));
    const char *p = kt_cache_path(path, sizeof(path));
    int rc = p ? kt_cache_load(p, key, dts, t, err, errlen) : 1;
    if (rc < 0) goto out;
    char saved[300] = "";
    if (rc == 1) {
        if (mode == KT_READ) {
            snprintf(note, notelen, "kernels auto: the flags' order (no measurement for this machine, build and %d threads in %s)",
                     tp_threads(pool), p ? p : "(no cache path)");
            rc = 0;
            goto out;
        }
        snprintf(t->key, sizeof(t->key), "%s", key);
        if ((rc = kt_measure(pool, m, n, t, err, errlen))) goto out;
        char serr[256];
        if (p && kt_cache_store(p, t, serr, sizeof(serr))) snprintf(saved, sizeof(saved), "; not kept: %s", serr);
        else if (p) snprintf(saved, sizeof(saved), "; kept in %s", p);
    }
    if (kt_apply(t)) {
        rc = bench_errf(err, errlen, "kernels auto: %s names a family this CPU does not run (remove it to measure again)", p ? p : "the cache");
        goto out;
    }
    char desc[1024];
    kt_describe(t, desc, sizeof(desc));
    snprintf(note, notelen, "kernels auto (%s%s): %s", t->from_cache ? "measured earlier" : "measured now", saved, desc);
out:
    free(t);
    return rc;
}

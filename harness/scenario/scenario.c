#include "util/ut_parse.h"
#include "scenario.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/device.h"
#include "engines/core/runtime/engine.h"
#include "engines/abi/dtype.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/runtime/modreg.h"
#include "engines/core/runtime/sampler.h"
#include "engines/core/model/model_write.h"
#include "engines/core/synth/synth.h"
#include "harness/scenario/jsonval.h"
#include "harness/scenario/alloc_spec.h"
#include "harness/scenario/arrival.h"
#include "harness/scenario/confine.h"
#include "harness/scenario/kind.h"
#include "harness/scenario/target.h"
#include "harness/scenario/traffic.h"
#include "util/ut_fs.h"

/* ---- errors ---- */

/* Options one module choice may give (the modules' tables have a handful each). */
#define SC_MAX_OPTS 32

typedef struct sc_ctx {
    const char *file;
    sc_errors *errs;
    char *module_dir;
    const scenario *s;      /* its device axis, once parsed, says which modules to check */
    int device_failed;      /* a device choice was refused: its modules go unchecked */
    /* the module choice being parsed: its options as the file gives them, one pair each,
     * the key and a string value in the JSON tree, a number's or bool's text in given_text */
    int n_given;
    bench_opt given[SC_MAX_OPTS];
    char given_text[SC_MAX_OPTS][32];
} sc_ctx;

static void sc_err(sc_ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sc_err(sc_ctx *c, const char *path, const char *fmt, ...) {
    char msg[2048];     /* a refused path lists the allowed folders */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t len = strlen(c->file) + strlen(path) + strlen(msg) + 8;
    char *line = malloc(len);
    char **nv = realloc(c->errs->v, (size_t)(c->errs->n + 1) * sizeof(char *));
    if (!line || !nv) {
        free(line);
        if (nv) c->errs->v = nv;
        return;
    }
    snprintf(line, len, "%s: %s%s%s", c->file, path, *path ? ": " : "", msg);
    c->errs->v = nv;
    c->errs->v[c->errs->n++] = line;
}

void sc_errors_free(sc_errors *e) {
    if (!e) return;
    for (int i = 0; i < e->n; i++) free(e->v[i]);
    free(e->v);
    e->v = NULL;
    e->n = 0;
}

/* ---- small JSON helpers: each reports its own error and returns -1 ---- */

/* Paths are truncated rather than refused: they only name a place in messages. */
static void sc_join(char *buf, size_t len, const char *a, const char *b) {
    if (snprintf(buf, len, "%s.%s", a, b) >= (int)len) buf[len - 1] = 0;
}

/* Every key of obj must be in allowed (NULL-terminated); duplicates are errors too. */
static void sc_check_keys(sc_ctx *c, const cJSON *obj, const char *path, const char *const *allowed) {
    for (const cJSON *it = obj->child; it; it = it->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(*a, it->string);
        char p[256];
        sc_join(p, sizeof(p), path, it->string);
        if (!ok) {
            char list[512] = "";
            for (const char *const *a = allowed; *a; a++) {
                if (list[0]) strncat(list, ", ", sizeof(list) - strlen(list) - 1);
                strncat(list, *a, sizeof(list) - strlen(list) - 1);
            }
            sc_err(c, p, "unknown key \"%s\" (allowed: %s)", it->string, list);
            continue;
        }
        for (const cJSON *j = obj->child; j != it; j = j->next)
            if (!strcmp(j->string, it->string)) {
                sc_err(c, p, "duplicate key");
                break;
            }
    }
}

static int sc_get_string(sc_ctx *c, const cJSON *obj, const char *key, const char *path, int required, char **out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[256];
    sc_join(p, sizeof(p), path, key);
    if (!j) {
        if (required) sc_err(c, p, "required: a string");
        return -1;
    }
    if (!cJSON_IsString(j) || !j->valuestring) {
        sc_err(c, p, "expected a string, got %s", jv_type(j));
        return -1;
    }
    free(*out);
    *out = strdup(j->valuestring);
    return 0;
}

/* An integer in [lo, hi]; *out keeps its default when the key is absent. */
static int sc_int_value(sc_ctx *c, const cJSON *j, const char *p, long long lo, long long hi, long long *out) {
    char msg[160];
    if (jv_int(j, lo, hi, out, msg, sizeof(msg))) {
        sc_err(c, p, "%s", msg);
        return -1;
    }
    return 0;
}

static int sc_get_int(sc_ctx *c, const cJSON *obj, const char *key, const char *path, int required,
                      long long lo, long long hi, long long *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[256];
    sc_join(p, sizeof(p), path, key);
    if (!j) {
        if (required) sc_err(c, p, "required: an integer %lld .. %lld", lo, hi);
        return required ? -1 : 0;
    }
    return sc_int_value(c, j, p, lo, hi, out);
}

static int sc_get_i(sc_ctx *c, const cJSON *obj, const char *key, const char *path, int required,
                    long long lo, long long hi, int *out) {
    long long v = *out;
    int rc = sc_get_int(c, obj, key, path, required, lo, hi, &v);
    *out = (int)v;
    return rc;
}

/* A number in [lo, hi] (lo excluded when lo_open). */
static int sc_get_num(sc_ctx *c, const cJSON *obj, const char *key, const char *path, double lo, int lo_open,
                      double hi, double *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[256];
    sc_join(p, sizeof(p), path, key);
    if (!j) return 0;
    if (!cJSON_IsNumber(j)) {
        sc_err(c, p, "expected a number, got %s", jv_type(j));
        return -1;
    }
    double v = j->valuedouble;
    if (!(lo_open ? v > lo : v >= lo) || v > hi) {
        sc_err(c, p, "%g is out of range: expected %s%g .. %g", v, lo_open ? "more than " : "", lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- model ---- */

static int sc_file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* A path the scenario names to read must stay inside the allowed folders (confine.h):
 * checked before anything looks at the file, so a refused one is never opened. */
static int sc_confined(sc_ctx *c, const char *jpath, const char *p) {
    char e[1800];
    if (!cf_check(c->file, p, e, sizeof(e))) return 0;
    sc_err(c, jpath, "%s", e);
    return -1;
}

/* A safetensors model (a folder, a .safetensors or .json file) is read with the files
 * beside it by name (config.json, tokenizer.json, the shards): none may link elsewhere. */
static int sc_confined_beside(sc_ctx *c, const char *jpath, const char *p) {
    struct stat st;
    size_t n = strlen(p);
    char dir[4096], e[1800];
    if (!stat(p, &st) && S_ISDIR(st.st_mode)) snprintf(dir, sizeof(dir), "%s", p);
    else if ((n > 12 && !strcmp(p + n - 12, ".safetensors")) || (n > 5 && !strcmp(p + n - 5, ".json"))) {
        const char *slash = strrchr(p, '/');
        snprintf(dir, sizeof(dir), "%.*s", !slash ? 1 : slash == p ? 1 : (int)(slash - p), !slash ? "." : p);
    } else
        return 0;
    if (!cf_check_folder(c->file, dir, e, sizeof(e))) return 0;
    sc_err(c, jpath, "%s (beside the model, read with it)", e);
    return -1;
}

static void sc_parse_model(sc_ctx *c, scenario *s, const cJSON *j) {
    const char *path = ".model";
    if (cJSON_IsString(j)) {
        s->model_path = strdup(j->valuestring);
    } else if (cJSON_IsObject(j)) {
        static const char *const keys[] = {"path", "tokenizer", "synth", NULL};
        sc_check_keys(c, j, path, keys);
        const cJSON *syn = cJSON_GetObjectItemCaseSensitive(j, "synth");
        int has_path = cJSON_GetObjectItemCaseSensitive(j, "path") != NULL;
        if (has_path == (syn != NULL)) {
            sc_err(c, path, "expected exactly one of \"path\" and \"synth\"");
            return;
        }
        sc_get_string(c, j, "tokenizer", path, 0, &s->tokenizer_path);
        if (has_path) {
            sc_get_string(c, j, "path", path, 1, &s->model_path);
        } else if (!cJSON_IsObject(syn)) {
            sc_err(c, ".model.synth", "expected an object {\"shape\": ..., \"dtype\": ..., \"format\": ..., \"seed\": ...}, got %s",
                   jv_type(syn));
        } else {
            static const char *const skeys[] = {"shape", "dtype", "format", "seed", NULL};
            const char *sp = ".model.synth";
            sc_check_keys(c, syn, sp, skeys);
            s->synth = 1;
            s->synth_dtype = strdup("f32");
            s->synth_format = strdup(model_writer_name(&model_writers[0])); /* the first row is the default */
            long long seed = 1;
            if (!sc_get_string(c, syn, "shape", sp, 1, &s->synth_shape) && !synth_find_shape(s->synth_shape)) {
                char have[512] = "";
                for (const synth_shape *sh = synth_shapes; sh->name; sh++) {
                    if (have[0]) strncat(have, ", ", sizeof(have) - strlen(have) - 1);
                    strncat(have, sh->name, sizeof(have) - strlen(have) - 1);
                }
                sc_err(c, ".model.synth.shape", "unknown shape \"%s\" (have: %s)", s->synth_shape, have);
            }
            if (!sc_get_string(c, syn, "dtype", sp, 0, &s->synth_dtype) && (bench_dtype_parse(s->synth_dtype) < 0 || !bench_dtype_writable((bench_dtype)bench_dtype_parse(s->synth_dtype)))) {
                char dtypes[64];
                synth_dtype_names(dtypes, sizeof dtypes, ", ", ", ");
                sc_err(c, ".model.synth.dtype", "unknown dtype \"%s\" (have: %s)", s->synth_dtype, dtypes);
            }
            char why[256];
            sc_get_string(c, syn, "format", sp, 0, &s->synth_format);
            const model_writer *w = s->synth_format ? model_writer_find(s->synth_format) : NULL;
            if (s->synth_format && !w)
                sc_err(c, ".model.synth.format", "unknown format \"%s\" (have: %s)", s->synth_format,
                       model_writer_names(why, sizeof why, ", "));
            int dt = s->synth_dtype ? bench_dtype_parse(s->synth_dtype) : -1;
            if (w && dt >= 0 && !model_writer_holds(w, (bench_dtype)dt))
                sc_err(c, ".model.synth", "%s", model_writer_refusal(w, (bench_dtype)dt, why, sizeof why));
            sc_get_int(c, syn, "seed", sp, 0, 0, INT64_MAX / 2, &seed);
            s->synth_seed = (uint64_t)seed;
        }
    } else {
        sc_err(c, path, "expected a path or an object {\"path\": ...} / {\"synth\": {...}}, got %s", jv_type(j));
        return;
    }
    int model_str = cJSON_IsString(j);
    if (s->model_path && (sc_confined(c, model_str ? ".model" : ".model.path", s->model_path) ||
                          sc_confined_beside(c, model_str ? ".model" : ".model.path", s->model_path))) {
        /* refused: nothing more to say about it */
    } else if (s->model_path && !sc_file_exists(s->model_path))
        sc_err(c, model_str ? ".model" : ".model.path", "model not found: %s (%s): give a path that exists (relative to the current directory) "
               "or a synth spec such as {\"synth\": {\"shape\": \"tiny\"}}", s->model_path, strerror(errno));
    if (s->tokenizer_path && sc_confined(c, ".model.tokenizer", s->tokenizer_path)) {
        /* refused */
    } else if (s->tokenizer_path && !sc_file_exists(s->tokenizer_path))
        sc_err(c, ".model.tokenizer", "tokenizer not found: %s (%s)", s->tokenizer_path, strerror(errno));
}

/* ---- workload.requests: a serving run ---- */

#define SC_MAX_LEN (1 << 20)    /* tokens of a prompt or an output, at most */
#define SC_MAX_FILE (16 << 20)  /* bytes of a scenario file, at most (docs/reliability.md) */

/* A file of lengths: integers separated by white space, each in [lo, hi]. */
static void sc_read_lengths(sc_ctx *c, const char *p, const char *file, int lo, int hi, sc_dist *d) {
    char e[1800];
    /* checked and opened by one call: nothing swapped in between is read (confine.h) */
    int fd = cf_open_checked(c->file, file, "a file of lengths, one integer per token count, relative to the current directory",
                             e, sizeof(e));
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (!f) {
        if (fd >= 0) {
            snprintf(e, sizeof(e), "%s: %s", file, strerror(errno));
            close(fd);
        }
        sc_err(c, p, "%s", e);
        return;
    }
    int line = 1, cap = 0, ch, bad = 0;
    for (;;) {
        while ((ch = fgetc(f)) == ' ' || ch == '\t' || ch == '\r' || ch == '\n') {
            if (ch == '\r') {      /* CR LF is one line end, a lone CR another (universal newlines) */
                int nx = fgetc(f);
                if (nx != '\n' && nx != EOF) ungetc(nx, f);
            }
            if (ch == '\n' || ch == '\r') line++;
        }
        if (ch == EOF) break;
        ungetc(ch, f);
        char word[64], *end;
        if (fscanf(f, "%63s", word) != 1) break;
        errno = 0;
        long long v = strtoll(word, &end, 10);
        if (*end || errno || v < lo || v > hi) {
            sc_err(c, p, "%s:%d: expected an integer %d .. %d, got \"%s\"", file, line, lo, hi, word);
            d->n_values = 0;
            bad = 1;
            break;
        }
        if (d->n_values == cap) {
            cap = cap ? cap * 2 : 64;
            int *nv = cap < (1 << 24) ? realloc(d->values, (size_t)cap * sizeof(int)) : NULL;
            if (!nv) {
                sc_err(c, p, "%s: more lengths than this reads (%d)", file, d->n_values);
                break;
            }
            d->values = nv;
        }
        d->values[d->n_values++] = (int)v;
    }
    fclose(f);
    if (!d->n_values && !bad) sc_err(c, p, "%s: no lengths in the file (expected integers %d .. %d)", file, lo, hi);
    d->lo = hi;
    d->hi = lo;
    for (int i = 0; i < d->n_values; i++) {
        if (d->values[i] < d->lo) d->lo = d->values[i];
        if (d->values[i] > d->hi) d->hi = d->values[i];
    }
}

/* {"fixed": N} | {"uniform": [lo, hi]} | {"file": "path"}, each length in [lo, hi]. */
static void sc_parse_dist(sc_ctx *c, const cJSON *obj, const char *key, const char *path, int lo, int hi, sc_dist *d) {
    char p[256];
    sc_join(p, sizeof(p), path, key);
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    const char *want = "{\"fixed\": N}, {\"uniform\": [LO, HI]} or {\"file\": \"path\"}";
    if (!j) {
        sc_err(c, p, "required: %s", want);
        return;
    }
    if (!cJSON_IsObject(j) || cJSON_GetArraySize(j) != 1) {
        sc_err(c, p, "expected one of %s, got %s", want, cJSON_IsObject(j) ? "an object without exactly one key" : jv_type(j));
        return;
    }
    static const char *const kinds[] = {"fixed", "uniform", "file", NULL};
    sc_check_keys(c, j, p, kinds);
    const cJSON *v = j->child;
    char q[300];
    sc_join(q, sizeof(q), p, v->string);
    long long a = 0, b = 0;
    if (!strcmp(v->string, "fixed")) {
        d->kind = SC_DIST_FIXED;
        if (!sc_int_value(c, v, q, lo, hi, &a)) d->lo = d->hi = (int)a;
    } else if (!strcmp(v->string, "uniform")) {
        d->kind = SC_DIST_UNIFORM;
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2) {
            sc_err(c, q, "expected [LO, HI] (two integers, LO <= HI), got %s", jv_type(v));
            return;
        }
        char q0[320], q1[320];
        snprintf(q0, sizeof(q0), "%s[0]", q);
        snprintf(q1, sizeof(q1), "%s[1]", q);
        if (sc_int_value(c, cJSON_GetArrayItem(v, 0), q0, lo, hi, &a) | sc_int_value(c, cJSON_GetArrayItem(v, 1), q1, lo, hi, &b))
            return;
        if (b < a) sc_err(c, q, "[%lld, %lld]: expected LO <= HI", a, b);
        d->lo = (int)a;
        d->hi = (int)b;
    } else if (!strcmp(v->string, "file")) {
        d->kind = SC_DIST_FILE;
        if (!cJSON_IsString(v)) {
            sc_err(c, q, "expected a path (a string), got %s", jv_type(v));
            return;
        }
        d->file = strdup(v->valuestring);
        sc_read_lengths(c, q, v->valuestring, lo, hi, d);
    }
}

static void sc_dist_free(sc_dist *d) {
    free(d->file);
    free(d->values);
}

void sc_requests_free(sc_requests *r) {
    if (!r) return;
    sc_dist_free(&r->prompt_len);
    sc_dist_free(&r->output_len);
    tf_free(r->traffic);
    free(r);
}

static void sc_parse_requests(sc_ctx *c, scenario *s, const cJSON *j) {
    const char *path = ".workload.requests";
    if (!cJSON_IsObject(j)) {
        sc_err(c, path, "expected an object {\"count\": N, \"prompt_len\": ..., \"output_len\": ..., \"kv_budget\": ...}, got %s",
               jv_type(j));
        return;
    }
    sc_requests *r = calloc(1, sizeof(*r));
    if (!r) {
        sc_err(c, path, "out of memory");
        return;
    }
    s->requests = r;
    r->seed = 1;
    r->stop_at_eos = 1;
    static const char *const keys[] = {"count", "prompt_len", "output_len", "shared_prefix", "arrival", "kv_budget",
                                       "targets", "seed", "max_batch", "reserve_output", "stop_at_eos",
                                       "trace", "sessions", "concurrency", "sweep", NULL};
    sc_check_keys(c, j, path, keys);
    /* a trace's rows are the requests (harness/scenario/traffic.h) */
    if (!tf_has_trace(j)) {
        sc_get_i(c, j, "count", path, 1, 1, 100000, &r->count);
        sc_parse_dist(c, j, "prompt_len", path, 1, SC_MAX_LEN, &r->prompt_len);
        sc_parse_dist(c, j, "output_len", path, 1, SC_MAX_LEN, &r->output_len);
    }
    tf_parse(c->file, c->errs, j, r);
    long long seed = 1;
    sc_get_int(c, j, "seed", path, 0, 0, INT64_MAX / 2, &seed);
    r->seed = (uint64_t)seed;
    sc_get_i(c, j, "max_batch", path, 0, 1, 100000, &r->max_batch);
    sc_get_num(c, j, "reserve_output", path, 0, 0, 1, &r->reserve_output);
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(j, "stop_at_eos");
    if (eos && !cJSON_IsBool(eos)) sc_err(c, ".workload.requests.stop_at_eos", "expected true or false, got %s", jv_type(eos));
    else if (eos) r->stop_at_eos = cJSON_IsTrue(eos);

    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(j, "shared_prefix");
    if (sp && !cJSON_IsObject(sp)) {
        sc_err(c, ".workload.requests.shared_prefix", "expected {\"tokens\": N, \"fraction\": 0..1}, got %s", jv_type(sp));
    } else if (sp) {
        const char *pp = ".workload.requests.shared_prefix";
        static const char *const pk[] = {"tokens", "fraction", NULL};
        sc_check_keys(c, sp, pp, pk);
        sc_get_i(c, sp, "tokens", pp, 1, 1, SC_MAX_LEN, &r->prefix_tokens);
        if (!cJSON_GetObjectItemCaseSensitive(sp, "fraction"))
            sc_err(c, ".workload.requests.shared_prefix.fraction", "required: the share of the requests that start with the prefix, 0 .. 1");
        sc_get_num(c, sp, "fraction", pp, 0, 0, 1, &r->prefix_fraction);
    }

    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(j, "arrival");
    const char *ap = ".workload.requests.arrival";
    if (ar && cJSON_IsString(ar) && strcmp(ar->valuestring, "all")) {
        sc_err(c, ap, "unknown arrival \"%s\": expected \"all\" or {\"poisson_rate\": requests per second}", ar->valuestring);
    } else if (ar && cJSON_IsObject(ar) && !cJSON_GetObjectItemCaseSensitive(ar, "process")) {
        static const char *const ak[] = {"poisson_rate", NULL};
        sc_check_keys(c, ar, ap, ak);
        if (!cJSON_GetObjectItemCaseSensitive(ar, "poisson_rate"))
            sc_err(c, ".workload.requests.arrival.poisson_rate", "required: requests per second, more than 0");
        /* from AR_MIN_RATE: a slower rate puts the last arrival past what the worker's
         * nanosecond clock holds (arrival.h) */
        sc_get_num(c, ar, "poisson_rate", ap, AR_MIN_RATE, 0, 1e9, &r->poisson_rate);
    } else if (ar && !cJSON_IsString(ar) && !cJSON_IsObject(ar)) {
        sc_err(c, ap, "expected \"all\", {\"poisson_rate\": requests per second} or {\"process\": ...}, got %s", jv_type(ar));
    }

    const cJSON *kb = cJSON_GetObjectItemCaseSensitive(j, "kv_budget");
    const char *kp = ".workload.requests.kv_budget";
    if (!kb) {
        sc_err(c, kp, "required: {\"bytes\": SIZE} (e.g. \"64m\") or {\"tokens\": N}: the KV memory every backend gets");
    } else if (!cJSON_IsObject(kb) || cJSON_GetArraySize(kb) != 1) {
        sc_err(c, kp, "expected {\"bytes\": SIZE} or {\"tokens\": N} (exactly one), got %s",
               cJSON_IsObject(kb) ? "an object without exactly one key" : jv_type(kb));
    } else {
        static const char *const bk[] = {"bytes", "tokens", NULL};
        sc_check_keys(c, kb, kp, bk);
        const cJSON *v = kb->child;
        char q[128];
        sc_join(q, sizeof(q), kp, v->string);
        long long n = 0;
        if (!strcmp(v->string, "tokens")) {
            if (!sc_int_value(c, v, q, 1, 1ll << 40, &n)) r->kv_budget_tokens = (uint64_t)n;
        } else if (!strcmp(v->string, "bytes")) {
            uint64_t b = 0;
            if (cJSON_IsNumber(v)) {
                if (!sc_int_value(c, v, q, 1, 1ll << 50, &n)) r->kv_budget_bytes = (uint64_t)n;
            } else if (!cJSON_IsString(v) || ut_parse_size(v->valuestring, &b) || b == 0) {
                sc_err(c, q, "expected a size in bytes: an integer or a string such as \"8m\", \"512k\", \"1g\"%s%s%s",
                       cJSON_IsString(v) ? ", got \"" : "", cJSON_IsString(v) ? v->valuestring : "", cJSON_IsString(v) ? "\"" : "");
            } else {
                r->kv_budget_bytes = b;
            }
        }
    }

    const cJSON *tg = cJSON_GetObjectItemCaseSensitive(j, "targets");
    const char *tp = ".workload.requests.targets";
    if (tg && !cJSON_IsObject(tg)) {
        sc_err(c, tp, "expected {\"ttft_ms\": MS, \"tpot_ms\": MS}, got %s", jv_type(tg));
    } else if (tg) {
        static const char *const tk[] = {"ttft_ms", "tpot_ms", NULL};
        sc_check_keys(c, tg, tp, tk);
        if (!cJSON_GetArraySize(tg)) sc_err(c, tp, "empty: give \"ttft_ms\", \"tpot_ms\" or both");
        sc_get_num(c, tg, "ttft_ms", tp, 0, 1, 1e9, &r->ttft_ms);
        sc_get_num(c, tg, "tpot_ms", tp, 0, 1, 1e9, &r->tpot_ms);
    }
}

/* ---- workload ---- */

static void sc_parse_workload(sc_ctx *c, scenario *s, const cJSON *w) {
    const char *path = ".workload";
    if (!cJSON_IsObject(w)) {
        sc_err(c, path, "expected an object {\"prompt_tokens\": N | \"prompt\": TEXT, \"generate\": N, ...}, got %s",
               jv_type(w));
        return;
    }
    static const char *const keys[] = {"prompt", "prompt_tokens", "generate", "seed", "temperature", "topp", "ctx",
                                       "requests", NULL};
    sc_check_keys(c, w, path, keys);
    int has_text = cJSON_GetObjectItemCaseSensitive(w, "prompt") != NULL;
    int has_n = cJSON_GetObjectItemCaseSensitive(w, "prompt_tokens") != NULL;
    const cJSON *rq = cJSON_GetObjectItemCaseSensitive(w, "requests");
    if (rq) {
        /* each request has its own prompt and output lengths */
        static const char *const single[] = {"prompt", "prompt_tokens", "generate", NULL};
        for (int i = 0; single[i]; i++)
            if (cJSON_GetObjectItemCaseSensitive(w, single[i])) {
                char p[64];
                snprintf(p, sizeof(p), ".workload.%s", single[i]);
                sc_err(c, p, "not with \"requests\": each request has its own prompt_len and output_len");
            }
        sc_parse_requests(c, s, rq);
    } else {
        if (has_text == has_n) sc_err(c, path, "expected exactly one of \"prompt\" (text) and \"prompt_tokens\" (a count)");
        if (has_text) sc_get_string(c, w, "prompt", path, 1, &s->prompt);
        if (has_n) sc_get_i(c, w, "prompt_tokens", path, 1, 1, 1 << 20, &s->prompt_tokens);
        sc_get_i(c, w, "generate", path, 1, 1, 1 << 20, &s->generate);
    }
    long long seed = (long long)s->seed;
    sc_get_int(c, w, "seed", path, 0, 0, INT64_MAX / 2, &seed);
    s->seed = (uint64_t)seed;
    sc_get_num(c, w, "temperature", path, 0, 0, 100, &s->temperature);
    sc_get_num(c, w, "topp", path, 0, 1, 1, &s->topp);
    sc_get_i(c, w, "ctx", path, 0, 0, 1 << 24, &s->ctx);
    const sc_requests *r = s->requests;
    /* the longest request: the prefix, its prompt, its tokens but the last (never fed back) */
    long long longest = r ? tf_longest(r) : 0;
    if (r && s->ctx > 0 && longest > s->ctx && r->traffic && (r->traffic->trace || r->traffic->sessions))
        sc_err(c, ".workload.ctx", "%d positions cannot hold the longest request: %lld positions (%s)", s->ctx, longest,
               r->traffic->trace ? "the longest scaled trace prompt and output" : "turns x (prompt_len + output_len)");
    else if (r && s->ctx > 0 && longest > s->ctx)
        sc_err(c, ".workload.ctx", "%d positions cannot hold the longest request: shared prefix %d + prompt_len %d + "
               "output_len %d - 1 = %lld", s->ctx, r->prefix_tokens, r->prompt_len.hi, r->output_len.hi, longest);
    if (!r && s->ctx > 0 && s->prompt_tokens + s->generate > s->ctx)
        sc_err(c, ".workload.ctx", "%d positions cannot hold prompt_tokens %d + generate %d", s->ctx,
               s->prompt_tokens, s->generate);
}

/* ---- matrix ---- */

static const char *const sc_cache_names[] = {"cold", "warm", NULL};
static const char *const sc_numerics_names[] = ENGINE_NUMERICS_NAMES;  /* in engine_numerics' order: ival is the value */
static const char *const sc_scratch_names[] = ENGINE_SCRATCH_NAMES;    /* in engine_scratch's order */

/* The table of axes, defined after the parsers its rows name (below sc_parse_repack). */
static sc_axis_def sc_axes[SC_AX_MAX];
static int sc_n_axes = SC_AX_COUNT;

int sc_axis_count(void) { return sc_n_axes; }

const sc_axis_def *sc_axis_get(int axis) { return axis >= 0 && axis < sc_n_axes ? &sc_axes[axis] : NULL; }

const char *sc_axis_name(int axis) { return sc_axis_get(axis) ? sc_axes[axis].key : "?"; }

int sc_axis_find(const char *key) {
    for (int a = 0; key && a < sc_n_axes; a++)
        if (!strcmp(key, sc_axes[a].key)) return a;
    return -1;
}

const char *sc_axis_list(void) {
    static char list[SC_AX_MAX * 24];
    size_t used = 0;
    list[0] = 0;
    for (int a = 0; a < sc_n_axes && used < sizeof(list); a++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", a ? ", " : "", sc_axes[a].key);
    return list;
}

int sc_axis_add(const sc_axis_def *d, char *err, size_t errlen) {
    const char *why = NULL;
    if (!d->key || !d->key[0] || strlen(d->key) > 20) why = "expected a key of 1 .. 20 bytes";
    else if (sc_axis_find(d->key) >= 0 || !strcmp(d->key, "fixed")) why = "the key is taken";
    else if (d->type == SC_AXT_NONE || (!d->def && !d->def_of)) why = "an added axis needs a type and a default";
    else if ((d->type == SC_AXT_CUSTOM && !d->parse) || (d->type == SC_AXT_ENUM && !d->choices)) why = "no parse or choices";
    else if (d->spec[0].name && (d->spec[0].off < offsetof(ws_engine, more) ||
                                 d->spec[0].off >= offsetof(ws_engine, more) + sizeof(((ws_engine *)0)->more)))
        why = "its spec field is not in ws_engine.more";
    else if (sc_n_axes == SC_AX_MAX) why = "the table is full";
    if (why) return bench_errf(err, errlen, "axis \"%s\": %s", d->key ? d->key : "", why);
    sc_axes[sc_n_axes] = *d;
    return sc_n_axes++;
}

int sc_axis_shown(const scenario *s, int axis) {
    const sc_axis *ax = &s->axes[axis];
    const sc_axis_def *d = &sc_axes[axis];
    return ax->crossed || ((d->flags & SC_AXF_SHOW_NOT_DEF) && ax->n == 1 && strcmp(ax->v[0].name, d->def));
}

/* An option value as module option text. */
static int sc_opt_text(const cJSON *v, char *buf, size_t len) {
    if (cJSON_IsBool(v)) snprintf(buf, len, "%d", cJSON_IsTrue(v) ? 1 : 0);
    else if (cJSON_IsString(v)) snprintf(buf, len, "%s", v->valuestring);
    else if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 9e15)
        snprintf(buf, len, "%lld", (long long)v->valuedouble);
    else if (cJSON_IsNumber(v)) snprintf(buf, len, "%.17g", v->valuedouble);
    else return -1;
    return strchr(buf, ',') || strchr(buf, '=') ? -1 : 0;
}

/* An option of the module choice being parsed, as the file gives it (v: its value as text,
 * sc_opt_text): checked against each module's table by sc_type_opts, not through the
 * choice's "k=v,k=v" label text. */
static void sc_give(sc_ctx *c, const cJSON *it, const char *v, const char *p) {
    if (c->n_given == SC_MAX_OPTS) {
        sc_err(c, p, "more than %d options", SC_MAX_OPTS);
        return;
    }
    int n = c->n_given++;
    /* a string as the file has it; a number's or a bool's text is under 32 bytes */
    const char *value = cJSON_IsString(it) ? it->valuestring : strcpy(c->given_text[n], v);
    c->given[n] = (bench_opt){.key = it->string, .value = value, .kind = BENCH_OPTV_TEXT};
}

/* Two lists of typed options alike, value for value. */
static int sc_typed_same(const bench_opts *a, const bench_opts *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++) {
        const bench_opt *x = &a->v[i], *y = &b->v[i];
        if (strcmp(x->key, y->key) || x->kind != y->kind || x->num != y->num ||
            (x->kind == BENCH_OPTV_STR && strcmp(x->value, y->value)))
            return 0;
    }
    return 1;
}

/* A module's options against what it declares, checked here once: the choice keeps them as
 * typed values for the worker spec (sc_choice.typed). A choice checked on several devices
 * must give each device's module the same values. A choice that sizes a shared KV pool
 * with an option notes which (sc_choice.pool_opt). */
static void sc_type_opts(sc_ctx *c, const bench_module *m, sc_choice *ch, const char *p, const char *device) {
    bench_opts opts = {c->n_given, c->given}, typed;
    void *mem = NULL;
    char err[512];
    if (modreg_type_opts(m, &opts, &typed, &mem, err, sizeof(err))) {
        sc_err(c, p, "%s", err);
        return;
    }
    if (m->caps & BENCH_CAP_KV_SHARED_POOL) modreg_pool_opt_given(m, &opts, ch->pool_opt, sizeof(ch->pool_opt));
    if (!ch->typed_mem) {
        ch->typed = typed;
        ch->typed_mem = mem;
        return;
    }
    if (!sc_typed_same(&ch->typed, &typed))
        sc_err(c, p, "options \"%s\": the %s module built for %s takes them as other types than another device's module "
               "(give the choice once per device)", ch->opts, m->family, device ? device : "cpu");
    free(mem);
}

/* Checks a module name and options against what is built for device (NULL: the CPU);
 * dlopens it for its option list. */
static void sc_check_module_on(sc_ctx *c, const char *family, const char *device, sc_choice *ch, const char *p) {
    char *dir = modreg_device_dir(c->module_dir, device);
    char *have = dir ? modreg_names(dir, family) : NULL;
    int found = 0;
    if (have) {
        /* modreg_names gives "a, b, c" */
        size_t nl = strlen(ch->name);
        for (const char *q = have; *q;) {
            size_t l = strcspn(q, ",");
            if (l == nl && !strncmp(q, ch->name, nl)) found = 1;
            q += l;
            while (*q == ',' || *q == ' ') q++;
        }
    }
    char on[64] = "";
    if (device) snprintf(on, sizeof(on), " on device %s", device);
    if (!found) {
        if (have && *have)
            sc_err(c, p, "unknown %s \"%s\"%s (have: %s)", family, ch->name, on, have);
        else
            sc_err(c, p, "unknown %s \"%s\"%s: no %s modules in %s (build them with `make`, or set BENCH_MODULE_PATH)",
                   family, ch->name, on, family, dir ? dir : c->module_dir);
        free(have);
        free(dir);
        return;
    }
    free(have);
    free(dir);
    const bench_module *m;
    char err[512];
    if (modreg_cache_load(c->s->mods, c->module_dir, device, family, ch->name, &m, err, sizeof(err))) {
        sc_err(c, p, "%s", err);
        return;
    }
    sc_type_opts(c, m, ch, p, device);
    if (!strcmp(family, "kv")) {
        uint32_t types = 0;
        for (int t = 0; t < BENCH_DTYPE_COUNT; t++)
            if (bench_kv_stores(m->iface, (bench_dtype)t)) types |= 1u << t;
        ch->kv_types = ch->kv_types ? ch->kv_types & types : types;   /* on every device checked */
    }
}

/* Loader and KV modules are built per device: each is checked on every device of the
 * scenario (the device axis is parsed first). Allocators serve the host: the CPU's. */
static void sc_check_module(sc_ctx *c, const char *family, sc_choice *ch, const char *p) {
    const sc_axis *dev = c->s && strcmp(family, "alloc") ? &c->s->axes[SC_AX_DEVICE] : NULL;
    if (!dev || !dev->n) {
        if (!c->device_failed || !dev) sc_check_module_on(c, family, NULL, ch, p);
        return;
    }
    for (int k = 0; k < dev->n; k++)
        sc_check_module_on(c, family, strcmp(dev->v[k].name, "cpu") ? dev->v[k].name : NULL, ch, p);
}

/* A device: "cpu" (the core's own forward pass, no options) or a device module that is
 * built and can run here. Returns -1 when it is not built (nothing to check its loader
 * and kv choices against); a built device that cannot run here is an error too, but its
 * modules are still checked, so that one run on a machine without the device shows
 * every other mistake as well. */
static int sc_check_device(sc_ctx *c, sc_choice *ch, const char *p) {
    if (!strcmp(ch->name, "cpu")) {
        if (ch->opts[0]) {
            sc_err(c, p, "device cpu takes no options (the CPU's forward pass is the core's own)");
            return -1;
        }
        return 0;
    }
    const bench_module *m;
    char err[768];
    int rc = modreg_cache_load(c->s->mods, c->module_dir, NULL, "device", ch->name, &m, err, sizeof(err));
    if (rc) {
        /* the module is there but refused (its interface version, a broken file): say why */
        if (rc != -BENCH_ERR_NOTFOUND) {
            sc_err(c, p, "%s", err);
            return -1;
        }
        char *have = modreg_names(c->module_dir, "device");
        if (have && *have) sc_err(c, p, "unknown device \"%s\" (have: cpu, %s)", ch->name, have);
        else
            sc_err(c, p, "device \"%s\" is not built here: no device_%s.so in %s (make builds the CUDA modules where nvcc "
                   "is on the PATH)", ch->name, ch->name, c->module_dir);
        free(have);
        return -1;
    }
    /* its interface version was checked when it loaded (modreg.c) */
    const struct bench_device_iface *d = m->iface;
    if (d->probe && !d->probe(err, sizeof(err))) sc_err(c, p, "device %s: %s", ch->name, err);
    sc_type_opts(c, m, ch, p, NULL);
    return 0;
}

static void sc_target_err(void *user, const char *path, const char *msg) { sc_err(user, path, "%s", msg); }

/* "got ..." for a message: a string in quotes, else the JSON type. */
static void sc_got(const cJSON *j, char *buf, size_t len) {
    if (cJSON_IsString(j)) snprintf(buf, len, "\"%s\"", j->valuestring);
    else snprintf(buf, len, "%s", jv_type(j));
}

/* A boolean axis: a JSON boolean only. "yes" or 0 could be read either way, and a file that
 * means false but is taken as true measures the other setting without a word. */
static int sc_parse_bool(sc_ctx *c, const sc_axis_def *d, const cJSON *j, const char *p, sc_choice *ch) {
    char got[160];
    sc_got(j, got, sizeof(got));
    if (!cJSON_IsBool(j)) {
        sc_err(c, p, "expected %s, got %s", d->expect ? d->expect : "true or false", got);
        return -1;
    }
    ch->ival = cJSON_IsTrue(j);
    ch->name = strdup(ch->ival ? "true" : "false");
    /* the table's column reads "pread/no-repack", not "pread/false" */
    ch->label = strdup(d->labels[ch->ival] ? d->labels[ch->ival] : ch->name);
    return 0;
}

static int sc_parse_enum(sc_ctx *c, const sc_axis_def *d, const cJSON *j, const char *p, sc_choice *ch) {
    if (!cJSON_IsString(j) || (ch->ival = jv_enum(j->valuestring, d->choices)) < 0) {
        char got[160];
        sc_got(j, got, sizeof(got));
        sc_err(c, p, "expected %s, got %s", d->expect, got);
        return -1;
    }
    ch->name = strdup(j->valuestring);
    ch->label = strdup(j->valuestring);
    return 0;
}

static int sc_parse_int(sc_ctx *c, const sc_axis_def *d, const cJSON *j, const char *p, sc_choice *ch) {
    long long v;
    if (sc_int_value(c, j, p, d->lo, d->hi, &v)) return -1;
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", v);
    ch->ival = (int)v;
    ch->name = strdup(buf);
    ch->label = strdup(buf);
    return 0;
}

static int sc_parse_target(sc_ctx *c, const cJSON *j, const char *p, sc_choice *ch) {
    return tg_parse(j, p, &ch->name, &ch->label, &ch->http, sc_target_err, c);
}

/* A kernel family this CPU cannot run is an error here, not a failed run later: the
 * message names the ones it does run. */
static int sc_parse_kernels(sc_ctx *c, const cJSON *j, const char *p, sc_choice *ch) {
    char have[160], got[160];
    sc_got(j, got, sizeof(got));
    if (!cJSON_IsString(j) || !kn_isa_known(j->valuestring)) {
        kn_isa_list(have, sizeof(have), 0);
        sc_err(c, p, "expected a kernel family (auto, %s), got %s", have, got);
        return -1;
    }
    if (!kn_isa_resolve(j->valuestring)) {
        kn_isa_list(have, sizeof(have), 1);
        sc_err(c, p, "kernels \"%s\": this CPU cannot run them (it runs: auto, %s)", j->valuestring, have);
        return -1;
    }
    ch->name = strdup(j->valuestring);
    ch->label = strdup(j->valuestring);
    return 0;
}

/* The KV cache's element types, parsed here once into ch->cache_type: every kv choice is
 * checked against them, and the worker spec carries them, typed. */
static int sc_parse_kv_cache(sc_ctx *c, const cJSON *j, const char *p, sc_choice *ch) {
    bench_dtype k, v;
    char e1[256], names[128], got[160];
    if (!cJSON_IsString(j) || engine_parse_cache_type(j->valuestring, &k, &v, e1, sizeof(e1))) {
        engine_cache_type_names(names, sizeof(names), ", ");
        sc_got(j, got, sizeof(got));
        sc_err(c, p, "expected a KV cache type (%s, or K/V as q8_0/f16), got %s", names, got);
        return -1;
    }
    char name[24], label[32];
    engine_cache_type_name(k, v, name, sizeof(name));
    if (k == v) snprintf(label, sizeof(label), "%s", name);
    else snprintf(label, sizeof(label), "k:%s,v:%s", bench_dtype_name(k), bench_dtype_name(v));
    ch->cache_type = (sc_cache_type){k, v};
    ch->name = strdup(name);
    ch->label = strdup(label);
    return 0;
}

#define SC_SPEC(name, type, member, def, flags) {name, type, offsetof(ws_engine, member), def, flags}
/* an engine.h default as the table's string (a number macro spelled once) */
#define SC_STR_(x) #x
#define SC_STR(x) SC_STR_(x)

/* engine_default_cache_type over every kv choice: a module that stores f32 only (an older
 * out-of-tree one) keeps the whole scenario on f32, which results.json then names. */
static const char *sc_default_cache_type(const scenario *s) {
    uint32_t all = ~0u;
    for (int i = 0; i < s->axes[SC_AX_KV].n; i++)
        if (s->axes[SC_AX_KV].v[i].kv_types) all &= s->axes[SC_AX_KV].v[i].kv_types;
    return bench_dtype_name(engine_default_cache_type(all));
}

static sc_axis_def sc_axes[SC_AX_MAX] = {
    [SC_AX_LOADER] = {.key = "loader", .type = SC_AXT_MODULE, .def = "mmap",
                      .spec = {SC_SPEC("loader", WS_STR, module[0], 0, 0), SC_SPEC("loader_opts", WS_OPTS, opts[0], 0, 0)}},
    [SC_AX_KV] = {.key = "kv", .type = SC_AXT_MODULE, .def = "prealloc",
                  .spec = {SC_SPEC("kv", WS_STR, module[1], 0, 0), SC_SPEC("kv_opts", WS_OPTS, opts[1], 0, 0)}},
    [SC_AX_ALLOC] = {.key = "alloc", .type = SC_AXT_MODULE, .def = "libc",
                     .spec = {SC_SPEC("alloc", WS_STR, module[2], 0, 0), SC_SPEC("alloc_opts", WS_OPTS, opts[2], 0, 0)}},
    /* the parent's: the page cache is evicted or not before a repetition */
    [SC_AX_CACHE] = {.key = "cache", .type = SC_AXT_ENUM, .flags = SC_AXF_TOP, .choices = sc_cache_names,
                     .expect = "\"cold\" or \"warm\""},
    [SC_AX_THREADS] = {.key = "threads", .type = SC_AXT_INT, .flags = SC_AXF_TOP, .def = "0", .lo = 0, .hi = 1024,
                       .spec = {SC_SPEC("threads", WS_INT, threads, 0, 0)}},
    [SC_AX_DEVICE] = {.key = "device", .type = SC_AXT_DEVICE, .flags = SC_AXF_TOP | SC_AXF_FIRST, .def = "cpu",
                      .spec = {SC_SPEC("device", WS_STR, device, 0, 0), SC_SPEC("device_opts", WS_OPTS, device_opts, 0, 0)}},
    [SC_AX_WORKLOAD] = {.key = "workload", .type = SC_AXT_NONE},
    [SC_AX_KERNELS] = {.key = "kernels", .type = SC_AXT_CUSTOM, .flags = SC_AXF_TOP, .def = "auto", .parse = sc_parse_kernels,
                       .spec = {SC_SPEC("kernels", WS_STR, kernels, 0, 0)}},
    [SC_AX_KV_CACHE] = {.key = "kv_cache", .type = SC_AXT_CUSTOM, .flags = SC_AXF_TOP, .def_of = sc_default_cache_type,
                        .parse = sc_parse_kv_cache,
                        .spec = {SC_SPEC("kv_cache", WS_CACHE_TYPE, kv_types, 0, 0)}},
    /* an http target's settings, as the scenario gave them (harness/scenario/target.h) */
    [SC_AX_TARGET] = {.key = "target", .type = SC_AXT_CUSTOM, .flags = SC_AXF_TOP, .def = "engine", .parse = sc_parse_target,
                      .spec = {SC_SPEC("target", WS_STR, target, 0, WS_IF_SET),
                               SC_SPEC("target_http", WS_TARGET, target_http, 0, WS_IF_SET)}},
    /* written only when false: the specs of the default (repacking) variants stay as they were */
    [SC_AX_REPACK] = {.key = "repack", .type = SC_AXT_BOOL, .flags = SC_AXF_TOP | SC_AXF_SHOW_NOT_DEF, .def = "true",
                      .expect = "true (rearrange Q4_0 weights at load for the kernels, the default) or false (keep the "
                                "file's layout)",
                      .labels = {"no-repack", "repack"}, .spec = {SC_SPEC("repack", WS_BOOL, repack, 1, WS_IF_SET)}},
    /* written only when exact: the specs of the default variants stay as they were */
    [SC_AX_NUMERICS] = {.key = "numerics", .type = SC_AXT_ENUM, .flags = SC_AXF_TOP | SC_AXF_SHOW_NOT_DEF, .def = "production",
                        .choices = sc_numerics_names,
                        .expect = "\"production\" (auto may round x, to int8 or bf16 as llama.cpp does, where llama.cpp's accuracy holds, the default) or "
                                  "\"exact\" (the exact kernels only)",
                        .spec = {SC_SPEC("numerics", WS_INT, numerics, 0, WS_IF_SET)}},
    /* written only when pass: the specs of the default variants stay as they were */
    [SC_AX_SCRATCH] = {.key = "scratch", .type = SC_AXT_ENUM, .flags = SC_AXF_TOP | SC_AXF_SHOW_NOT_DEF, .def = "keep",
                       .choices = sc_scratch_names,
                       .expect = "\"keep\" (the forward pass's activations in one block kept between passes, the default) or "
                                 "\"pass\" (a block from the allocator module every pass, for allocator studies)",
                       .spec = {SC_SPEC("scratch", WS_INT, scratch, 0, WS_IF_SET)}},
    /* written only when not 512: the specs of the default variants stay as they were */
    [SC_AX_UBATCH] = {.key = "ubatch", .type = SC_AXT_INT, .flags = SC_AXF_TOP | SC_AXF_SHOW_NOT_DEF, .def = SC_STR(ENGINE_UBATCH),
                      .lo = ENGINE_UBATCH_MIN, .hi = 1 << 24,
                      .spec = {SC_SPEC("ubatch", WS_INT, ubatch, ENGINE_UBATCH, WS_IF_SET)}},
};
#undef SC_SPEC
#undef SC_STR
#undef SC_STR_

static int sc_parse_choice(sc_ctx *c, int axis, const cJSON *j, const char *p, sc_choice *ch) {
    memset(ch, 0, sizeof(*ch));
    const sc_axis_def *d = &sc_axes[axis];
    switch (d->type) {
    case SC_AXT_CUSTOM: return d->parse(c, j, p, ch);
    case SC_AXT_BOOL: return sc_parse_bool(c, d, j, p, ch);
    case SC_AXT_ENUM: return sc_parse_enum(c, d, j, p, ch);
    case SC_AXT_INT: return sc_parse_int(c, d, j, p, ch);
    case SC_AXT_MODULE: case SC_AXT_DEVICE: case SC_AXT_NONE: break;
    }
    const char *family = d->key;
    char opts[512] = "";
    c->n_given = 0;
    if (cJSON_IsString(j)) {
        ch->name = strdup(j->valuestring);
    } else if (cJSON_IsObject(j)) {
        static const char *const keys[] = {"name", "options", "label", NULL};
        sc_check_keys(c, j, p, keys);
        if (sc_get_string(c, j, "name", p, 1, &ch->name)) return -1;
        sc_get_string(c, j, "label", p, 0, &ch->label);
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "options");
        char op[256];
        sc_join(op, sizeof(op), p, "options");
        if (o && !cJSON_IsObject(o)) {
            sc_err(c, op, "expected an object {\"option\": value, ...}, got %s", jv_type(o));
        } else if (o) {
            for (const cJSON *it = o->child; it; it = it->next) {
                char v[160], ip[300];
                snprintf(ip, sizeof(ip), "%s.%s", op, it->string);
                if (sc_opt_text(it, v, sizeof(v))) {
                    sc_err(c, ip, "expected a boolean, number or string without ',' and '=', got %s", jv_type(it));
                    continue;
                }
                sc_give(c, it, v, ip);
                size_t used = strlen(opts);
                snprintf(opts + used, sizeof(opts) - used, "%s%s=%s", used ? "," : "", it->string, v);
            }
        }
    } else {
        sc_err(c, p, "expected a %s name or {\"name\": ..., \"options\": {...}, \"label\": ...}, got %s", family,
               jv_type(j));
        return -1;
    }
    ch->opts = strdup(opts);
    if (!ch->label) {
        size_t len = strlen(ch->name) + strlen(opts) + 2;
        ch->label = malloc(len);
        if (ch->label) snprintf(ch->label, len, "%s%s%s", ch->name, opts[0] ? ":" : "", opts);
    }
    if (d->type == SC_AXT_DEVICE) {
        if (sc_check_device(c, ch, p)) {
            c->device_failed = 1;
            return -1;
        }
        return 0;
    }
    sc_check_module(c, family, ch, p);
    return 0;
}

static void sc_choice_free(sc_choice *ch) {
    free(ch->name);
    free(ch->opts);
    free(ch->label);
    free(ch->typed_mem);
    tg_http_free(ch->http);
    free(ch->http);
}

/* One axis given as a list (crossed) or a single value (fixed). */
static void sc_parse_axis(sc_ctx *c, scenario *s, int axis, const cJSON *j, const char *p, int crossed) {
    sc_axis *ax = &s->axes[axis];
    /* v, not n: an axis whose every choice was wrong was still given (and its list is owned) */
    if (ax->v) {
        sc_err(c, p, "%s is given twice (top level, matrix and matrix.fixed are exclusive)", sc_axes[axis].key);
        return;
    }
    if (crossed && !cJSON_IsArray(j)) {
        sc_err(c, p, "expected a list of choices, got %s (use matrix.fixed for a single value)", jv_type(j));
        return;
    }
    int n = crossed ? cJSON_GetArraySize(j) : 1;
    if (n == 0) {
        sc_err(c, p, "empty list: give at least one choice");
        return;
    }
    ax->v = calloc((size_t)n, sizeof(*ax->v));
    if (!ax->v) return;
    ax->crossed = crossed;
    for (int i = 0; i < n; i++) {
        char ip[256];
        const cJSON *item = crossed ? cJSON_GetArrayItem(j, i) : j;
        if (crossed) snprintf(ip, sizeof(ip), "%s[%d]", p, i);
        else snprintf(ip, sizeof(ip), "%s", p);
        if (sc_parse_choice(c, axis, item, ip, &ax->v[ax->n])) {
            sc_choice_free(&ax->v[ax->n]);
            continue;
        }
        for (int k = 0; k < ax->n; k++)
            if (!strcmp(ax->v[k].label, ax->v[ax->n].label)) {
                sc_err(c, ip, "duplicate choice \"%s\" (give a distinct \"label\")", ax->v[k].label);
                break;
            }
        ax->n++;
    }
}

/* Into keys (NULL-terminated; room for SC_AX_MAX, the two lists and 1): before, the axes' keys
 * where flag says (0: the matrix, every axis an engine scenario reads), then after. The
 * messages list the allowed keys in this order. */
static void sc_axis_keys(const char **keys, const char *const *before, unsigned flag, const char *const *after) {
    int n = 0;
    for (; before && *before; before++) keys[n++] = *before;
    for (int a = 0; a < sc_n_axes; a++)
        if (sc_axes[a].type != SC_AXT_NONE && (!flag || (sc_axes[a].flags & flag))) keys[n++] = sc_axes[a].key;
    for (; after && *after; after++) keys[n++] = *after;
    keys[n] = NULL;
}

static void sc_parse_matrix(sc_ctx *c, scenario *s, const cJSON *m) {
    if (!cJSON_IsObject(m)) {
        sc_err(c, ".matrix", "expected an object {\"loader\": [...], \"kv\": [...], \"fixed\": {...}}, got %s",
               jv_type(m));
        return;
    }
    static const char *const fixed_key[] = {"fixed", NULL};
    const char *keys[SC_AX_MAX + 2];
    sc_axis_keys(keys, NULL, 0, fixed_key);
    sc_check_keys(c, m, ".matrix", keys);
    const cJSON *fixed = cJSON_GetObjectItemCaseSensitive(m, "fixed");
    if (fixed && !cJSON_IsObject(fixed)) sc_err(c, ".matrix.fixed", "expected an object, got %s", jv_type(fixed));
    sc_axis_keys(keys, NULL, 0, NULL);
    if (fixed && cJSON_IsObject(fixed)) sc_check_keys(c, fixed, ".matrix.fixed", keys);
    /* the workload axis belongs to allocator scenarios (harness/scenario/alloc_spec.c); the
     * device axis goes first: the loader and kv choices are checked on its devices */
    for (int pass = 0; pass < 2; pass++)
        for (int a = 0; a < sc_n_axes; a++) {
            const sc_axis_def *d = &sc_axes[a];
            if (d->type == SC_AXT_NONE || ((d->flags & SC_AXF_FIRST) != 0) == pass) continue;
            const cJSON *j = cJSON_GetObjectItemCaseSensitive(m, d->key);
            const cJSON *f = fixed && cJSON_IsObject(fixed) ? cJSON_GetObjectItemCaseSensitive(fixed, d->key) : NULL;
            char p[128];
            if (j) {
                snprintf(p, sizeof(p), ".matrix.%s", d->key);
                sc_parse_axis(c, s, a, j, p, 1);
            }
            if (f) {
                snprintf(p, sizeof(p), ".matrix.fixed.%s", d->key);
                sc_parse_axis(c, s, a, f, p, 0);
            }
        }
}

/* The row's default as the file would give it: a number, a boolean or a string by type. */
static void sc_default_axis(sc_ctx *c, scenario *s, int axis) {
    sc_axis *ax = &s->axes[axis];
    const sc_axis_def *d = &sc_axes[axis];
    const char *def = d->def_of ? d->def_of(s) : d->def;
    if (ax->n || !def || d->type == SC_AXT_NONE) return;
    cJSON *j = d->type == SC_AXT_INT  ? cJSON_CreateNumber(atoi(def)) :
               d->type == SC_AXT_BOOL ? cJSON_CreateBool(strcmp(def, "false") != 0) : cJSON_CreateString(def);
    char p[64];
    snprintf(p, sizeof(p), "(default %s)", d->key);
    if (j) sc_parse_axis(c, s, axis, j, p, 0);
    cJSON_Delete(j);
}

/* An axis without a default (cache) must be given: at the top level, or in the matrix. */
static void sc_required_axes(sc_ctx *c, const cJSON *root, const cJSON *mx) {
    const cJSON *fixed = cJSON_IsObject(mx) ? cJSON_GetObjectItemCaseSensitive(mx, "fixed") : NULL;
    for (int a = 0; a < sc_n_axes; a++) {
        const sc_axis_def *d = &sc_axes[a];
        if (d->def || d->def_of || d->type == SC_AXT_NONE || ((d->flags & SC_AXF_TOP) && cJSON_GetObjectItemCaseSensitive(root, d->key)) ||
            (cJSON_IsObject(mx) && cJSON_GetObjectItemCaseSensitive(mx, d->key)) ||
            (cJSON_IsObject(fixed) && cJSON_GetObjectItemCaseSensitive(fixed, d->key)))
            continue;
        char p[64], ex[160] = "";
        snprintf(p, sizeof(p), ".%s", d->key);
        for (int i = 0; d->choices && d->choices[i]; i++)
            snprintf(ex + strlen(ex), sizeof(ex) - strlen(ex), "%s\"%s\"", i ? ", " : "", d->choices[i]);
        sc_err(c, p, "required: %s (or a matrix axis \"%s\": [%s])", d->expect ? d->expect : "a value", d->key, ex);
    }
}

static void sc_expand(scenario *s) {
    int n = 1;
    for (int a = 0; a < sc_n_axes; a++) n *= s->axes[a].n > 0 ? s->axes[a].n : 1;
    s->variants = calloc((size_t)n, sizeof(*s->variants));
    if (!s->variants) return;
    for (int i = 0; i < n; i++) {
        sc_variant *v = &s->variants[i];
        int rest = i;
        /* the last axis varies fastest */
        for (int a = sc_n_axes - 1; a >= 0; a--) {
            int na = s->axes[a].n > 0 ? s->axes[a].n : 1;
            v->pick[a] = rest % na;
            rest /= na;
        }
        char key[512] = "";
        for (int a = 0; a < sc_n_axes; a++) {
            if (!sc_axis_shown(s, a)) continue;
            size_t used = strlen(key);
            snprintf(key + used, sizeof(key) - used, "%s%s=%s", used ? "," : "", sc_axes[a].key,
                     s->axes[a].v[v->pick[a]].label);
        }
        v->key = strdup(key[0] ? key : "default");
        v->selected = 1;
    }
    s->n_variants = n;
}

/* ---- top level ---- */

static int sc_name_ok(const char *n) {
    if (!*n || n[0] == '.') return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '_' || *p == '.'))
            return 0;
    return 1;
}

static const char *const sc_metric_names[] = {"timeline", "pss", "smaps", "perf", "tokens", "instructions:callgrind",
                                              "bandwidth", "accuracy", NULL};
static const char *const sc_fault_names[] = {"none", "segv", "exit3", "hang", "sigkill", NULL};

static void sc_close_modules(scenario *s);

int sc_parse(const char *file, const char *text, const char *module_dir, scenario **out, sc_errors *errs) {
    *out = NULL;
    memset(errs, 0, sizeof(*errs));
    sc_ctx c = {.file = file, .errs = errs, .module_dir = modreg_default_dir(module_dir)};
    scenario *s = calloc(1, sizeof(*s));
    c.s = s;
    if (!s || !c.module_dir) {
        sc_err(&c, "", "out of memory");
        free(s);
        free(c.module_dir);
        return -1;
    }
    s->file = strdup(file);
    s->module_dir = c.module_dir;
    if (!(s->mods = calloc(1, sizeof(*s->mods)))) {
        sc_err(&c, "", "out of memory");
        goto fail;
    }
    s->repetitions = 3;
    s->warmup = 1;
    s->processes = 1;
    s->sample_ms = 5;
    s->timeout_s = 300;
    /* Pss per sample walks every page table of the worker: on a machine whose cores
     * the engine fills, it slows decode severalfold, so it is asked for, not default */
    s->metrics = SC_M_ALL & ~SC_M_PSS;
    s->seed = SAMPLER_DEFAULT_SEED;
    s->topp = SAMPLER_DEFAULT_TOPP;

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        int line = 1, col = 1;
        for (const char *p = text; end && p < end && *p; p++) {
            if (*p == '\n') line++, col = 1;
            else col++;
        }
        char where[64];
        snprintf(where, sizeof(where), "line %d, column %d", line, col);
        sc_err(&c, where, "not valid JSON%s", end && *end ? " (the error is at or just before this point)" : "");
        goto fail;
    }
    s->json = root;
    if (!cJSON_IsObject(root)) {
        sc_err(&c, ".", "expected an object, got %s", jv_type(root));
        goto fail;
    }
    /* the workload kind (harness/scenario/kind.h) parses the rest: "kind": "allocators" has fields of its own */
    const cJSON *kj = cJSON_GetObjectItemCaseSensitive(root, "kind");
    if (kj && !cJSON_IsString(kj)) {
        sc_err(&c, ".kind", "expected a string, got %s", jv_type(kj));
        goto fail;
    }
    char why[256];
    const sc_kind *k = sc_kind_for_file(kj ? kj->valuestring : NULL, why, sizeof(why));
    if (!k) {
        sc_err(&c, kj ? ".kind" : "", "%s", why);
        goto fail;
    }
    if (k->parse(s, root, errs)) goto fail;
    s->kind = sc_kind_for_scenario(k, s);
    sc_close_modules(s);
    *out = s;
    return 0;
fail:
    sc_free(s);
    return -1;
}

int sc_parse_engine(scenario *s, const cJSON *root, sc_errors *errs) {
    sc_ctx c = {.file = s->file, .errs = errs, .module_dir = s->module_dir, .s = s};
    static const char *const own[] = {"name", "description", "model", "workload", "repetitions", "warmup", "matrix",
                                      "sample_ms", "metrics", "timeout_s", "processes", "test_hooks", NULL};
    const char *keys[SC_AX_MAX + sizeof(own) / sizeof(own[0])];
    sc_axis_keys(keys, own, SC_AXF_TOP, NULL);
    sc_check_keys(&c, root, "", keys);
    if (!sc_get_string(&c, root, "name", "", 1, &s->name) && !sc_name_ok(s->name))
        sc_err(&c, ".name", "\"%s\": expected letters, digits, '-', '_' or '.' only (it names the results directory)",
               s->name);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "description");
    if (d) sc_get_string(&c, root, "description", "", 0, &s->description);

    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (m) sc_parse_model(&c, s, m);
    else sc_err(&c, ".model", "required: a path or {\"synth\": {\"shape\": ...}}");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "workload");
    if (w) sc_parse_workload(&c, s, w);
    else sc_err(&c, ".workload", "required: {\"prompt_tokens\": N | \"prompt\": TEXT, \"generate\": N}");

    sc_get_i(&c, root, "repetitions", "", 0, 1, 100000, &s->repetitions);
    sc_get_i(&c, root, "warmup", "", 0, 0, 100000, &s->warmup);
    sc_get_i(&c, root, "processes", "", 0, 1, 64, &s->processes);
    sc_get_num(&c, root, "sample_ms", "", 0, 0, 60000, &s->sample_ms);
    sc_get_num(&c, root, "timeout_s", "", 0, 1, 86400, &s->timeout_s);

    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "metrics");
    if (mt) {
        if (!cJSON_IsArray(mt)) {
            sc_err(&c, ".metrics", "expected a list of metric groups, got %s", jv_type(mt));
        } else {
            s->metrics = 0;
            int i = 0;
            for (const cJSON *it = mt->child; it; it = it->next, i++) {
                char p[64], list[128];
                snprintf(p, sizeof(p), ".metrics[%d]", i);
                int k = cJSON_IsString(it) ? jv_enum(it->valuestring, sc_metric_names) : -1;
                jv_join(list, sizeof(list), sc_metric_names);
                if (k < 0) sc_err(&c, p, "expected one of %s, got %s%s%s", list, cJSON_IsString(it) ? "\"" : "",
                                  cJSON_IsString(it) ? it->valuestring : jv_type(it), cJSON_IsString(it) ? "\"" : "");
                else s->metrics |= 1u << k;
            }
            if ((s->metrics & SC_M_PSS) && !(s->metrics & SC_M_TIMELINE))
                sc_err(&c, ".metrics", "\"pss\" is sampled with the timeline: add \"timeline\"");
        }
    }

    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "test_hooks");
    if (th) {
        const char *env = getenv("BENCH_TEST_HOOKS");
        if (!env || strcmp(env, "1")) {
            sc_err(&c, ".test_hooks", "accepted only when BENCH_TEST_HOOKS=1 (it makes workers fail on purpose, for the test suite)");
        } else if (!cJSON_IsObject(th)) {
            sc_err(&c, ".test_hooks", "expected an object, got %s", jv_type(th));
        } else {
            static const char *const hk[] = {"fault", "delay_ms", NULL};
            sc_check_keys(&c, th, ".test_hooks", hk);
            if (!sc_get_string(&c, th, "fault", ".test_hooks", 0, &s->fault) && jv_enum(s->fault, sc_fault_names) < 0) {
                char list[128];
                jv_join(list, sizeof(list), sc_fault_names);
                sc_err(&c, ".test_hooks.fault", "unknown fault \"%s\" (have: %s)", s->fault, list);
            }
            sc_get_i(&c, th, "delay_ms", ".test_hooks", 0, 0, 3600000, &s->delay_ms);
        }
    }

    /* axes: the top level's, then the matrix (which reports a clash), then defaults */
    for (int a = 0; a < sc_n_axes; a++) {
        const cJSON *j = sc_axes[a].flags & SC_AXF_TOP ? cJSON_GetObjectItemCaseSensitive(root, sc_axes[a].key) : NULL;
        char p[64];
        snprintf(p, sizeof(p), ".%s", sc_axes[a].key);
        if (j) sc_parse_axis(&c, s, a, j, p, 0);
    }
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(root, "matrix");
    if (mx) sc_parse_matrix(&c, s, mx);
    sc_required_axes(&c, root, mx);
    const int kv_cache_given = s->axes[SC_AX_KV_CACHE].n > 0;
    if (!errs->n) {
        for (int a = 0; a < sc_n_axes; a++) sc_default_axis(&c, s, a);
        /* a serving run's KV budget sizes a shared pool itself (engine.h: kv_budget): an
         * option the module declares as sizing its pool (BENCH_OPTF_SIZES_POOL) cannot join it */
        for (int i = 0; s->requests && i < s->axes[SC_AX_KV].n; i++) {
            const sc_choice *k = &s->axes[SC_AX_KV].v[i];
            if (k->pool_opt[0])
                sc_err(&c, ".workload.requests.kv_budget", "kv choice \"%s\" sizes its pool with %s too: "
                       "leave the option out, the budget sizes the pool of every variant", k->label, k->pool_opt);
        }
        /* no speed-up without its cost: a cheaper path (a KV cache type, an inexact kernel
         * family) brings the accuracy metric into the default set */
        int cheaper = 0;
        /* the default cache type is the production one, not a path the scenario chose: it brings no metric */
        for (int t = 0; kv_cache_given && t < s->axes[SC_AX_KV_CACHE].n; t++)
            cheaper |= s->axes[SC_AX_KV_CACHE].v[t].cache_type.k != BENCH_F32 || s->axes[SC_AX_KV_CACHE].v[t].cache_type.v != BENCH_F32;
        for (int t = 0; t < s->axes[SC_AX_KERNELS].n; t++) cheaper |= !kn_isa_exact(s->axes[SC_AX_KERNELS].v[t].name);
        if (cheaper && !cJSON_GetObjectItemCaseSensitive(root, "metrics") && !s->requests) s->metrics |= SC_M_ACCURACY;
        if ((s->metrics & SC_M_ACCURACY) && s->requests)
            sc_err(&c, ".metrics", "\"accuracy\" measures inference workloads (prompt and generate), not serving");
        /* a cache type a kv module does not store is an error here, not a failed run later */
        for (int i = 0; i < s->axes[SC_AX_KV].n; i++)
            for (int t = 0; t < s->axes[SC_AX_KV_CACHE].n; t++) {
                const sc_choice *k = &s->axes[SC_AX_KV].v[i], *ct = &s->axes[SC_AX_KV_CACHE].v[t];
                bench_dtype kt = ct->cache_type.k, vt = ct->cache_type.v;
                if (!k->kv_types) continue;
                if (!(k->kv_types >> kt & 1u) || !(k->kv_types >> vt & 1u)) {
                    char have[96] = "";
                    for (int d = 0; d < BENCH_DTYPE_COUNT; d++)
                        if (k->kv_types >> d & 1u)
                            snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s%s", have[0] ? ", " : "",
                                     bench_dtype_name((bench_dtype)d));
                    sc_err(&c, ".kv_cache", "kv \"%s\" stores %s, not a %s cache (drop the pair, or give the kv module "
                           "its own matrix)", k->label, have, ct->name);
                }
            }
        /* the pool's idle workers spin: with more than one thread the count is the scheduler's, not the work's */
        for (int i = 0; (s->metrics & SC_M_CALLGRIND) && i < s->axes[SC_AX_THREADS].n; i++)
            if (s->axes[SC_AX_THREADS].v[i].ival != 1)
                sc_err(&c, ".threads", "\"instructions:callgrind\" needs threads 1 (one thread's instructions are "
                       "deterministic; idle pool workers spin), got %s", s->axes[SC_AX_THREADS].v[i].label);
    }
    if (errs->n) return -1;
    sc_expand(s);
    if (!s->variants) {
        sc_err(&c, "", "out of memory");
        return -1;
    }
    return 0;
}

int sc_load(const char *file, const char *module_dir, scenario **out, sc_errors *errs) {
    return sc_load_on(file, module_dir, NULL, out, errs);
}

/* The text with "device": device at its top level and no device axis in its matrix; NULL
 * when it is no JSON object (sc_parse then reports the text as it is). */
static char *sc_with_device(const char *text, const char *device) {
    cJSON *root = cJSON_Parse(text);
    char *out = NULL;
    if (cJSON_IsObject(root) && !cJSON_GetObjectItemCaseSensitive(root, "kind")) {
        cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "matrix");
        cJSON *fixed = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "fixed") : NULL;
        if (cJSON_IsObject(m)) cJSON_DeleteItemFromObjectCaseSensitive(m, "device");
        if (cJSON_IsObject(fixed)) cJSON_DeleteItemFromObjectCaseSensitive(fixed, "device");
        cJSON_DeleteItemFromObjectCaseSensitive(root, "device");
        if (cJSON_AddStringToObject(root, "device", device)) out = cJSON_Print(root);
    }
    cJSON_Delete(root);
    return out;
}

int sc_load_on(const char *file, const char *module_dir, const char *device, scenario **out, sc_errors *errs) {
    *out = NULL;
    memset(errs, 0, sizeof(*errs));
    /* a scenario is a few KB: a bigger "file" (/dev/zero, a model given by mistake) is refused */
    char msg[256];
    char *buf = ut_slurp(file, SC_MAX_FILE, NULL, msg, sizeof(msg));
    if (!buf) {
        int e = errno;
        sc_ctx c = {.file = file, .errs = errs};
        if (e == EFBIG) sc_err(&c, "", "larger than %d MiB: not a scenario file", SC_MAX_FILE >> 20);
        else if (e == ENOMEM) sc_err(&c, "", "out of memory");
        else sc_err(&c, "", "cannot open: %s", strerror(e));
        return -1;
    }
    char *moved = device ? sc_with_device(buf, device) : NULL;
    int rc = sc_parse(file, moved ? moved : buf, module_dir, out, errs);
    free(moved);
    free(buf);
    return rc;
}

static void sc_close_modules(scenario *s) {
    modreg_cache_close(s->mods);
    free(s->mods);
    s->mods = NULL;
}

void sc_free(scenario *s) {
    if (!s) return;
    sc_close_modules(s);
    free(s->file);
    free(s->name);
    free(s->description);
    free(s->model_path);
    free(s->tokenizer_path);
    free(s->model_resolved);
    free(s->tokenizer_resolved);
    free(s->synth_shape);
    free(s->synth_dtype);
    free(s->synth_format);
    free(s->prompt);
    sc_requests_free(s->requests);
    free(s->fault);
    free(s->module_dir);
    for (int a = 0; a < SC_AX_MAX; a++) {
        for (int i = 0; i < s->axes[a].n; i++) sc_choice_free(&s->axes[a].v[i]);
        free(s->axes[a].v);
    }
    for (int i = 0; i < s->n_variants; i++) free(s->variants[i].key);
    free(s->variants);
    cJSON_Delete(s->json);
    aw_scenario_free(s->aw);
    free(s);
}

const char *sc_device(const scenario *s, const sc_variant *v) {
    return s->axes[SC_AX_DEVICE].n ? sc_pick(s, v, SC_AX_DEVICE)->name : "cpu";
}

const bench_opts *sc_device_opts(const scenario *s, const sc_variant *v) {
    static const bench_opts none = {0, NULL};
    return s->axes[SC_AX_DEVICE].n ? &sc_pick(s, v, SC_AX_DEVICE)->typed : &none;
}

int sc_select(scenario *s, const char *only, char *err, size_t errlen) {
    if (!only || !*only) return 0;
    char *copy = strdup(only);
    if (!copy) return bench_errf(err, errlen, "out of memory");
    /* per axis: -1 = not filtered; else a bit mask of the allowed choices */
    long long allow[SC_AX_MAX];
    for (int a = 0; a < SC_AX_MAX; a++) allow[a] = -1;
    int rc = 0;
    for (char *tok = strtok(copy, ","); tok && !rc; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq) { rc = bench_errf(err, errlen, "--only: \"%s\": expected key=value", tok); break; }
        *eq = 0;
        int a = sc_axis_find(tok);
        if (a < 0) {
            rc = bench_errf(err, errlen, "--only: unknown key \"%s\" (have: %s)", tok, sc_axis_list());
            break;
        }
        int k;
        for (k = 0; k < s->axes[a].n && k < 63; k++)
            if (!strcmp(s->axes[a].v[k].label, eq + 1) || !strcmp(s->axes[a].v[k].name, eq + 1)) break;
        if (k == s->axes[a].n || k >= 63) {
            char have[512] = "";
            for (int i = 0; i < s->axes[a].n; i++) {
                if (i) strncat(have, ", ", sizeof(have) - strlen(have) - 1);
                strncat(have, s->axes[a].v[i].label, sizeof(have) - strlen(have) - 1);
            }
            rc = bench_errf(err, errlen, "--only: %s has no choice \"%s\" in this scenario (have: %s)", tok, eq + 1, have);
            break;
        }
        if (allow[a] < 0) allow[a] = 0;
        /* a name matches every choice of that module, whatever its options */
        for (int i = 0; i < s->axes[a].n && i < 63; i++)
            if (!strcmp(s->axes[a].v[i].label, eq + 1) || !strcmp(s->axes[a].v[i].name, eq + 1)) allow[a] |= 1ll << i;
    }
    free(copy);
    if (rc) return rc;
    for (int i = 0; i < s->n_variants; i++) {
        int keep = 1;
        for (int a = 0; a < sc_n_axes; a++)
            if (allow[a] >= 0 && !(allow[a] & (1ll << s->variants[i].pick[a]))) keep = 0;
        s->variants[i].selected = keep;
    }
    if (!sc_n_selected(s)) return bench_errf(err, errlen, "--only %s: no variant left", only);
    return 0;
}

int sc_n_selected(const scenario *s) {
    int n = 0;
    for (int i = 0; i < s->n_variants; i++) n += s->variants[i].selected;
    return n;
}

int sc_synth_path(const scenario *s, const char *dir, char *buf, size_t len) {
    if (!s->synth) return -1;
    const model_writer *w = model_writer_find(s->synth_format);
    const char *ext = w && w->suffix ? w->suffix : ""; /* none: a folder */
    int n = snprintf(buf, len, "%s/%s-%s-s%llu%s", dir, s->synth_shape, s->synth_dtype,
                     (unsigned long long)s->synth_seed, ext);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The fuzz targets' bodies, shared by the libFuzzer entry points (fuzz/fuzz_*.c) and
 * by tests/test_reliab.c, which replays every input in fuzz/regress/<target>/ through
 * the same code under the test build's ASan+UBSan.
 * Each returns 0 when the input was accepted or rejected with a message, and -1 when
 * it was rejected without one (a defect: every failure must say why). */
#ifndef BENCH_FUZZ_TARGETS_H
#define BENCH_FUZZ_TARGETS_H

#include <math.h>

#include "fuzz/fz.h"
#include "engines/core/model/gguf_read.h"
#include "engines/core/model/model.h"
#include "engines/core/tokenizer/pretok.h"
#include "engines/core/tokenizer/tokenizer.h"
#include "engines/core/tokenizer/unicode.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/compute/quant.h"
#include "engines/core/compute/threadpool.h"
#include "harness/net/httpc.h"
#include "harness/net/prom.h"
#include "harness/net/sse.h"
#include "harness/report/compare.h"
#include "harness/scenario/scenario.h"
#include "harness/scenario/trace.h"

/* A vocabulary as the engine uses it: the tokenizer its model names (SentencePiece or
 * byte-level BPE with its pre-tokenizer), one text encoded and decoded back. */
static inline int fzt_tokenize(const model_vocab *v, char *e, size_t elen) {
    tokenizer *tk = NULL;
    e[0] = 0;
    if (tokenizer_create(v, &tk, e, elen) != 0) {
        fz_say("tokenizer", e);
        return e[0] ? 0 : -1;
    }
    int ids[256], k = tokenizer_encode(tk, "Once upon a time, abc 12 th\xe2\x96\x81 <0x0A> caf\xc3\xa9 \xe4\xb8\xad\n", 1, 1, ids,
                                       256, e, elen);
    char buf[64];
    for (int i = 1; i < k; i++) (void)tokenizer_decode(tk, ids[i - 1], ids[i], buf, sizeof(buf));
    tokenizer_free(tk);
    return 0;
}

/* GGUF header, metadata and tensor infos: first the container reader alone (gguf_read.h,
 * the format with no model in it), then through model_open, as bench opens a model:
 * dispatch by magic, the llama mapping, model_validate. err gets model_open's message (may
 * be NULL). */
static inline int fzt_gguf(const uint8_t *data, size_t size, char *err, size_t errlen) {
    char path[512], e[1024] = "";
    model *m = NULL;
    fz_write("m.gguf", data, size, path, sizeof(path));
    if (gguf_scan(path, e, sizeof(e)) && !e[0]) {
        fz_say("gguf container", NULL);
        return -1;
    }
    e[0] = 0;
    int rc = model_open(path, NULL, &m, e, sizeof(e));
    fz_say("gguf", rc ? e : NULL);
    if (err) snprintf(err, errlen, "%s", e);
    if (rc == 0) {
        (void)model_weight_bytes(m);
        (void)model_param_count(m);
        int bad = m->vocab.n ? fzt_tokenize(&m->vocab, e, sizeof(e)) : 0;
        model_free(m);
        return bad;
    }
    return e[0] ? 0 : -1;
}

/* llama2.c checkpoints and tokenizer.bin. Input: CHECKPOINT "\n@@tok@@\n" TOKENIZER.
 * With a tokenizer part, model_open loads it against the checkpoint's vocab size, and
 * it is also read alone (any token count). */
static inline int fzt_llama2c(const uint8_t *data, size_t size, char *err, size_t errlen) {
    const uint8_t *part[2];
    size_t len[2];
    char mp[512], tp[512], e[1024] = "";
    int n = fz_split(data, size, "\n@@tok@@\n", part, len, 2), bad = 0;
    fz_write("m.bin", part[0], len[0], mp, sizeof(mp));
    if (n > 1) fz_write("tokenizer.bin", part[1], len[1], tp, sizeof(tp));
    model *m = NULL;
    int rc = model_open(mp, n > 1 ? tp : NULL, &m, e, sizeof(e));
    fz_say("llama2c", rc ? e : NULL);
    if (rc == 0) model_free(m);
    else bad |= !e[0];
    if (err) snprintf(err, errlen, "%s", e);
    if (n > 1) {
        model_vocab v = {0};
        e[0] = 0;
        if (model_vocab_load_llama2c(tp, 0, &v, e, sizeof(e)) != 0) bad |= !e[0];
        else bad |= fzt_tokenize(&v, e, sizeof(e)) != 0;
        model_vocab_free(&v);
    }
    return bad ? -1 : 0;
}

/* A safetensors model directory: config.json, the .safetensors JSON header,
 * model.safetensors.index.json and tokenizer.json.
 * Input: FLAGS(1 byte) DATALEN(2 bytes, LE) then parts split at "\n@@\n":
 *   CONFIG, HEADER, INDEX, TOKENIZER.
 * FLAGS bit 0: HEADER is the whole .safetensors file (length prefix included);
 *   otherwise the target writes the 8-byte length, HEADER, and DATALEN zero bytes,
 *   so the fuzzer works on the JSON rather than on matching lengths.
 * FLAGS bit 1: INDEX is written as model.safetensors.index.json, the shard being both
 *   model-00001-of-00001.safetensors and model.safetensors.
 * FLAGS bit 2: no tokenizer.json; bit 3: no config.json. */
static inline int fzt_safetensors(const uint8_t *data, size_t size, char *err, size_t errlen) {
    if (size < 3) return 0;
    unsigned flags = data[0];
    size_t datalen = (size_t)data[1] | (size_t)data[2] << 8;
    const uint8_t *part[4];
    size_t len[4];
    char p[512], e[1024] = "";
    fz_split(data + 3, size - 3, "\n@@\n", part, len, 4);

    if (flags & 8) fz_unlink("config.json");
    else fz_write("config.json", part[0], len[0], p, sizeof(p));
    if (flags & 4) fz_unlink("tokenizer.json");
    else fz_write("tokenizer.json", part[3], len[3], p, sizeof(p));

    uint8_t *st;
    size_t stn;
    if (flags & 1) {
        st = malloc(len[1] ? len[1] : 1);
        if (!st) abort();
        memcpy(st, part[1], len[1]);
        stn = len[1];
    } else {
        stn = 8 + len[1] + datalen;
        st = calloc(1, stn);
        if (!st) abort();
        for (int i = 0; i < 8; i++) st[i] = (uint8_t)((uint64_t)len[1] >> (8 * i));
        memcpy(st + 8, part[1], len[1]);
    }
    fz_write("model.safetensors", st, stn, p, sizeof(p));
    if (flags & 2) {
        fz_write("model-00001-of-00001.safetensors", st, stn, p, sizeof(p));
        fz_write("model.safetensors.index.json", part[2], len[2], p, sizeof(p));
    } else {
        fz_unlink("model-00001-of-00001.safetensors");
        fz_unlink("model.safetensors.index.json");
    }
    free(st);

    model *m = NULL;
    int rc = model_open(fz_dir(), NULL, &m, e, sizeof(e));
    fz_say("safetensors", rc ? e : NULL);
    if (err) snprintf(err, errlen, "%s", e);
    if (rc != 0) return e[0] ? 0 : -1;
    int bad = m->vocab.n ? fzt_tokenize(&m->vocab, e, sizeof(e)) : 0;
    model_free(m);
    return bad;
}

/* Scenario files: parse and validate, as bench run does before anything runs.
 * Modules are looked up in module_dir. */
static inline int fzt_scenario(const uint8_t *data, size_t size, const char *module_dir, char *err, size_t errlen) {
    char *text = fz_strndup(data, size);
    scenario *s = NULL;
    sc_errors errs = {0};
    int rc = sc_parse("fuzz.json", text, module_dir, &s, &errs), bad = 0;
    fz_say("scenario", rc ? (errs.n ? errs.v[0] : "") : NULL);
    if (err) {   /* every error, one a line */
        size_t used = 0;
        err[0] = 0;
        for (int i = 0; rc && i < errs.n && used + 1 < errlen; i++) {
            int k = snprintf(err + used, errlen - used, "%s%s", i ? "\n" : "", errs.v[i]);
            if (k < 0) break;
            used += (size_t)k < errlen - used ? (size_t)k : errlen - used - 1;
        }
    }
    if (rc == 0) sc_free(s);
    else bad = errs.n == 0;
    sc_errors_free(&errs);
    free(text);
    return bad ? -1 : 0;
}

/* The results reader behind bench compare and bench history, and the comparison of
 * the document with itself: every series and summary read goes through it. */
static inline int fzt_results(const uint8_t *data, size_t size, char *err, size_t errlen) {
    char path[512], e[1024] = "";
    fz_write("results.json", data, size, path, sizeof(path));
    rr_doc d = {0};
    int rc = rr_load(path, &d, e, sizeof(e));
    fz_say("results", rc ? e : NULL);
    if (err) snprintf(err, errlen, "%s", e);
    if (rc != 0) return e[0] ? 0 : -1;
    cmp_opts o = {.threshold = 0.05};
    cmp_report rep = {0};
    if (cmp_docs(&d, &d, &o, &rep, e, sizeof(e)) == 0) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            cmp_print(null, &rep, CMP_FMT_JSON, 0, &o);
            cmp_print(null, &rep, CMP_FMT_TABLE, 0, &o);
            fclose(null);
        }
    }
    cmp_report_free(&rep);
    rr_free(&d);
    return 0;
}

/* Pre-tokenizer patterns (a tokenizer.json's Split regexes) and text. Input: up to 4
 * patterns then the text, parts split at "\n@@\n" (one part: a pattern, split over a
 * fixed text). Every pattern list must compile or be refused with a message; a split
 * must succeed with pieces that are non-empty and cover the text, or fail with a
 * message (the step budget); then the text also goes through two families' rules
 * (gpt-2, llama3), which must always split it. Aborts on a broken invariant. */
static inline int fzt_pretok(const uint8_t *data, size_t size, char *err, size_t errlen) {
    const uint8_t *part[5];
    size_t len[5];
    char e[1024] = "";
    int n = fz_split(data, size, "\n@@\n", part, len, 5), np = n > 1 ? n - 1 : 1, bad = 0;
    char *pats[4];
    for (int i = 0; i < np; i++) pats[i] = fz_strndup(part[i], len[i]);
    static const char sample[] = "Once upon a time, abc 12 th  \n\n caf\xc3\xa9 \xe4\xb8\xad   x's 1234567!!";
    const uint8_t *text = n > 1 ? part[n - 1] : (const uint8_t *)sample;
    size_t tlen = n > 1 ? len[n - 1] : sizeof(sample) - 1, ncp = 0;
    uint32_t *cps = malloc((tlen + 1) * sizeof(*cps));
    if (!cps) abort();
    for (size_t i = 0, cl; i < tlen; i += cl) cps[ncp++] = unicode_decode((const char *)text + i, tlen - i, &cl);
    pretok *p = NULL;
    for (int f = -1; f < 2; f++) {
        e[0] = 0;
        int rc = f < 0 ? pretok_create((const char *const *)pats, np, &p, e, sizeof(e))
                       : pretok_create_named(f ? "llama3" : "gpt-2", &p, e, sizeof(e));
        if (rc) {
            if (f >= 0) abort(); /* a family's rules always compile */
            fz_say("pretok", e);
            bad |= !e[0];
            if (err) snprintf(err, errlen, "%s", e);
            continue;
        }
        size_t *lens = NULL, pieces = 0, sum = 0;
        e[0] = 0;
        if (pretok_split(p, cps, ncp, &lens, &pieces, e, sizeof(e))) {
            if (f >= 0) abort(); /* the families' rules stay inside the budget on any text */
            fz_say("pretok split", e);
            bad |= !e[0];
            if (err) snprintf(err, errlen, "%s", e);
        } else {
            for (size_t k = 0; k < pieces; k++) {
                if (lens[k] == 0) abort();
                sum += lens[k];
            }
            if (sum != ncp) abort();
        }
        free(lens);
        pretok_free(p);
        p = NULL;
    }
    free(cps);
    for (int i = 0; i < np; i++) free(pats[i]);
    return bad ? -1 : 0;
}

/* The kernel families against the exact reference, on weights the input makes: every dtype
 * through every family this CPU runs, decode (1 token) and prefill (2..5 tokens). Layout:
 *   byte 0  dtype (mod the number of dtypes)    byte 1  tokens - 1 (mod 5)
 *   byte 2  rows - 1 (mod 8)                     byte 3  blocks per row - 1 (mod 4)
 *   byte 4  seed of x (uniform in [-1, 1], every 7th element 0)
 *   the rest: the weight rows' bytes, repeated to fill them (f16 scales may be inf or NaN:
 *   those outputs are not compared).
 * Each output must lie within its family's bound of the float64 dot over the dequantised
 * weights (kernels_int8.inc, kernels_bf16.inc): f32 summation, (cols + 8) 2^-23 sum|w x|, plus
 * for x rounded to int8 sum over blocks (max|x_block| / 254) sum|w_block|, for x rounded to
 * bf16 2^-8 sum|w x|. A violation is a defect: -1, named in err. */
static long fzt_kernels_compared;   /* outputs held to their bound, for the tests to see coverage */
static inline int fzt_kernels(const uint8_t *data, size_t size, char *err, size_t errlen) {
    if (size < 6) return 0;
    static tp_pool *pool;
    if (!pool) pool = tp_create(2);
    kn_init();
    bench_dtype dt = (bench_dtype)(data[0] % BENCH_DTYPE_COUNT);
    int n = 1 + data[1] % 5, rows = 1 + data[2] % 8, be = (int)bench_dtype_block_elems(dt);
    int cols = be * (1 + data[3] % 4) * (be == 1 ? 32 : 1);
    size_t rb = bench_dtype_row_bytes(dt, cols);
    uint8_t *w = malloc((size_t)rows * rb);
    float *x = malloc((size_t)n * cols * sizeof(float)), *y = malloc((size_t)n * rows * sizeof(float));
    float *wf = malloc((size_t)rows * cols * sizeof(float));
    if (!w || !x || !y || !wf) abort();
    const uint8_t *src = data + 5;
    size_t ns = size - 5;
    for (size_t i = 0; i < (size_t)rows * rb; i++) w[i] = src[i % ns];
    uint64_t st = 0x9e3779b97f4a7c15ull * (data[4] + 1);
    for (int i = 0; i < n * cols; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        x[i] = i % 7 == 6 ? 0.0f : (float)((double)(st >> 11) / (double)(1ull << 53) * 2 - 1);
    }
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        float *o = wf + (size_t)r * cols;
        if (dt == BENCH_F32) memcpy(o, row, (size_t)cols * sizeof(float));
        else if (dt == BENCH_F16) for (int k = 0; k < cols; k++) o[k] = bench_f16_to_f32(((const uint16_t *)(const void *)row)[k]);
        else if (dt == BENCH_BF16) for (int k = 0; k < cols; k++) o[k] = bench_bf16_to_f32(((const uint16_t *)(const void *)row)[k]);
        else qn_dequant_row(dt, row, o, cols);
    }
    int bad = 0;
    for (int f = 0; f < kn_isa_count() && !bad; f++) {
        int here = 0;
        const char *name = kn_isa_name(f, &here);
        if (!here || kn_set_isa(name)) continue;
        kn_matmul(pool, y, x, n, w, dt, rows, cols);
        int x8 = kn_x_int8(dt), xbf = kn_bf16_dot() && dt == BENCH_BF16 && n > 1;
        for (int t = 0; t < n && !bad; t++)
            for (int r = 0; r < rows && !bad; r++) {
                const float *wr = wf + (size_t)r * cols, *xt = x + (size_t)t * cols;
                double ref = 0, mag = 0, q8 = 0;
                int finite = 1;
                for (int k = 0; k < cols; k++) {
                    finite &= isfinite(wr[k]);
                    ref += (double)wr[k] * xt[k];
                    mag += fabs((double)wr[k] * xt[k]);
                }
                if (!finite || !isfinite(ref) || mag > 1e30) continue;
                if (x8)
                    for (int b = 0; b < cols; b += 32) {
                        double ax = 0, aw = 0;
                        for (int k = b; k < b + 32 && k < cols; k++) ax = fmax(ax, fabs(xt[k])), aw += fabs(wr[k]);
                        q8 += ax / 254 * aw;
                    }
                double tol = (cols + 8) * ldexp(mag, -23) + q8 + (xbf ? ldexp(mag, -8) : 0) + 1e-30;
                double got = y[(size_t)t * rows + r];
                fzt_kernels_compared++;
                if (!(fabs(got - ref) <= tol)) {
                    snprintf(err, errlen, "kernels %s, %s, %d x %d, token %d of %d, row %d: %.9g, the exact dot %.9g (bound %.3g)",
                             name, bench_dtype_name(dt), rows, cols, t, n, r, got, ref, tol);
                    fz_say("kernels", err);
                    bad = 1;
                }
            }
    }
    kn_set_isa("auto");
    free(w);
    free(x);
    free(y);
    free(wf);
    return bad ? -1 : 0;
}

/* Recorded request traces (harness/scenario/trace.h). Input: the first byte picks the
 * format (its value mod the number of formats: a row of trace.c's table), the rest is the file. A
 * trace must be read, or refused with a message naming the line; what is read must
 * hold together (lengths >= 1, hash ids within the table, times in order). */
static inline int fzt_trace(const uint8_t *data, size_t size, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (size < 1) return 0;
    char e[1024] = "";
    tr_trace *t = NULL;
    tr_window w = {.max_requests = 1000};
    int rc = tr_parse("trace", (const char *)data + 1, size - 1, (tr_format)(data[0] % tr_format_count()), &w, &t, e, sizeof(e));
    fz_say("trace", rc ? e : NULL);
    if (err) snprintf(err, errlen, "%s", e);
    if (rc) return e[0] ? 0 : -1;
    size_t ids = 0;
    for (int i = 0; i < t->n; i++) {
        const tr_req *q = &t->r[i];
        if (q->input < 1 || q->output < 1 || q->hash_at != ids || (i && q->t_s < t->r[i - 1].t_s) || q->t_s < 0) abort();
        ids += (size_t)q->n_hash;
    }
    if (ids != t->n_hash) abort();
    tr_free(t);
    return 0;
}

/* The http client's event path (harness/net/sse.h, httpc.h): a streamed /v1/completions
 * answer's body through the SSE parser into hc_chunk, then hc_verify at [DONE], as the client
 * reads it. Input: byte 0 max_tokens - 1 (mod 64), byte 1 the size of the pieces the body is
 * fed in (0: whole), the rest the body. The same body fed whole and in pieces must read the
 * same; whatever is read must hold together: never more tokens than max_tokens, ids only
 * with tokens, a success has a token and usage within [tokens, max_tokens] (exactly the
 * tokens when every event carried ids), a failure has a message with no control byte in it
 * (a server's text is escaped). A violation aborts. err: the failure's message ("" when the
 * body was accepted). */
typedef struct fzt_sse_ctx {
    hc_result r;
    int max_tokens, done, events;
} fzt_sse_ctx;

static inline int fzt_sse_event(void *user, const char *data, size_t len) {
    fzt_sse_ctx *c = user;
    int rc = hc_chunk(&c->r, data, len, ++c->events, c->max_tokens);
    if (rc == 1) c->done = 1;
    return rc;
}

/* The body fed in pieces of step bytes (0: whole), read to [DONE] or the first failure. */
static inline void fzt_sse_read(const uint8_t *body, size_t n, size_t step, int max_tokens, fzt_sse_ctx *c) {
    memset(c, 0, sizeof(*c));
    c->r.usage_prompt = c->r.usage_completion = -1;
    c->max_tokens = max_tokens;
    sse_parser p;
    sse_init(&p);
    int rc = 0;
    for (size_t at = 0; at < n && !rc; at += step ? step : n)
        rc = sse_feed(&p, (const char *)body + at, step && n - at > step ? step : n - at, fzt_sse_event, c);
    if (rc < 0 && !c->r.err) c->r.err = HC_ERR_MALFORMED, snprintf(c->r.msg, sizeof(c->r.msg), "a line or event too long");
    if (c->done) hc_verify(&c->r);
    else if (!c->r.err) c->r.err = HC_ERR_CLOSED, snprintf(c->r.msg, sizeof(c->r.msg), "the stream ended before [DONE]");
    sse_free(&p);
}

static inline int fzt_sse(const uint8_t *data, size_t size, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (size < 2) return 0;
    int max_tokens = 1 + data[0] % 64;
    fzt_sse_ctx whole, cut;
    fzt_sse_read(data + 2, size - 2, 0, max_tokens, &whole);
    fzt_sse_read(data + 2, size - 2, data[1], max_tokens, &cut);
    const hc_result *r = &whole.r;
    if (r->err != cut.r.err || r->n_tokens != cut.r.n_tokens || r->n_ids != cut.r.n_ids || r->usage_completion != cut.r.usage_completion)
        abort();    /* the events depend on the bytes, not on how they were cut */
    if (r->n_tokens > max_tokens || r->n_ids > r->n_tokens || r->n_arrivals > r->n_tokens || (r->n_tokens && !r->n_arrivals)) abort();
    if (!r->err) {
        int u = r->usage_completion;
        if (!r->n_tokens || u > max_tokens || (u >= 0 && (u < r->n_tokens || (r->n_ids == r->n_tokens && u != r->n_tokens)))) abort();
    } else {
        for (const unsigned char *m = (const unsigned char *)r->msg; *m; m++)
            if (*m < 0x20 || *m == 0x7f) abort();
    }
    fz_say("sse", r->err ? r->msg : NULL);
    if (err && r->err) snprintf(err, errlen, "%s", r->msg);
    int bad = r->err && !r->msg[0];
    hc_results_free(&whole.r, 1);
    hc_results_free(&cut.r, 1);
    return bad ? -1 : 0;
}

/* A /metrics body in Prometheus' text format (harness/net/prom.h), the whole input. An
 * accepted body must hold together (names and lines as the format says, a family only for a
 * histogram's or summary's series) and come back the same when its samples are written out
 * again (names, labels escaped, values, timestamps) and read again; a refused one must say
 * which line, in printable text. Aborts on a broken invariant. */
static inline void fzt_prom_write(FILE *f, const prom_sample *s) {
    fputs(s->name, f);
    fputc('{', f);
    for (int k = 0; k < s->n_labels; k++) {
        fprintf(f, "%s%s=\"", k ? "," : "", s->labels[k].name);
        for (const char *c = s->labels[k].value; *c; c++) {
            if (*c == '\\' || *c == '"') fputc('\\', f);
            if (*c == '\n') fputs("\\n", f);
            else fputc(*c, f);
        }
        fputc('"', f);
    }
    fprintf(f, "} %.17g", s->value);
    if (s->has_ts) fprintf(f, " %lld", (long long)s->ts_ms);
    fputc('\n', f);
}

static inline int fzt_prom(const uint8_t *data, size_t size, char *err, size_t errlen) {
    char e[512] = "";
    prom_doc d;
    int rc = prom_parse((const char *)data, size, &d, e, sizeof(e));
    fz_say("prom", rc ? e : NULL);
    if (err) snprintf(err, errlen, "%s", e);
    if (rc) {
        if (strncmp(e, "line ", 5) && strncmp(e, "the body", 8)) abort();    /* every refusal names its line */
        for (const unsigned char *m = (const unsigned char *)e; *m; m++)
            if (*m < 0x20 || *m == 0x7f) abort();
        return e[0] ? 0 : -1;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    for (int i = 0; i < d.n; i++) {
        const prom_sample *s = &d.s[i];
        if (!s->name[0] || s->line < 1 || (i && s->line <= d.s[i - 1].line) || s->n_labels > PROM_MAX_LABELS) abort();
        if (strcmp(s->family, s->name) && s->type != PROM_HISTOGRAM && s->type != PROM_SUMMARY) abort();
        if (strncmp(s->name, s->family, strlen(s->family))) abort();
        fzt_prom_write(f, s);
    }
    if (fclose(f)) abort();
    prom_doc b;
    if (prom_parse(text, len, &b, e, sizeof(e)) || b.n != d.n) abort();
    for (int i = 0; i < d.n; i++) {
        const prom_sample *x = &d.s[i], *y = &b.s[i];
        if (strcmp(x->name, y->name) || x->n_labels != y->n_labels || x->has_ts != y->has_ts || (x->has_ts && x->ts_ms != y->ts_ms))
            abort();
        if (!(x->value == y->value || (isnan(x->value) && isnan(y->value)))) abort();
        for (int k = 0; k < x->n_labels; k++)
            if (strcmp(x->labels[k].name, y->labels[k].name) || strcmp(x->labels[k].value, y->labels[k].value)) abort();
        /* each sample is found by its name and its own labels */
        int at = prom_find(&b, y->name, y->labels, y->n_labels, 0);
        if (at < 0 || at > i) abort();
    }
    /* the first sample's name read as a selector */
    if (d.n) {
        prom_doc sel;
        if (prom_selector(d.s[0].name, &sel, e, sizeof(e)) || strcmp(sel.s[0].name, d.s[0].name)) abort();
        prom_free(&sel);
    }
    prom_free(&b);
    prom_free(&d);
    free(text);
    return 0;
}

#endif

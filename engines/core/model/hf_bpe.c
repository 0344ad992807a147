/* tokenizer.json, byte-level BPE (see hf_bpe.h). The fields read:
 *   model: {type "BPE", merges: ["a b", ...] or [["a", "b"], ...], ignore_merges,
 *           dropout, continuing_subword_prefix, end_of_word_suffix}
 *   pre_tokenizer: ByteLevel {use_regex, add_prefix_space}, Split {pattern {Regex|String},
 *           behavior "Isolated", invert false}, Digits {individual_digits}, Sequence of these
 *   normalizer: null, NFC, NFD, NFKC, NFKD, or a Sequence of those four (v->normalize)
 * What the file asks for that bench's tokenizer does not do (another normalizer, another
 * Split behavior, a prefix space) goes to v->unsupported: tokenizing then fails naming
 * it, or warns under --tokenizer-fallback. */
#include "hf_bpe.h"
#include "engines/abi/module.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HF's ByteLevel pre-tokenizer regex (GPT-2's, with the trailing \s+ alternative) */
#define HF_BYTELEVEL_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define HF_MAX_PATTERNS 16

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static int is_type(const cJSON *j, const char *type) {
    const cJSON *t = get(j, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

static int has_bytelevel(const cJSON *j) {
    if (is_type(j, "ByteLevel")) return 1;
    const cJSON *seq = get(j, "pretokenizers");
    if (is_type(j, "Sequence") && cJSON_IsArray(seq))
        for (const cJSON *p = seq->child; p; p = p->next)
            if (has_bytelevel(p)) return 1;
    return 0;
}

/* A normalizer that is one of Unicode's forms, or a Sequence of them, into *out; a Sequence
 * composes as its last member does, and decomposes by compatibility if any member does
 * (NFC after NFKD is NFKC). Returns NULL, or the type of a member that is not one of them. */
static const char *unicode_norm(const cJSON *n, model_norm *out) {
    static const struct { const char *type; model_norm norm; } forms[] = {
        {"NFC", MODEL_NORM_NFC}, {"NFD", MODEL_NORM_NFD}, {"NFKC", MODEL_NORM_NFKC}, {"NFKD", MODEL_NORM_NFKD}};
    const cJSON *t = get(n, "type"), *seq = get(n, "normalizers");
    if (!cJSON_IsString(t)) return "?";
    if (!strcmp(t->valuestring, "Sequence") && cJSON_IsArray(seq)) {
        int compat = 0, compose = -1;
        for (const cJSON *m = seq->child; m; m = m->next) {
            model_norm one = MODEL_NORM_NONE;
            const char *other = unicode_norm(m, &one);
            if (other) return other;
            if (one == MODEL_NORM_NONE) continue;
            compat |= one == MODEL_NORM_NFKC || one == MODEL_NORM_NFKD;
            compose = one == MODEL_NORM_NFC || one == MODEL_NORM_NFKC;
        }
        *out = compose < 0 ? MODEL_NORM_NONE : compose ? (compat ? MODEL_NORM_NFKC : MODEL_NORM_NFC)
                                                       : (compat ? MODEL_NORM_NFKD : MODEL_NORM_NFD);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++)
        if (!strcmp(t->valuestring, forms[i].type)) {
            *out = forms[i].norm;
            return NULL;
        }
    return t->valuestring;
}

typedef struct {
    char *pat[HF_MAX_PATTERNS];
    int n;
    char note[512];         /* what is not honoured */
    const char *path;
    char *err;
    size_t errlen;
} pre_acc;

static void note(pre_acc *a, const char *what) {
    size_t l = strlen(a->note);
    if (l < sizeof(a->note) - 1) snprintf(a->note + l, sizeof(a->note) - l, "%s%s", l ? "; " : "", what);
}

static int add_pat(pre_acc *a, const char *pat) {
    if (a->n >= HF_MAX_PATTERNS)
        return bench_errf(a->err, a->errlen, "%s: pre_tokenizer: more than %d split patterns", a->path, HF_MAX_PATTERNS);
    if (!(a->pat[a->n] = strdup(pat))) return bench_errf(a->err, a->errlen, "%s: out of memory", a->path);
    a->n++;
    return 0;
}

/* A literal string as a pattern: every non-alphanumeric ASCII character escaped. */
static int add_literal(pre_acc *a, const char *s) {
    size_t l = strlen(s);
    char *p = malloc(2 * l + 1), *w = p;
    if (!p) return bench_errf(a->err, a->errlen, "%s: out of memory", a->path);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 128 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == ' ')) *w++ = '\\';
        *w++ = (char)c;
    }
    *w = '\0';
    int rc = add_pat(a, p);
    free(p);
    return rc;
}

static int read_pre(pre_acc *a, const cJSON *j, int depth) {
    char what[160];
    if (!j || cJSON_IsNull(j)) return 0;
    const cJSON *type = get(j, "type");
    if (!cJSON_IsString(type)) return bench_errf(a->err, a->errlen, "%s: pre_tokenizer: an entry has no type string", a->path);
    const char *t = type->valuestring;
    if (!strcmp(t, "Sequence")) {
        const cJSON *seq = get(j, "pretokenizers");
        if (!cJSON_IsArray(seq) || depth > 4)
            return bench_errf(a->err, a->errlen, "%s: pre_tokenizer Sequence: pretokenizers is not an array", a->path);
        for (const cJSON *p = seq->child; p; p = p->next)
            if (read_pre(a, p, depth + 1)) return -1;
        return 0;
    }
    if (!strcmp(t, "ByteLevel")) {
        const cJSON *ur = get(j, "use_regex"), *aps = get(j, "add_prefix_space");
        if (cJSON_IsTrue(aps)) note(a, "ByteLevel add_prefix_space (no space is prepended)");
        if (!ur || cJSON_IsTrue(ur)) return add_pat(a, HF_BYTELEVEL_RE);
        return 0;
    }
    if (!strcmp(t, "Digits")) return add_pat(a, cJSON_IsTrue(get(j, "individual_digits")) ? "\\p{N}" : "\\p{N}+");
    if (!strcmp(t, "Split")) {
        const cJSON *pat = get(j, "pattern"), *beh = get(j, "behavior"), *inv = get(j, "invert");
        const cJSON *re = get(pat, "Regex"), *str = get(pat, "String");
        if (!cJSON_IsString(re) && !cJSON_IsString(str))
            return bench_errf(a->err, a->errlen, "%s: pre_tokenizer Split: pattern is neither {\"Regex\": ...} nor {\"String\": ...}", a->path);
        if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated")) {
            snprintf(what, sizeof(what), "Split behavior \"%.40s\" (split as Isolated)", cJSON_IsString(beh) ? beh->valuestring : "?");
            note(a, what);
        }
        if (cJSON_IsTrue(inv)) note(a, "Split invert (not inverted)");
        return cJSON_IsString(re) ? add_pat(a, re->valuestring) : add_literal(a, str->valuestring);
    }
    snprintf(what, sizeof(what), "pre_tokenizer %.40s (ignored)", t);
    note(a, what);
    return 0;
}

/* model.merges[i] as "left right" */
static char *merge_string(const cJSON *e) {
    if (cJSON_IsString(e)) {
        const char *s = e->valuestring, *sp = s[0] ? strchr(s + 1, ' ') : NULL;
        return sp && sp[1] ? strdup(s) : NULL;
    }
    if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2) return NULL;
    const cJSON *l = e->child, *r = l->next;
    if (!cJSON_IsString(l) || !cJSON_IsString(r) || !*l->valuestring || !*r->valuestring ||
        strchr(l->valuestring, ' ') || strchr(r->valuestring, ' '))
        return NULL;
    size_t ll = strlen(l->valuestring), rl = strlen(r->valuestring);
    char *s = malloc(ll + rl + 2);
    if (!s) return NULL;
    memcpy(s, l->valuestring, ll);
    s[ll] = ' ';
    memcpy(s + ll + 1, r->valuestring, rl + 1);
    return s;
}

int hf_bpe_read(const cJSON *root, model_vocab *v, const char *path, char *err, size_t errlen) {
    const cJSON *mod = get(root, "model"), *pre = get(root, "pre_tokenizer"), *dec = get(root, "decoder");
    if (!has_bytelevel(pre) && !is_type(dec, "ByteLevel")) return 0;
    pre_acc a = {.path = path, .err = err, .errlen = errlen};
    int rc = -1;
    const cJSON *merges = get(mod, "merges");
    if (!cJSON_IsArray(merges)) {
        bench_errf(err, errlen, "%s: model.merges is missing or not an array (a byte-level BPE needs its merges)", path);
        goto out;
    }
    int n = cJSON_GetArraySize(merges);
    if (n <= 0) {
        bench_errf(err, errlen, "%s: model.merges is empty", path);
        goto out;
    }
    if (!(v->merges = calloc((size_t)n, sizeof(*v->merges)))) {
        bench_errf(err, errlen, "%s: out of memory for %d merges", path, n);
        goto out;
    }
    v->n_merges = n; /* model_vocab_free frees what is filled */
    int i = 0;
    for (const cJSON *e = merges->child; e; e = e->next, i++)
        if (!(v->merges[i] = merge_string(e))) {
            bench_errf(err, errlen, "%s: model.merges[%d]: expected \"left right\" or [\"left\", \"right\"] (pieces without spaces)", path, i);
            goto out;
        }

    if (read_pre(&a, pre, 0)) goto out;
    /* no split pattern: the whole text is one word */
    if (a.n == 0 && add_pat(&a, "[\\s\\S]+")) goto out;
    const cJSON *norm = get(root, "normalizer");
    if (norm && !cJSON_IsNull(norm)) {
        const char *other = unicode_norm(norm, &v->normalize);
        if (other) {
            char what[96];
            snprintf(what, sizeof(what), "normalizer %.40s (text is not normalized)", other);
            note(&a, what);
            v->normalize = MODEL_NORM_NONE;
        }
    }
    const cJSON *dr = get(mod, "dropout"), *csp = get(mod, "continuing_subword_prefix"), *ews = get(mod, "end_of_word_suffix");
    if (cJSON_IsNumber(dr) && dr->valuedouble > 0) note(&a, "model.dropout (no dropout)");
    if ((cJSON_IsString(csp) && *csp->valuestring) || (cJSON_IsString(ews) && *ews->valuestring))
        note(&a, "model.continuing_subword_prefix / end_of_word_suffix");
    v->ignore_merges = cJSON_IsTrue(get(mod, "ignore_merges"));
    if (!(v->pre_patterns = calloc((size_t)a.n, sizeof(char *)))) {
        bench_errf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    for (int k = 0; k < a.n; k++) v->pre_patterns[k] = a.pat[k], a.pat[k] = NULL;
    v->n_pre_patterns = a.n;
    free(v->pre_source);
    v->pre_source = strdup(path);
    free(v->model);
    if (!v->pre_source || !(v->model = strdup("gpt2")) || (a.note[0] && !(v->unsupported = strdup(a.note)))) {
        bench_errf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    rc = 1;
out:
    for (int k = 0; k < a.n; k++) free(a.pat[k]);
    return rc;
}

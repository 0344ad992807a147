/* OpenAI request bodies: see oai_req.h. */
#include "oai_req.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/module.h"
#include "util/ut_buf.h"

/* ======================================================================
 * The fields
 * ====================================================================== */

enum { OR_K_COMPL = 1, OR_K_CHAT = 2, OR_K_BOTH = 3 };

/* What bench serve does with a field: honours it (USED); takes any value and does nothing
 * with it (ANY: it changes no token); takes it only when it asks for nothing (NOTHING: null,
 * false, 0, "", {}, []; ONE also 1; TEXT also {"type": "text"}), since doing nothing for a
 * request that asks for something would be a silent lie. */
enum { OR_USED, OR_ANY, OR_NOTHING, OR_ONE, OR_TEXT };

static const struct or_field {
    const char *name;
    int kinds;          /* OR_K_* */
    int how;            /* OR_USED ... */
} or_table[] = {
    {"model", OR_K_BOTH, OR_USED},          /* any: the server has one model */
    {"prompt", OR_K_COMPL, OR_USED},
    {"messages", OR_K_CHAT, OR_USED},
    {"max_tokens", OR_K_BOTH, OR_USED},
    {"max_completion_tokens", OR_K_CHAT, OR_USED},
    {"temperature", OR_K_BOTH, OR_USED},
    {"top_p", OR_K_BOTH, OR_USED},
    {"seed", OR_K_BOTH, OR_USED},
    {"n", OR_K_BOTH, OR_USED},
    {"stop", OR_K_BOTH, OR_USED},
    {"stop_token_ids", OR_K_BOTH, OR_USED},
    {"stream", OR_K_BOTH, OR_USED},
    {"stream_options", OR_K_BOTH, OR_USED},
    {"ignore_eos", OR_K_BOTH, OR_USED},
    {"user", OR_K_BOTH, OR_ANY},
    {"metadata", OR_K_CHAT, OR_ANY},
    {"store", OR_K_CHAT, OR_NOTHING},
    {"logprobs", OR_K_BOTH, OR_NOTHING},
    {"top_logprobs", OR_K_CHAT, OR_NOTHING},
    {"echo", OR_K_COMPL, OR_NOTHING},
    {"suffix", OR_K_COMPL, OR_NOTHING},
    {"best_of", OR_K_COMPL, OR_ONE},
    {"presence_penalty", OR_K_BOTH, OR_NOTHING},
    {"frequency_penalty", OR_K_BOTH, OR_NOTHING},
    {"logit_bias", OR_K_BOTH, OR_NOTHING},
    {"response_format", OR_K_CHAT, OR_TEXT},
};
#define OR_N_FIELDS (sizeof(or_table) / sizeof(or_table[0]))

static int or_kind_bit(or_kind k) { return k == OR_CHAT ? OR_K_CHAT : OR_K_COMPL; }

static const char *or_path(or_kind k) { return k == OR_CHAT ? "/v1/chat/completions" : "/v1/completions"; }

const char *or_fields(or_kind kind, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < OR_N_FIELDS && at < len; i++) {
        if (!(or_table[i].kinds & or_kind_bit(kind))) continue;
        int w = snprintf(buf + at, len - at, "%s%s", at ? ", " : "", or_table[i].name);
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

/* 1 when v asks for nothing under how (see the enum). */
static int or_asks_nothing(const cJSON *v, int how) {
    if (cJSON_IsNull(v) || cJSON_IsFalse(v)) return 1;
    if (cJSON_IsNumber(v)) return v->valuedouble == 0 || (how == OR_ONE && v->valuedouble == 1);
    if (cJSON_IsString(v)) return !v->valuestring[0];
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        if (!v->child) return 1;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "type");
        return how == OR_TEXT && cJSON_IsObject(v) && !v->child->next && cJSON_IsString(t) && !strcmp(t->valuestring, "text");
    }
    return 0;
}

static void or_note_ignored(or_req *r, const char *name) {
    size_t at = strlen(r->ignored);
    snprintf(r->ignored + at, sizeof(r->ignored) - at, "%s%s", at ? ", " : "", name);
}

/* Every top-level field known for this kind, or refused naming it (lenient: noted). */
static int or_check_fields(const or_ctx *c, const cJSON *root, or_req *r, char *err, size_t errlen) {
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        const struct or_field *f = NULL;
        for (size_t i = 0; i < OR_N_FIELDS && !f; i++)
            if (!strcmp(or_table[i].name, it->string) && (or_table[i].kinds & or_kind_bit(r->kind))) f = &or_table[i];
        if (!f) {
            if (c->lenient) {
                or_note_ignored(r, it->string);
                continue;
            }
            char names[1024];
            return bench_errf(err, errlen, "%.100s: unknown field for POST %s (bench serve refuses what it would not do; it takes "
                              "%s; start it with --lenient to ignore unknown fields)", it->string, or_path(r->kind),
                              or_fields(r->kind, names, sizeof(names)));
        }
        if (f->how == OR_USED) continue;
        if (f->how != OR_ANY && !or_asks_nothing(it, f->how))
            return bench_errf(err, errlen, "%s: not supported by bench serve: accepted only when it asks for nothing (null, false, 0%s, "
                              "empty%s)", f->name, f->how == OR_ONE ? ", 1" : "", f->how == OR_TEXT ? ", {\"type\": \"text\"}" : "");
        or_note_ignored(r, f->name);
    }
    return 0;
}

/* ======================================================================
 * Values
 * ====================================================================== */

/* A JSON number that is a whole number in [lo, hi]. */
static int or_whole(const cJSON *v, double lo, double hi, long long *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double x = v->valuedouble;
    if (x != (double)(long long)x || x < lo || x > hi) return -1;
    *out = (long long)x;
    return 0;
}

static int or_bool(const cJSON *root, const char *key, int *out, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return bench_errf(err, errlen, "%s: expected true or false", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* max_tokens (or, for chat, max_completion_tokens, which OpenAI now prefers); *given 0 when absent. */
static int or_max_tokens(const or_ctx *c, const cJSON *root, or_req *r, int *given, char *err, size_t errlen) {
    const char *keys[2] = {"max_completion_tokens", "max_tokens"};
    *given = 0;
    for (int i = r->kind == OR_CHAT ? 0 : 1; i < 2 && !*given; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
        long long x;
        if (!v || cJSON_IsNull(v)) continue;
        if (or_whole(v, 1, c->max_pos, &x))
            return bench_errf(err, errlen, "%s: expected a whole number from 1 to %d (the context)", keys[i], c->max_pos);
        r->max_new = (int)x;
        *given = 1;
    }
    return 0;
}

/* temperature, top_p, seed, n, stream, ignore_eos, stream_options */
static int or_sampling(const cJSON *root, or_req *r, char *err, size_t errlen) {
    long long x;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "temperature");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 100))
            return bench_errf(err, errlen, "temperature: expected a number from 0 (greedy) to 100");
        r->temperature = (float)v->valuedouble;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "top_p");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble <= 1)) return bench_errf(err, errlen, "top_p: expected a number in (0, 1]");
        r->topp = (float)v->valuedouble;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "seed");
    if (v && !cJSON_IsNull(v)) {
        if (or_whole(v, 0, 9007199254740992.0, &x)) return bench_errf(err, errlen, "seed: expected a whole number >= 0");
        r->seed = (uint64_t)x;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "n");
    if (v && !cJSON_IsNull(v)) {
        if (or_whole(v, 1, OR_MAX_N, &x))
            return bench_errf(err, errlen, "n: expected a whole number from 1 to %d (choices, each its own sequence)", OR_MAX_N);
        r->n = (int)x;
    }
    if (or_bool(root, "stream", &r->stream, err, errlen) || or_bool(root, "ignore_eos", &r->ignore_eos, err, errlen)) return -1;
    v = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (v && !cJSON_IsObject(v) && !cJSON_IsNull(v)) return bench_errf(err, errlen, "stream_options: expected an object");
    if (cJSON_IsObject(v) && or_bool(v, "include_usage", &r->usage, err, errlen)) return -1;
    return 0;
}

static int or_add_stop(or_req *r, const char *s, char *err, size_t errlen) {
    if (!(r->stop[r->n_stop] = strdup(s))) return bench_errf(err, errlen, "out of memory");
    r->n_stop++;
    return 0;
}

/* stop: a string or 1..4 strings, each 1..256 bytes; stop_token_ids: up to 16 ids. */
static int or_stops(const or_ctx *c, const cJSON *root, or_req *r, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "stop"), *it;
    const char *what = "stop: expected a string or a list of 1 to 4 strings, each of 1 to 256 bytes";
    if (cJSON_IsString(v)) {
        size_t l = strlen(v->valuestring);
        if (!l || l > OR_MAX_STOP_BYTES) return bench_errf(err, errlen, "%s", what);
        if (or_add_stop(r, v->valuestring, err, errlen)) return -1;
    } else if (cJSON_IsArray(v)) {
        int k = cJSON_GetArraySize(v), i = 0;
        if (k < 1 || k > OR_MAX_STOP) return bench_errf(err, errlen, "%s (got %d)", what, k);
        cJSON_ArrayForEach(it, v) {
            size_t l = cJSON_IsString(it) ? strlen(it->valuestring) : 0;
            if (!l || l > OR_MAX_STOP_BYTES) return bench_errf(err, errlen, "stop[%d]: expected a string of 1 to 256 bytes", i);
            if (or_add_stop(r, it->valuestring, err, errlen)) return -1;
            i++;
        }
    } else if (v && !cJSON_IsNull(v)) {
        return bench_errf(err, errlen, "%s", what);
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "stop_token_ids");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > OR_MAX_STOP_IDS)
            return bench_errf(err, errlen, "stop_token_ids: expected a list of at most %d token ids", OR_MAX_STOP_IDS);
        cJSON_ArrayForEach(it, v) {
            long long x;
            if (or_whole(it, 0, c->vocab - 1, &x))
                return bench_errf(err, errlen, "stop_token_ids[%d]: expected a token id from 0 to %d", r->n_stop_ids, c->vocab - 1);
            r->stop_ids[r->n_stop_ids++] = (int)x;
        }
    }
    return 0;
}

/* ======================================================================
 * The prompt
 * ====================================================================== */

/* text (a completion's prompt or a chat's rendering) into r->ids. With max_tokens given the
 * prompt may take max_pos - max_new + 1 ids (BOS included), else max_pos; a text too long for
 * that is refused before it is encoded (tokenizer_max_text_bytes), and the encoding stops
 * there, so a megabytes-long prompt costs its bytes, not the merges' memory and seconds. */
static int or_encode(const or_ctx *c, const char *field, const char *text, int given, or_req *r, char *err, size_t errlen) {
    int max_ids = given ? c->max_pos - r->max_new + 1 : c->max_pos;
    size_t len = strlen(text), max_len = tokenizer_max_text_bytes(c->tok, max_ids - 1);
    if (len > max_len)
        return bench_errf(err, errlen, "%s: %zu bytes of text%s exceed the context (%d positions): more than %zu bytes cannot encode "
                          "to the %d tokens left after BOS", field, len, given ? " + max_tokens - 1" : "", c->max_pos, max_len, max_ids - 1);
    if (!(r->ids = malloc((size_t)max_ids * sizeof(int)))) return bench_errf(err, errlen, "out of memory");
    char e2[256];
    int n = r->kind == OR_CHAT ? ct_encode(c->chat, c->tok, text, r->ids, max_ids, e2, sizeof(e2))
                               : tokenizer_encode(c->tok, text, 1, 0, r->ids, max_ids, e2, sizeof(e2));
    /* the tokenizer's words for "more than max_ids" (tokenizer.c, bpe.c); any other failure is the text's own */
    if (n == -TOK_ERR_TOO_MANY)
        return bench_errf(err, errlen, "%s: the text needs more than %d tokens (BOS included): %s exceed the context (%d positions)", field,
                          max_ids, given ? "prompt + max_tokens - 1" : "the prompt and one token", c->max_pos);
    if (n < 0) return bench_errf(err, errlen, "%s: %s", field, e2);
    return n;
}

/* A completion's prompt: text, or token ids. */
static int or_prompt(const or_ctx *c, const cJSON *root, int given, or_req *r, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (cJSON_IsString(v)) {
        if (!c->tok) return bench_errf(err, errlen, "prompt: the model has no vocabulary: give the prompt as token ids");
        return or_encode(c, "prompt", v->valuestring, given, r, err, errlen);
    }
    if (!cJSON_IsArray(v)) return bench_errf(err, errlen, "prompt: expected a string or an array of token ids");
    int count = cJSON_GetArraySize(v), n = 0;
    if (count < 1 || count > c->max_pos) return bench_errf(err, errlen, "prompt: expected 1 to %d token ids, got %d", c->max_pos, count);
    if (!(r->ids = malloc((size_t)count * sizeof(int)))) return bench_errf(err, errlen, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        long long x;
        if (or_whole(it, 0, c->vocab - 1, &x))
            return bench_errf(err, errlen, "prompt[%d]: expected a token id from 0 to %d (one prompt a request)", n, c->vocab - 1);
        r->ids[n++] = (int)x;
    }
    return n;
}

/* A message's content: a string, or a list of {"type": "text", "text": ...} parts joined. */
static char *or_content(const cJSON *v, int i, char *err, size_t errlen) {
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    if (!cJSON_IsArray(v)) {
        bench_errf(err, errlen, "messages[%d].content: expected a string or a list of text parts", i);
        return NULL;
    }
    ut_buf b = {0};
    const cJSON *p;
    int k = 0;
    cJSON_ArrayForEach(p, v) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type"), *x = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text") || !cJSON_IsString(x)) {
            bench_errf(err, errlen, "messages[%d].content[%d]: expected {\"type\": \"text\", \"text\": \"...\"} (bench serve takes text only)", i, k);
            ut_buf_free(&b);
            return NULL;
        }
        if (ut_buf_append(&b, x->valuestring, strlen(x->valuestring))) {
            ut_buf_free(&b);
            bench_errf(err, errlen, "out of memory");
            return NULL;
        }
        k++;
    }
    return ut_buf_take(&b);
}

/* One message into m (its content malloc'd into *owned). */
static int or_message(const cJSON *o, int i, ct_msg *m, char **owned, char *err, size_t errlen) {
    if (!cJSON_IsObject(o)) return bench_errf(err, errlen, "messages[%d]: expected an object with role and content", i);
    const cJSON *it;
    cJSON_ArrayForEach(it, o)
        if (strcmp(it->string, "role") && strcmp(it->string, "content") && strcmp(it->string, "name"))
            return bench_errf(err, errlen, "messages[%d].%.60s: unknown field (a message takes role, content and name; bench serve has "
                              "no tools)", i, it->string);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(o, "role");
    static const char *const roles[] = {"system", "developer", "user", "assistant", NULL};
    int k = 0;
    while (cJSON_IsString(role) && roles[k] && strcmp(roles[k], role->valuestring)) k++;
    if (!cJSON_IsString(role) || !roles[k])
        return bench_errf(err, errlen, "messages[%d].role: expected \"system\", \"developer\", \"user\" or \"assistant\"", i);
    m->role = k <= 1 ? "system" : roles[k];     /* developer: OpenAI's newer name for system */
    if (!(*owned = or_content(cJSON_GetObjectItemCaseSensitive(o, "content"), i, err, errlen))) return -1;
    m->content = *owned;
    return 0;
}

/* A chat's messages rendered with the template and encoded. */
static int or_chat_prompt(const or_ctx *c, const cJSON *root, int given, or_req *r, char *err, size_t errlen) {
    if (!c->chat) return bench_errf(err, errlen, "%s", c->chat_refusal ? c->chat_refusal : "bench serve has no chat template");
    if (!c->tok) return bench_errf(err, errlen, "messages: the model has no vocabulary (start bench serve with --tokenizer FILE)");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "messages");
    int k = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (k < 1) return bench_errf(err, errlen, "messages: expected a list of at least one {\"role\", \"content\"}");
    ct_msg *msgs = calloc((size_t)k, sizeof(*msgs));
    char **owned = calloc((size_t)k, sizeof(*owned)), *text = NULL;
    int rc = -1, i = 0;
    if (!msgs || !owned) {
        bench_errf(err, errlen, "out of memory");
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (or_message(it, i, &msgs[i], &owned[i], err, errlen)) goto out;
        i++;
    }
    if (!(text = ct_render(c->chat->t, msgs, k))) {
        bench_errf(err, errlen, "out of memory");
        goto out;
    }
    rc = or_encode(c, "messages", text, given, r, err, errlen);
out:
    for (int j = 0; owned && j < k; j++) free(owned[j]);
    free(owned);
    free(msgs);
    free(text);
    return rc;
}

/* ======================================================================
 * The request
 * ====================================================================== */

/* The template's end of turn stops a chat answer, unless EOS is ignored (a benchmark's
 * fixed-length answers). */
static int or_template_stop(const or_ctx *c, or_req *r, char *err, size_t errlen) {
    if (r->kind != OR_CHAT || r->ignore_eos) return 0;
    if (c->chat->eot_id >= 0) r->stop_ids[r->n_stop_ids++] = c->chat->eot_id;
    if (c->chat->eot_text) return or_add_stop(r, c->chat->eot_text, err, errlen);
    return 0;
}

int or_parse(const or_ctx *c, or_kind kind, const char *body, size_t len, or_req *r, char *err, size_t errlen) {
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->max_new = 16;                /* OpenAI's default for completions; chat: the context left */
    r->temperature = 1.0f;
    r->topp = 1.0f;
    r->n = 1;
    cJSON *root = cJSON_ParseWithLength(body, len);
    int given = 0, n = -1;
    if (!cJSON_IsObject(root)) {
        bench_errf(err, errlen, "the body is not a JSON object");
        goto out;
    }
    if (or_check_fields(c, root, r, err, errlen) || or_max_tokens(c, root, r, &given, err, errlen) ||
        or_sampling(root, r, err, errlen) || or_stops(c, root, r, err, errlen))
        goto out;
    n = kind == OR_CHAT ? or_chat_prompt(c, root, given, r, err, errlen) : or_prompt(c, root, given, r, err, errlen);
    if (n < 0) goto out;
    if (n < 1) {
        bench_errf(err, errlen, "%s: no tokens", kind == OR_CHAT ? "messages" : "prompt");
        n = -1;
        goto out;
    }
    if (!given) r->max_new = kind == OR_CHAT ? c->max_pos - n + 1 : r->max_new;
    if (n + r->max_new - 1 > c->max_pos) {
        bench_errf(err, errlen, "prompt (%d tokens) + max_tokens (%d) - 1 exceed the context (%d positions)", n, r->max_new, c->max_pos);
        n = -1;
        goto out;
    }
    int *ids = realloc(r->ids, ((size_t)n + (size_t)r->max_new) * sizeof(int));
    if (!ids) {
        bench_errf(err, errlen, "out of memory");
        n = -1;
        goto out;
    }
    r->ids = ids;
    r->n_prompt = n;
    if (or_template_stop(c, r, err, errlen)) n = -1;
out:
    cJSON_Delete(root);
    return n < 0 ? -1 : 0;
}

void or_req_free(or_req *r) {
    if (!r) return;
    free(r->ids);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    memset(r, 0, sizeof(*r));
}

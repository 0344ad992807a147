/* Chat templates: see chat_tmpl.h. */
#include "chat_tmpl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/module.h"     /* bench_errf */
#include "util/ut_buf.h"

/* One row: how a model reads a conversation. A turn is pre[role] + content + suf[role];
 * a role the row has no prefix for (say "tool") is refused by the request parser, which
 * knows only system, user and assistant. render (optional) replaces the generic
 * rendering for templates whose turns are not independent (llama-2 folds the system
 * message into the first user turn). */
struct ct_template {
    const char *name;
    const char *signature;      /* a marker only this family's Jinja contains; NULL: never detected */
    const char *summary;
    const char *pre[3], *suf[3];    /* by role: system, user, assistant */
    const char *gen;            /* the generation prompt */
    const char *specials[CT_MAX_SPECIALS];  /* NULL-terminated */
    const char *eot;            /* the end of an assistant turn; NULL: EOS alone ends it */
    int bos;                    /* the tokenizer prepends BOS (the template starts with it) */
    int (*render)(const ct_template *t, const ct_msg *msgs, int n, ut_buf *out);    /* (optional) */
};

enum { CT_SYSTEM, CT_USER, CT_ASSISTANT };

static int ct_role(const char *role) {
    return !strcmp(role, "system") ? CT_SYSTEM : !strcmp(role, "user") ? CT_USER : CT_ASSISTANT;
}

static int ct_put(ut_buf *b, const char *s) { return ut_buf_append(b, s, strlen(s)); }

/* Meta's llama-2-chat: [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {answer} </s><s>[INST] ...
 * with BOS before the first [INST] (the tokenizer's) and after every answer. */
static int ct_render_llama2(const ct_template *t, const ct_msg *msgs, int n, ut_buf *out) {
    (void)t;
    const char *sys = NULL;
    int rc = 0, first_user = 1;
    for (int i = 0; i < n && !rc; i++) {
        int role = ct_role(msgs[i].role);
        if (role == CT_SYSTEM) {
            sys = msgs[i].content;
        } else if (role == CT_USER) {
            rc |= ct_put(out, "[INST] ");
            if (sys && first_user) rc |= ct_put(out, "<<SYS>>\n") || ct_put(out, sys) || ct_put(out, "\n<</SYS>>\n\n");
            rc |= ct_put(out, msgs[i].content) || ct_put(out, " [/INST]");
            first_user = 0;
        } else {
            rc |= ct_put(out, " ") || ct_put(out, msgs[i].content) || ct_put(out, " </s><s>");
        }
    }
    return rc;
}

static const ct_template ct_llama3 = {
    .name = "llama-3",
    .signature = "<|start_header_id|>",
    .summary = "<|start_header_id|>ROLE<|end_header_id|>\\n\\nCONTENT<|eot_id|> (Llama 3)",
    .pre = {"<|start_header_id|>system<|end_header_id|>\n\n", "<|start_header_id|>user<|end_header_id|>\n\n",
            "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    .suf = {"<|eot_id|>", "<|eot_id|>", "<|eot_id|>"},
    .gen = "<|start_header_id|>assistant<|end_header_id|>\n\n",
    .specials = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", NULL},
    .eot = "<|eot_id|>",
    .bos = 1,
};

static const ct_template ct_chatml = {
    .name = "chatml",
    .signature = "<|im_start|>",
    .summary = "<|im_start|>ROLE\\nCONTENT<|im_end|>\\n (Qwen, Hermes, ChatML)",
    .pre = {"<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n"},
    .suf = {"<|im_end|>\n", "<|im_end|>\n", "<|im_end|>\n"},
    .gen = "<|im_start|>assistant\n",
    .specials = {"<|im_start|>", "<|im_end|>", NULL},
    .eot = "<|im_end|>",
    .bos = 0,
};

static const ct_template ct_zephyr = {
    .name = "zephyr",
    .signature = "<|user|>",
    .summary = "<|ROLE|>\\nCONTENT</s>\\n (Zephyr, TinyLlama-chat)",
    .pre = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"},
    .suf = {"</s>\n", "</s>\n", "</s>\n"},
    .gen = "<|assistant|>\n",
    .specials = {"</s>", "<|system|>", "<|user|>", "<|assistant|>", NULL},
    .eot = "</s>",
    .bos = 1,
};

static const ct_template ct_llama2 = {
    .name = "llama-2",
    .signature = "[INST]",
    .summary = "[INST] <<SYS>>\\nSYSTEM\\n<</SYS>>\\n\\nUSER [/INST] ANSWER </s><s> (Llama 2 chat, Mistral)",
    .gen = "",
    .specials = {"</s>", "<s>", NULL},
    .eot = "</s>",
    .bos = 1,
    .render = ct_render_llama2,
};

/* The fallback for a model that names no template (llama2.c's .bin, synth models): a
 * transcript a base model continues sensibly; a new "user:" line ends the answer. */
static const ct_template ct_plain = {
    .name = "plain",
    .summary = "ROLE: CONTENT\\n, ending with \"assistant:\"; stops at \"\\nuser:\" (models without a template)",
    .pre = {"system: ", "user: ", "assistant: "},
    .suf = {"\n", "\n", "\n"},
    .gen = "assistant:",
    .specials = {NULL},
    .eot = "\nuser:",
    .bos = 1,
};

/* Detection order: llama-3 before the others (its templates mention no other marker, but
 * a more specific marker first costs nothing). */
const ct_template *const ct_table[] = {&ct_llama2, &ct_chatml, &ct_llama3, &ct_zephyr, &ct_plain, NULL};
static const ct_template *const ct_detect_order[] = {&ct_llama3, &ct_chatml, &ct_zephyr, &ct_llama2, NULL};

const char *ct_name(const ct_template *t) { return t->name; }

const char *ct_summary(const ct_template *t) { return t->summary; }

const ct_template *ct_find(const char *name) {
    for (int i = 0; ct_table[i]; i++)
        if (!strcmp(ct_table[i]->name, name)) return ct_table[i];
    return NULL;
}

const char *ct_names(char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; ct_table[i] && at < len; i++) {
        int w = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", ct_table[i]->name);
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

int ct_detect(const char *jinja, const ct_template **out, char *err, size_t errlen) {
    *out = NULL;
    if (!jinja) {
        *out = &ct_plain;
        return 0;
    }
    for (int i = 0; ct_detect_order[i]; i++)
        if (strstr(jinja, ct_detect_order[i]->signature)) {
            *out = ct_detect_order[i];
            return 0;
        }
    char names[128];
    return bench_errf(err, errlen, "the model's chat template (tokenizer.chat_template, %zu bytes: \"%.60s...\") is none that bench "
                      "recognises (it runs no Jinja; it knows %s by their markers): name one with --chat-template NAME",
                      strlen(jinja), jinja, ct_names(names, sizeof(names)));
}

char *ct_render(const ct_template *t, const ct_msg *msgs, int n) {
    ut_buf b = {0};
    int rc = 0;
    if (t->render) {
        rc = t->render(t, msgs, n, &b);
    } else {
        for (int i = 0; i < n && !rc; i++) {
            int role = ct_role(msgs[i].role);
            rc = ct_put(&b, t->pre[role]) || ct_put(&b, msgs[i].content) || ct_put(&b, t->suf[role]);
        }
    }
    if (rc || ct_put(&b, t->gen)) {
        ut_buf_free(&b);
        return NULL;
    }
    return ut_buf_take(&b);
}

/* The id of the piece s in v, or -1: a linear scan, once per template at start-up. */
static int ct_piece_id(const model_vocab *v, const char *s) {
    for (int i = 0; v && i < v->n; i++)
        if (v->tokens[i] && !strcmp(v->tokens[i], s)) return i;
    return -1;
}

void ct_bind(const ct_template *t, const model_vocab *v, ct_bound *out) {
    memset(out, 0, sizeof(*out));
    out->t = t;
    for (int i = 0; i < CT_MAX_SPECIALS; i++) out->special_id[i] = t->specials[i] ? ct_piece_id(v, t->specials[i]) : -1;
    out->eot_id = -1;
    for (int i = 0; t->eot && i < CT_MAX_SPECIALS && t->specials[i]; i++)
        if (!strcmp(t->specials[i], t->eot)) out->eot_id = out->special_id[i];
    /* EOS already ends a request (unless ignore_eos); an end of turn that is EOS adds nothing */
    if (out->eot_id >= 0 && v && out->eot_id == v->eos) out->eot_id = -1;
    else if (out->eot_id < 0) out->eot_text = t->eot;
    if (out->eot_text && v && v->eos >= 0 && v->tokens && !strcmp(v->tokens[v->eos], out->eot_text)) out->eot_text = NULL;
    out->bos = t->bos;
}

/* The first special (that is a token) at or after p: its index, *at its place; -1: none. */
static int ct_next_special(const ct_bound *b, const char *p, const char **at) {
    int best = -1;
    *at = NULL;
    for (int i = 0; i < CT_MAX_SPECIALS && b->t->specials[i]; i++) {
        if (b->special_id[i] < 0) continue;
        const char *q = strstr(p, b->t->specials[i]);
        if (q && (!*at || q < *at)) {
            *at = q;
            best = i;
        }
    }
    return best;
}

int ct_encode(const ct_bound *b, const tokenizer *tok, const char *text, int *ids, int max_ids, char *err, size_t errlen) {
    int n = 0;
    if (b->bos) {
        int bos = tokenizer_bos(tok);
        if (bos < 0) return bench_errf(err, errlen, "tokenizer: the vocabulary has no BOS token");
        if (max_ids < 1) return tok_too_many(err, errlen, max_ids);
        ids[n++] = bos;
    }
    const char *p = text;
    while (*p) {
        const char *at;
        int sp = ct_next_special(b, p, &at);
        size_t len = sp >= 0 ? (size_t)(at - p) : strlen(p);
        if (len) {
            char *seg = strndup(p, len);
            if (!seg) return bench_errf(err, errlen, "out of memory");
            int k = tokenizer_encode(tok, seg, 0, 0, ids + n, max_ids - n, err, errlen);
            free(seg);
            if (k < 0) return k;
            n += k;
        }
        if (sp < 0) break;
        if (n >= max_ids) return tok_too_many(err, errlen, max_ids);
        ids[n++] = b->special_id[sp];
        p = at + strlen(b->t->specials[sp]);
    }
    return n;
}

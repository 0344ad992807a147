/* GGUF's llama mapping: the pairs and tensor infos of a GGUF container (gguf_read.h reads
 * them) become a model: its tensors, pointing into the file's data section, its config
 * (llama.* keys) and its vocabulary (tokenizer.ggml.*). What a key means is decided here;
 * how it is laid out in the file, there. */
#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/abi/module.h"
#include "engines/core/model/gguf_read.h"

/* ---- tensors ---- */

/* general.architecture: llama, or a file without tensors (a vocabulary-only file) */
static int map_arch(const gguf_file *g) {
    const gg_kv *arch = gguf_find(g, "general.architecture");
    if (arch && arch->type != GV_STRING)
        return bench_errf(g->r.err, g->r.errlen, "%s: general.architecture has type %s, expected string", g->r.path,
                          gguf_value_type_name(arch->type));
    if (arch && strcmp(arch->str, "llama") != 0 && g->n_tensors > 0)
        return bench_errf(g->r.err, g->r.errlen, "%s: general.architecture is \"%s\"; only llama models are supported",
                          g->r.path, arch->str);
    return 0;
}

/* every tensor info as a model tensor, then each one's bytes against the data section */
static int map_tensors(gguf_file *g, model *m) {
    const char *path = g->r.path;
    char *err = g->r.err;
    size_t errlen = g->r.errlen;
    m->format = MODEL_FORMAT_GGUF;
    int file = model_add_file(m, path, model_fd_id(g->r.fd));
    if (file < 0) return bench_errf(err, errlen, "%s: out of memory", path);
    while (g->tensors_read < g->n_tensors) {
        gguf_tensor_info ti;
        if (gguf_read_tensor(g, &ti)) return -1;
        /* The offset is relative until the data section's start is known, below. */
        int rc = model_add_tensor(m, ti.name, ti.dtype, (int)ti.n_dims, ti.ne, file, ti.offset, err, errlen);
        free(ti.name);
        if (rc) return -1;
    }
    uint64_t data_start = gguf_data_start(g), size = g->r.size;
    for (int i = 0; i < m->n_tensors; i++) {
        model_tensor *t = &m->tensors[i];
        uint64_t rel = t->offset;
        if (rel > size || data_start > size - rel || t->nbytes > size - rel - data_start)
            return bench_errf(err, errlen, "%s: tensor %s: %llu bytes at offset %llu (data section at %llu + %llu) run past the end of the file (%llu bytes)",
                              path, t->name, (unsigned long long)t->nbytes, (unsigned long long)(data_start + rel),
                              (unsigned long long)data_start, (unsigned long long)rel, (unsigned long long)size);
        t->offset = data_start + rel;
    }
    return 0;
}

/* ---- hyperparameters: missing keys are model_validate's to report ---- */

#define KEY(suffix) (snprintf(key, sizeof(key), "llama.%s", suffix), key)

/* head size and rotary dimensions: llama.cpp allows other sizes than dim / heads; bench does not */
static int map_head_size(const gguf_file *g, const model_config *c) {
    char key[128];
    int rope_dims = 0;
    if (gguf_get_count(g, KEY("rope.dimension_count"), &rope_dims)) return -1;
    if (rope_dims && c->dim && c->n_heads && c->dim % c->n_heads == 0 && rope_dims != c->dim / c->n_heads)
        return bench_errf(g->r.err, g->r.errlen, "%s: %s is %d but the head size is %d: partial rotary embeddings are not supported",
                          g->r.path, KEY("rope.dimension_count"), rope_dims, c->dim / c->n_heads);
    const char *hkeys[] = {"attention.key_length", "attention.value_length"};
    for (int i = 0; i < 2; i++) {
        int len = 0;
        if (gguf_get_count(g, KEY(hkeys[i]), &len)) return -1;
        if (len && c->dim && c->n_heads && len * c->n_heads != c->dim)
            return bench_errf(g->r.err, g->r.errlen, "%s: %s is %d but dim / heads is %d / %d: heads of another size than dim / heads "
                              "are not supported", g->r.path, key, len, c->dim, c->n_heads);
    }
    return 0;
}

/* RoPE scaling: linear is read; YaRN and LongRoPE are refused. Llama 3's long-context
 * scheme needs no key: its rope_freqs.weight tensor carries it (transformer.c). */
static int map_rope_scaling(const gguf_file *g, model_config *c) {
    char key[128];
    float linear = 0.0f;
    if (gguf_get_float(g, KEY("rope.scale_linear"), &linear)) return -1; /* older files */
    const gg_kv *rst = gguf_find(g, KEY("rope.scaling.type"));
    if (rst) {
        if (rst->type != GV_STRING)
            return bench_errf(g->r.err, g->r.errlen, "%s: %s has type %s, expected string", g->r.path, key,
                              gguf_value_type_name(rst->type));
        if (!strcmp(rst->str, "linear")) {
            if (gguf_get_float(g, KEY("rope.scaling.factor"), &linear)) return -1;
        } else if (strcmp(rst->str, "none") != 0) {
            return bench_errf(g->r.err, g->r.errlen, "%s: %s.rope.scaling.type is \"%s\", which bench does not read (none and linear are; "
                              "Llama 3's rope_freqs.weight is)", g->r.path, "llama", rst->str);
        }
    }
    if (linear != 0.0f && linear != 1.0f) {
        if (!(linear > 0.0f) || !isfinite(linear))
            return bench_errf(g->r.err, g->r.errlen, "%s: RoPE linear scaling factor %g, expected a positive number", g->r.path, linear);
        c->rope_linear = linear;
    }
    return 0;
}

static int map_config(const gguf_file *g, model *m) {
    char key[128];
    model_config *c = &m->cfg;
    c->rope_theta = 10000.0f;
    c->norm_eps = 1e-5f;
    c->rope = ROPE_INTERLEAVED;
    if (gguf_get_count(g, KEY("context_length"), &c->seq_len_header) ||
        gguf_get_count(g, KEY("embedding_length"), &c->dim) ||
        gguf_get_count(g, KEY("block_count"), &c->n_layers) ||
        gguf_get_count(g, KEY("feed_forward_length"), &c->hidden_dim) ||
        gguf_get_count(g, KEY("attention.head_count"), &c->n_heads) ||
        gguf_get_count(g, KEY("attention.head_count_kv"), &c->n_kv_heads) ||
        gguf_get_count(g, KEY("vocab_size"), &c->vocab_size) ||
        gguf_get_float(g, KEY("rope.freq_base"), &c->rope_theta) ||
        gguf_get_float(g, KEY("attention.layer_norm_rms_epsilon"), &c->norm_eps))
        return -1;
    if (!c->n_kv_heads) c->n_kv_heads = c->n_heads;
    c->seq_len = c->seq_len_header;
    if (map_head_size(g, c) || map_rope_scaling(g, c)) return -1;
    const gg_kv *gname = gguf_find(g, "general.name");
    if (gname && gname->type == GV_STRING && !(m->name = strdup(gname->str)))
        return bench_errf(g->r.err, g->r.errlen, "%s: out of memory", g->r.path);
    return 0;
}

#undef KEY

/* ---- vocabulary ---- */

/* the arrays' lengths agree, and every merge is "left right" (llama.cpp splits at the first
 * space after the first byte) */
static int check_vocab_arrays(const gguf_file *g) {
    const gg_vocab_arrays *va = &g->va;
    const char *path = g->r.path;
    char *err = g->r.err;
    size_t errlen = g->r.errlen;
    if (va->have_scores && va->n_scores != va->n_tokens)
        return bench_errf(err, errlen, "%s: tokenizer.ggml.scores has %llu entries, tokenizer.ggml.tokens %llu",
                          path, (unsigned long long)va->n_scores, (unsigned long long)va->n_tokens);
    if (va->have_types && va->n_types != va->n_tokens)
        return bench_errf(err, errlen, "%s: tokenizer.ggml.token_type has %llu entries, tokenizer.ggml.tokens %llu",
                          path, (unsigned long long)va->n_types, (unsigned long long)va->n_tokens);
    if (va->n_tokens == 0) return bench_errf(err, errlen, "%s: tokenizer.ggml.tokens is empty", path);
    return 0;
}

static int check_merges(const gguf_file *g) {
    const gg_vocab_arrays *va = &g->va;
    if (va->n_merges > INT_MAX)
        return bench_errf(g->r.err, g->r.errlen, "%s: tokenizer.ggml.merges holds %llu merges, at most %d supported", g->r.path,
                          (unsigned long long)va->n_merges, INT_MAX);
    for (uint64_t i = 0; i < va->n_merges; i++) {
        const char *mg = va->merges[i], *sp = mg[0] ? strchr(mg + 1, ' ') : NULL;
        if (!sp || !sp[1])
            return bench_errf(g->r.err, g->r.errlen, "%s: tokenizer.ggml.merges[%llu] is \"%.60s\", expected two pieces separated by a space",
                              g->r.path, (unsigned long long)i, mg);
    }
    return 0;
}

/* the special ids, the tokenizer's model and pre-tokenizer names, the space prefix */
static int map_vocab_keys(const gguf_file *g, int n, model_vocab *v) {
    if (gguf_get_token(g, "tokenizer.ggml.bos_token_id", n, &v->bos) ||
        gguf_get_token(g, "tokenizer.ggml.eos_token_id", n, &v->eos) ||
        gguf_get_token(g, "tokenizer.ggml.unknown_token_id", n, &v->unk))
        return -1;
    const gg_kv *tm = gguf_find(g, "tokenizer.ggml.model"), *tp = gguf_find(g, "tokenizer.ggml.pre");
    if ((tm && tm->type != GV_STRING) || (tp && tp->type != GV_STRING))
        return bench_errf(g->r.err, g->r.errlen, "%s: %s has type %s, expected string", g->r.path,
                          tm && tm->type != GV_STRING ? tm->key : tp->key,
                          gguf_value_type_name(tm && tm->type != GV_STRING ? tm->type : tp->type));
    /* Absent model or pre stay NULL: the tokenizer names what is missing. */
    if ((tm && !(v->model = strdup(tm->str))) || (tp && !(v->pre = strdup(tp->str))))
        return bench_errf(g->r.err, g->r.errlen, "%s: out of memory", g->r.path);
    /* SentencePiece (llama.cpp's "llama" model) prepends a space unless told otherwise. */
    v->add_space_prefix = tm && strcmp(tm->str, "llama") == 0;
    const gg_kv *asp = gguf_find(g, "tokenizer.ggml.add_space_prefix");
    if (asp && asp->type == GV_BOOL) v->add_space_prefix = (int)asp->v.u;
    /* kept as text for bench serve to recognise; a non-string is no template, not an error:
     * the weights serve without one */
    const gg_kv *ct = gguf_find(g, "tokenizer.chat_template");
    if (ct && ct->type == GV_STRING && !(v->chat_template = strdup(ct->str)))
        return bench_errf(g->r.err, g->r.errlen, "%s: out of memory", g->r.path);
    return 0;
}

static int map_vocab(gguf_file *g, model *m) {
    gg_vocab_arrays *va = &g->va;
    if (!va->have_tokens) {
        m->vocab.bos = m->vocab.eos = m->vocab.unk = -1;
        return 0;
    }
    if (check_vocab_arrays(g)) return -1;
    int n = (int)va->n_tokens;
    model_vocab *v = &m->vocab;
    if ((!va->have_scores && !(va->scores = calloc((size_t)n, sizeof(float)))) ||
        (!va->have_types && !(va->types = malloc((size_t)n * sizeof(int32_t)))))
        return bench_errf(g->r.err, g->r.errlen, "%s: out of memory", g->r.path);
    if (!va->have_types)
        for (int i = 0; i < n; i++) va->types[i] = TOKEN_NORMAL;
    if (map_vocab_keys(g, n, v) || check_merges(g)) return -1;
    /* the arrays move into the model: the container no longer frees them */
    v->tokens = va->tokens; va->tokens = NULL; va->n_tokens = 0;
    v->scores = va->scores; va->scores = NULL;
    v->types = va->types; va->types = NULL;
    v->merges = va->merges; va->merges = NULL;
    v->n_merges = (int)va->n_merges; va->n_merges = 0;
    v->n = n;
    return 0;
}

/* ---- the model ---- */

int gguf_open(const char *path, model *m, char *err, size_t errlen) {
    gguf_file g;
    int rc = gguf_read_open(path, &g, err, errlen);
    if (!rc) rc = map_arch(&g) || map_tensors(&g, m) || map_config(&g, m) || map_vocab(&g, m) ? -1 : 0;
    if (!rc) {
        model_config *c = &m->cfg;
        const model_tensor *emb = model_find(m, "token_embd.weight");
        if (emb && emb->n_dims >= 2 && emb->ne[1] <= INT_MAX) c->vocab_size = (int)emb->ne[1];
        else if (!c->vocab_size) c->vocab_size = m->vocab.n;
    }
    gguf_read_close(&g);
    return rc;
}

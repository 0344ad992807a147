/* Hugging Face <-> GGUF tensor names and the q/k row permutation (see hf_names.h). */
#include "hf_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-layer names: HF suffix after "model.layers.N.", GGUF suffix after "blk.N.". */
static const struct { const char *hf, *gguf; } layer_names[] = {
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
};

static const struct { const char *hf, *gguf; } global_names[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Parses "<prefix><layer>." at the start of s; returns the rest or NULL. */
static const char *layer_prefix(const char *s, const char *prefix, int *layer) {
    size_t pl = strlen(prefix);
    if (strncmp(s, prefix, pl) != 0) return NULL;
    s += pl;
    if (*s < '0' || *s > '9') return NULL;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s++ - '0');
        if (v > 1000000) return NULL;
    }
    if (*s != '.') return NULL;
    *layer = (int)v;
    return s + 1;
}

static int map_name(const char *in, char *out, size_t outlen, int to_gguf) {
    for (size_t i = 0; i < COUNT(global_names); i++) {
        const char *from = to_gguf ? global_names[i].hf : global_names[i].gguf;
        const char *to = to_gguf ? global_names[i].gguf : global_names[i].hf;
        if (strcmp(in, from) == 0) {
            int n = snprintf(out, outlen, "%s", to);
            return n < 0 || (size_t)n >= outlen ? -1 : 0;
        }
    }
    int layer;
    const char *rest = layer_prefix(in, to_gguf ? "model.layers." : "blk.", &layer);
    if (!rest) return -1;
    for (size_t i = 0; i < COUNT(layer_names); i++) {
        const char *from = to_gguf ? layer_names[i].hf : layer_names[i].gguf;
        const char *to = to_gguf ? layer_names[i].gguf : layer_names[i].hf;
        if (strcmp(rest, from) == 0) {
            int n = snprintf(out, outlen, to_gguf ? "blk.%d.%s" : "model.layers.%d.%s", layer, to);
            return n < 0 || (size_t)n >= outlen ? -1 : 0;
        }
    }
    return -1;
}

int hf_name_to_gguf(const char *hf, char *out, size_t outlen) { return map_name(hf, out, outlen, 1); }
int hf_name_from_gguf(const char *gguf, char *out, size_t outlen) { return map_name(gguf, out, outlen, 0); }

int hf_rope_heads(const char *gguf, const model_config *cfg) {
    int layer;
    const char *rest = layer_prefix(gguf, "blk.", &layer);
    if (!rest) return 0;
    if (strcmp(rest, "attn_q.weight") == 0) return cfg->n_heads;
    if (strcmp(rest, "attn_k.weight") == 0) return cfg->n_kv_heads;
    return 0;
}

int hf_permute_rows(void *dst, const void *src, int n_heads, int64_t rows, size_t row_bytes, int to_hf) {
    if (n_heads <= 0 || rows <= 0 || rows % (2 * (int64_t)n_heads)) return -1;
    int64_t hd = rows / n_heads, half = hd / 2;
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (int64_t h = 0; h < n_heads; h++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t i = 0; i < half; i++) {
                int64_t hf = h * hd + j * half + i, il = h * hd + 2 * i + j;
                int64_t to = to_hf ? hf : il, from = to_hf ? il : hf;
                memcpy(d + (size_t)to * row_bytes, s + (size_t)from * row_bytes, row_bytes);
            }
    return 0;
}

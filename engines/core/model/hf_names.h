/* Hugging Face <-> GGUF tensor names, and HF's q/k row order.
 *
 * HF checkpoints store each attention head's q and k rows so that RoPE can
 * rotate pairs (i, i + hd/2) ("rotate_half"); GGUF and llama2.c store them so
 * that it rotates pairs (2i, 2i+1). Within head h of hd rows:
 *     HF row  h*hd + j*hd/2 + i   ==   interleaved row  h*hd + 2*i + j     (j in {0,1}, i < hd/2)
 * (the permutation of HF's convert_llama_weights_to_hf.py, and its inverse).
 */
#ifndef BENCH_HF_NAMES_H
#define BENCH_HF_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* "model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight".
 * Returns 0 and writes out, or -1 when the name is not a Llama tensor HF name. */
int hf_name_to_gguf(const char *hf, char *out, size_t outlen);

/* The inverse of hf_name_to_gguf. */
int hf_name_from_gguf(const char *gguf, char *out, size_t outlen);

/* Heads of a GGUF-named tensor whose rows RoPE rotates: cfg->n_heads for
 * blk.N.attn_q.weight, cfg->n_kv_heads for blk.N.attn_k.weight, 0 otherwise. */
int hf_rope_heads(const char *gguf, const model_config *cfg);

/* Reorders the rows of a (n_heads*hd, ...) matrix between the two layouts.
 * to_hf = 1: interleaved -> HF; 0: HF -> interleaved. dst and src must not
 * overlap. Returns -1 when rows is not a multiple of 2*n_heads. */
int hf_permute_rows(void *dst, const void *src, int n_heads, int64_t rows, size_t row_bytes, int to_hf);

#endif

/* The byte-level BPE part of a Hugging Face tokenizer.json (GPT-2, Llama 3, Qwen2, ...):
 * model.merges, the pre-tokenizer's split patterns, model.ignore_merges. */
#ifndef BENCH_HF_BPE_H
#define BENCH_HF_BPE_H

#include <cJSON.h>
#include <stddef.h>

#include "model.h"

/* v holds the pieces and ids read from model.vocab and added_tokens already. When the
 * file is byte-level (a ByteLevel pre-tokenizer or decoder) this fills v->model
 * ("gpt2"), v->merges, v->pre_patterns, v->ignore_merges and v->unsupported, and
 * returns 1; a SentencePiece-style BPE file returns 0 untouched; -1 with err on a
 * malformed file (naming path and the field). */
int hf_bpe_read(const cJSON *root, model_vocab *v, const char *path, char *err, size_t errlen);

#endif

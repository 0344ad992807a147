/* Tokenizer over a model_vocab: llama2.c's BPE with scores and the GGUF
 * SentencePiece vocabulary (spaces as U+2581, byte fallback <0xNN>). */
#ifndef BENCH_TOKENIZER_H
#define BENCH_TOKENIZER_H

#include "engines/core/model/model.h"

typedef struct tokenizer tokenizer;

/* Builds the lookup tables; the vocabulary is copied, v may be freed afterwards. */
int tokenizer_create(const model_vocab *v, tokenizer **out, char *err, size_t errlen);
void tokenizer_free(tokenizer *t);      /* t may be NULL */

/* Encodes text. bos/eos: prepend/append those tokens. Writes at most max_ids ids;
 * returns the number of ids, or -1 (with err) if they do not fit. Leading space
 * handling: SentencePiece style (a space is prepended to non-empty text), as
 * llama2.c and llama.cpp do for these vocabularies. */
int tokenizer_encode(const tokenizer *t, const char *text, int bos, int eos,
                     int *ids, int max_ids, char *err, size_t errlen);

/* Text of token id following token prev: byte tokens become their byte, U+2581
 * becomes a space, and the leading space after BOS is dropped (as llama2.c prints).
 * The returned bytes live in buf (at least 8 bytes) or in the tokenizer. */
const char *tokenizer_decode(const tokenizer *t, int prev, int id, char *buf, size_t buflen);

int tokenizer_bos(const tokenizer *t);
int tokenizer_eos(const tokenizer *t);
int tokenizer_vocab_size(const tokenizer *t);

#endif

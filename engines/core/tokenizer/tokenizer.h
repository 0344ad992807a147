/* Tokenizer over a model_vocab, chosen by its model name (tokenizer.ggml.model):
 *   "llama": SentencePiece BPE with scores (llama2.c's tokenizer.bin, GGUF, HF), spaces
 *            as U+2581, byte fallback <0xNN>;
 *   "gpt2":  byte-level BPE with merges and a pre-tokenizer (bpe.h).
 * Any other name, or none, is refused naming it and the supported ones, unless the
 * caller asks for TOKENIZER_FALLBACK: then the nearest tokenizer is used and
 * tokenizer_warning() says what is not honoured. */
#ifndef BENCH_TOKENIZER_H
#define BENCH_TOKENIZER_H

#include "engines/core/model/model.h"
#include "engines/core/tokenizer/bpe.h"  /* TOK_ERR_TOO_MANY */

typedef struct tokenizer tokenizer;

/* Builds the lookup tables; the vocabulary is copied, v may be freed afterwards. */
int tokenizer_create(const model_vocab *v, tokenizer **out, char *err, size_t errlen);
enum { TOKENIZER_FALLBACK = 1 };        /* flags: an unknown model or pre-tokenizer is a warning, not an error */
int tokenizer_create_ex(const model_vocab *v, unsigned flags, tokenizer **out, char *err, size_t errlen);
/* "" or the line --tokenizer-fallback made the tokenizer say (what it does not honour). */
const char *tokenizer_warning(const tokenizer *t);
/* "sentencepiece" or "byte-level BPE" */
const char *tokenizer_kind(const tokenizer *t);
void tokenizer_free(tokenizer *t);      /* t may be NULL */

/* Encodes text. bos/eos: prepend/append those tokens. Writes at most max_ids ids;
 * returns the number of ids, -TOK_ERR_TOO_MANY (bpe.h) with err if they do not fit, or
 * another negative value with err (no BOS in the vocabulary, out of memory). Leading space
 * handling: SentencePiece style (a space is prepended to non-empty text), as
 * llama2.c and llama.cpp do for these vocabularies. */
int tokenizer_encode(const tokenizer *t, const char *text, int bos, int eos,
                     int *ids, int max_ids, char *err, size_t errlen);

/* The most bytes a text can have and still encode to n_tokens ids or fewer (BOS and EOS not
 * counted); a longer text needs more, so a caller can refuse it without encoding it (and
 * tokenizer_encode itself refuses a text past max_ids this way, before its merges). An
 * upper bound, not the exact count: every id stands for at most the longest piece's bytes
 * of the normalised text (a character for <unk>, one byte for a byte token), and the text
 * is at most a fixed factor longer than its normalised form (normalised_bytes_bound).
 * SIZE_MAX when that overflows. */
size_t tokenizer_max_text_bytes(const tokenizer *t, int n_tokens);

/* Text of token id following token prev: byte tokens become their byte, U+2581
 * becomes a space, and the leading space after BOS is dropped (as llama2.c prints).
 * Byte-level BPE: the piece's bytes (a token may hold part of a UTF-8 character),
 * user-defined tokens their text, control tokens nothing.
 * The returned bytes live in buf (at least 8 bytes) or in the tokenizer. */
const char *tokenizer_decode(const tokenizer *t, int prev, int id, char *buf, size_t buflen);

int tokenizer_bos(const tokenizer *t);
int tokenizer_eos(const tokenizer *t);
int tokenizer_vocab_size(const tokenizer *t);

#endif

/* Byte-level BPE (GPT-2's scheme, used by Llama 3, Qwen, StarCoder, Falcon, DeepSeek
 * and others): tokenizer.ggml.model "gpt2" in GGUF, a ByteLevel "BPE" model in a
 * Hugging Face tokenizer.json.
 *
 * Encoding:
 *   1. user-defined tokens (TOKEN_USER) are cut out of the text first, longest first,
 *      and become their ids; control tokens typed in the text stay text (llama.cpp
 *      with parse_special = false, which its test sets use);
 *   2. each remaining fragment is cut into words by the pre-tokenizer (pretok.h);
 *   3. each word's bytes are spelled in the byte-level alphabet (unicode.h), one
 *      symbol per byte;
 *   4. the adjacent pair with the lowest merge rank (its line in the merges list) is
 *      merged, ties to the leftmost, until no pair has a rank;
 *   5. each symbol becomes its token; one that is not a token (a merge whose result
 *      the vocabulary lacks) becomes its bytes' tokens.
 * Invalid UTF-8 is not replaced: the pre-tokenizer sees U+FFFD for each bad byte, but
 * the words keep the text's own bytes, so decoding gives back exactly the input.
 */
#ifndef BENCH_BPE_H
#define BENCH_BPE_H

#include <stddef.h>

#include "engines/abi/module.h"
#include "engines/core/model/model.h"

typedef struct bpe bpe;

/* Builds the tables from v (model "gpt2", merges, pre or pre_patterns); v may be
 * freed afterwards. fallback: an unknown pre-tokenizer name is replaced by gpt-2's
 * rules and a line saying so is appended to warn (NUL-terminated on entry; else it
 * is an error). */
int bpe_create(const model_vocab *v, int fallback, bpe **out, char *warn, size_t warnlen, char *err, size_t errlen);
void bpe_free(bpe *b); /* b may be NULL */

/* A text needing more ids than the caller has room for. Every encoder of the tokenizer chain
 * (this one, tokenizer.h's) returns -TOK_ERR_TOO_MANY for it and nothing else, so that a
 * caller tells it from any other failure by the code, not by the message. */
#define TOK_ERR_TOO_MANY BENCH_ERR_REFUSED
static inline int tok_too_many(char *err, size_t errlen, int max_ids) {
    return bench_errc(err, errlen, TOK_ERR_TOO_MANY, "tokenizer: the text needs more than %d tokens", max_ids);
}

/* Appends the ids of text[0..len) to ids[*n..max_ids); -TOK_ERR_TOO_MANY with err when they
 * do not fit, -1 when a byte has no token and there is no <unk>. */
int bpe_encode(const bpe *b, const char *text, size_t len, int *ids, int *n, int max_ids, char *err, size_t errlen);

/* The bytes a byte-level piece stands for, written to out (at least len bytes; the
 * result is never longer). Code points outside the alphabet are copied as they are. */
size_t bpe_piece_bytes(const char *piece, size_t len, char *out);

#endif

/* The synthetic vocabulary (synth_vocab.c), in a header of its own so that synth.c uses it
 * without synth_vocab.c depending on synth.c back (scripts/depcheck.sh: no cycle between
 * the files of a folder). synth.h includes it for its callers. */
#ifndef SYNTH_VOCAB_H
#define SYNTH_VOCAB_H

#include <stddef.h>

#include "engines/core/model/model.h"

/* A deterministic SentencePiece-style vocabulary of n tokens (n >= 259):
 * <unk>=0, <s>=1, </s>=2, the 256 byte tokens <0x00>..<0xFF>, then pieces built
 * from common English words and letter strings (spaces as U+2581), scores
 * decreasing, single characters last. Every text without NUL and U+2581 encodes
 * (byte fallback) and decodes back to itself. v is filled; free it with model_vocab_free. */
int synth_vocab_build(int n, model_vocab *v, char *err, size_t errlen);

#endif

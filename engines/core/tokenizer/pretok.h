/* Pre-tokenization for byte-level BPE: text is cut into words by a list of regular
 * expressions before merges run, so a merge never crosses a word boundary.
 *
 * Each expression splits every piece the previous ones left: its matches become
 * pieces, and so does the text between two matches (llama.cpp's unicode_regex_split,
 * HF's Split(behavior = Isolated)). Look-ahead and $ see the end of the piece being
 * split, not of the whole text.
 *
 * The expressions are compiled for a small matcher over code points (a Pike VM, pretok.c):
 *   literals, . (any but \n), [...] and [^...] with ranges, \s \S \p{X} \P{X}
 *     (X one of L M N P S Z C: major classes only), \r \n \t \f \v \xHH \x{H..},
 *   (?:...), (?i:...) (ASCII case folding), (?!X) with X one character or class,
 *   | * + ? {m} {m,} {m,n} (greedy), $ (end of the piece).
 * Anything else is refused when compiled, naming the offset in the pattern.
 */
#ifndef BENCH_PRETOK_H
#define BENCH_PRETOK_H

#include <stddef.h>
#include <stdint.h>

typedef struct pretok pretok;

/* A family's rules by its tokenizer.ggml.pre name (see pretok_names()). Returns -1
 * with err naming the name and the supported ones when it is not known. */
int pretok_create_named(const char *name, pretok **out, char *err, size_t errlen);
/* Rules from expressions (tokenizer.json's Split patterns, in order). */
int pretok_create(const char *const *patterns, int n, pretok **out, char *err, size_t errlen);
void pretok_free(pretok *p); /* p may be NULL */

/* The known family names, comma-separated (for error messages and docs). */
const char *pretok_names(void);
int pretok_name_known(const char *name);
/* Whether the family's ids were checked against a reference test set (docs/formats.md, "Vocabularies"). */
int pretok_name_tested(const char *name);
/* Whether the family's BPE looks a whole word up before merging (llama.cpp's ignore_merges). */
int pretok_name_ignores_merges(const char *name);

/* Splits cps[0..n) into pieces. On success *lens (malloc'd, caller frees) holds *n_pieces
 * piece lengths in code points, summing to n. Returns -1 with err on failure (out of
 * memory, or a pattern whose searches scanned more than 64 code points per code point of
 * text plus 2^20: leftmost-first matching restarted after each match is quadratic for
 * some patterns, a*b|a on aaaa..., and those are refused rather than run). */
int pretok_split(const pretok *p, const uint32_t *cps, size_t n, size_t **lens, size_t *n_pieces,
                 char *err, size_t errlen);

#endif

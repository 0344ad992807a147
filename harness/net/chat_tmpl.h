/* Chat templates for bench serve's POST /v1/chat/completions: the messages into one
 * prompt text, the way the model was trained to read a conversation.
 *
 * A GGUF file carries its template as Jinja (tokenizer.chat_template). bench runs no Jinja:
 * it recognises the common templates by a marker only they contain (the table's
 * signature) and renders them itself; a template it does not recognise is refused
 * (ct_detect) unless the user names a built-in one (bench serve --chat-template NAME).
 * A file with no template (llama2.c's .bin, most synth models) gets "plain".
 *
 * Glossary
 *   turn         one message rendered: the role's prefix, the content, the role's suffix
 *   generation prompt  what follows the last turn so that the model writes the assistant's
 *                answer (chatml "<|im_start|>assistant\n")
 *   special      a marker of the rendering that is one token of the vocabulary when the
 *                vocabulary has it (<|im_start|>); the tokenizer would split its text into
 *                pieces, so ct_encode puts the id in instead
 *   end of turn  the marker after an assistant turn: generation stops there (its id added
 *                to the request's stop ids, or as a stop string when it is no token)
 */
#ifndef BENCH_CHAT_TMPL_H
#define BENCH_CHAT_TMPL_H

#include <stddef.h>

#include "engines/core/model/model.h"
#include "engines/core/tokenizer/tokenizer.h"

#define CT_MAX_SPECIALS 6

typedef struct ct_msg {
    const char *role;       /* "system", "user", "assistant" */
    const char *content;
} ct_msg;

typedef struct ct_template ct_template;

/* The built-in templates, in detection order; NULL-terminated. */
extern const ct_template *const ct_table[];

const char *ct_name(const ct_template *t);
const char *ct_summary(const ct_template *t);   /* one line: what a turn looks like */
/* The built-in template of that name, or NULL. */
const ct_template *ct_find(const char *name);
/* "llama-2, chatml, llama-3, zephyr, plain" into buf, for messages and --help. */
const char *ct_names(char *buf, size_t len);

/* The template for a model whose tokenizer.chat_template is jinja (NULL: none, "plain").
 * 0 with *out, or -1 with err saying that the template is not one bench knows and how to
 * name one. */
int ct_detect(const char *jinja, const ct_template **out, char *err, size_t errlen);

/* The messages rendered, ending with the generation prompt: a NUL-terminated string to
 * free, or NULL (out of memory). A system message is folded in as the template does (the
 * first user turn, for llama-2). */
char *ct_render(const ct_template *t, const ct_msg *msgs, int n);

/* A template bound to a vocabulary: its specials' ids (-1: not a token there). */
typedef struct ct_bound {
    const ct_template *t;
    int special_id[CT_MAX_SPECIALS];
    int eot_id;             /* the end of turn's id, or -1 (then eot_text is a stop string) */
    const char *eot_text;   /* the end of turn's text, or NULL when the template has none but EOS */
    int bos;                /* 1: the tokenizer prepends BOS to the rendering */
} ct_bound;

void ct_bind(const ct_template *t, const model_vocab *v, ct_bound *out);

/* text (a rendering) into ids: each special that is a token as its id, the text between
 * through the tokenizer; BOS first when b->bos. Returns the count, -TOK_ERR_TOO_MANY when
 * more than max_ids, or another negative value, with err. */
int ct_encode(const ct_bound *b, const tokenizer *tok, const char *text, int *ids, int max_ids, char *err, size_t errlen);

#endif

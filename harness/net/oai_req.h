/* The body of an OpenAI request to bench serve, parsed and checked: POST /v1/completions
 * and POST /v1/chat/completions (docs/http.md says field by field what is honoured).
 *
 * Strict, as vLLM and llama-server can be: a field bench serve does not know is refused
 * (400, naming it) rather than silently not done; a field it knows and does not do
 * (logprobs, penalties...) is accepted only when it asks for nothing (null, false, 0, empty),
 * and named in the answer's X-Bench-Ignored-Fields header. With lenient (bench serve
 * --lenient) unknown fields are accepted and named there too.
 *
 * Every error names the field and what was expected: "n: expected a whole number from 1 to 8". */
#ifndef BENCH_OAI_REQ_H
#define BENCH_OAI_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "engines/core/tokenizer/tokenizer.h"
#include "harness/net/chat_tmpl.h"

#define OR_MAX_N 8              /* choices a request may ask for ("n") */
#define OR_MAX_STOP 4           /* stop strings, as OpenAI */
#define OR_MAX_STOP_BYTES 256   /* one stop string's length at most */
#define OR_MAX_STOP_IDS 16      /* stop_token_ids */

typedef enum { OR_COMPLETION, OR_CHAT } or_kind;

/* What a request is checked against; borrowed. */
typedef struct or_ctx {
    const tokenizer *tok;       /* NULL: the model has no vocabulary (prompts as ids only) */
    int vocab, max_pos;
    const ct_bound *chat;       /* the chat template; NULL: chat refused with chat_refusal */
    const char *chat_refusal;
    int lenient;
} or_ctx;

typedef struct or_req {
    or_kind kind;
    int *ids;                   /* (n_prompt + max_new) the prompt, room for the answer after it */
    int n_prompt, max_new;
    int stream, usage, ignore_eos;
    float temperature, topp;
    uint64_t seed;              /* choice i samples with seed + i */
    int n;                      /* choices, 1 .. OR_MAX_N */
    char *stop[OR_MAX_STOP + 1];            /* (n_stop) the request's, then the template's end of turn */
    int n_stop;
    int stop_ids[OR_MAX_STOP_IDS + 1];      /* (n_stop_ids) the request's, then the template's end of turn */
    int n_stop_ids;
    char ignored[512];          /* fields taken and not acted on, ", " between ("" when none) */
} or_req;

/* body (len bytes) into r. 0, or -1 with err; either way or_req_free frees r. */
int or_parse(const or_ctx *c, or_kind kind, const char *body, size_t len, or_req *r, char *err, size_t errlen);
void or_req_free(or_req *r);

/* The fields a kind takes, "a, b, c" into buf (for messages and docs). */
const char *or_fields(or_kind kind, char *buf, size_t len);

#endif

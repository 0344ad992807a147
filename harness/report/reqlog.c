/* The per-request export: see reqlog.h. */
#include "reqlog.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/net/httpc.h"

/* One request as every target describes it; times CLOCK_MONOTONIC ns, 0: never. */
typedef struct rl_row {
    int64_t id, arrival_ns, sent_ns, first_ns, end_ns;
    int64_t prompt, prompt_reported, output, output_reported;      /* -1: none */
    const int64_t *tok_ns;          /* (n_tok) token times; or, for http, */
    const rn_req_token *rtok;       /* (n_tok) its arrivals */
    int n_tok;
    int kind;                       /* HC_OK or HC_ERR_* */
    const char *msg;                /* a failure's, or NULL */
    int64_t http_status;
    const rn_request *serve;        /* a serving engine's request: its scheduler's figures; NULL */
} rl_row;

/* ms since t0, to the µs as the other timelines print it; null where it never happened */
static cJSON *rl_ms(int64_t ns, int64_t t0) { return ns ? cJSON_CreateNumber(round((double)(ns - t0) * 1e-3) * 1e-3) : cJSON_CreateNull(); }

static cJSON *rl_count(int64_t n) { return n >= 0 ? cJSON_CreateNumber((double)n) : cJSON_CreateNull(); }

static cJSON *rl_line(const rl_row *r, const char *target, int64_t t0) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "id", (double)r->id);
    cJSON_AddStringToObject(o, "target", target);
    const rn_request *q = r->serve;
    if (q) {
        cJSON_AddNumberToObject(o, "session", (double)q->session);
        cJSON_AddNumberToObject(o, "turn", (double)q->turn);
    }
    cJSON_AddItemToObject(o, "arrival_ms", rl_ms(r->arrival_ns, t0));
    cJSON_AddItemToObject(o, "sent_ms", rl_ms(r->sent_ns, t0));
    if (q) cJSON_AddItemToObject(o, "admit_ms", rl_ms(q->admit_ns, t0));
    cJSON_AddItemToObject(o, "first_token_ms", rl_ms(r->first_ns, t0));
    cJSON_AddItemToObject(o, "end_ms", rl_ms(r->end_ns, t0));
    cJSON_AddItemToObject(o, "prompt_tokens", rl_count(r->prompt));
    cJSON_AddItemToObject(o, "prompt_tokens_reported", rl_count(r->prompt_reported));
    cJSON_AddItemToObject(o, "output_tokens", rl_count(r->output));
    cJSON_AddItemToObject(o, "output_tokens_reported", rl_count(r->output_reported));
    if (q) {
        cJSON_AddNumberToObject(o, "prefix_reused", (double)q->prefix_reused);
        cJSON_AddNumberToObject(o, "prefilled", (double)q->prefilled);
        cJSON_AddNumberToObject(o, "preemptions", (double)q->preemptions);
        cJSON_AddBoolToObject(o, "waited", q->waited != 0);
    }
    if (r->kind == HC_OK) {
        cJSON_AddNullToObject(o, "failure");
    } else {
        cJSON_AddStringToObject(o, "failure", hc_err_name(r->kind));
        cJSON_AddStringToObject(o, "message", r->msg ? r->msg : "");
        cJSON_AddNumberToObject(o, "http_status", (double)r->http_status);
    }
    if (r->n_tok) {
        cJSON *t = cJSON_AddArrayToObject(o, "token_ms");
        for (int k = 0; t && k < r->n_tok; k++) cJSON_AddItemToArray(t, rl_ms(r->tok_ns ? r->tok_ns[k] : r->rtok[k].t_ns, t0));
    }
    return o;
}

/* An http request's row: REQ_END, its arrivals (consecutive in rtok: the worker sends a
 * request's together) and its failure's message. */
static rl_row rl_http_row(const rn_proc *p, const rn_req_end *e) {
    rl_row r = {.id = e->req, .arrival_ns = e->arrival_ns, .sent_ns = e->sent_ns, .first_ns = e->first_ns, .end_ns = e->end_ns,
                .prompt = e->prompt, .prompt_reported = e->prompt_reported, .output = e->output,
                .output_reported = e->output_reported, .kind = (int)e->kind, .http_status = e->http_status};
    for (int i = 0; i < p->n_rtok; i++) {
        if (p->rtok[i].req != e->req) continue;
        r.rtok = &p->rtok[i];
        while (i + r.n_tok < p->n_rtok && p->rtok[i + r.n_tok].req == e->req) r.n_tok++;
        break;
    }
    for (int i = 0; i < p->n_rfail; i++)
        if (p->rfail[i].req == e->req) r.msg = p->rfail[i].msg;
    return r;
}

static rl_row rl_serve_row(const rn_request *q) {
    return (rl_row){.id = q->id, .arrival_ns = q->arrival_ns, .sent_ns = q->admit_ns, .first_ns = q->first_ns,
                    .end_ns = q->end_ns, .prompt = q->n_prompt, .prompt_reported = q->n_prompt, .output = q->n_out,
                    .output_reported = q->n_out, .tok_ns = q->tok_ns, .n_tok = q->n_tok, .serve = q};
}

/* The one sequence of an inference run: due and sent at its prefill's start. */
static rl_row rl_sequence_row(const rn_proc *p) {
    int64_t end = p->t_decode_end ? p->t_decode_end : p->tok_ns[p->n_tok - 1];
    return (rl_row){.arrival_ns = p->t_prefill_start, .sent_ns = p->t_prefill_start, .first_ns = p->tok_ns[0], .end_ns = end,
                    .prompt = p->n_prompt, .prompt_reported = p->n_prompt, .output = p->n_tok, .output_reported = p->n_tok,
                    .tok_ns = p->tok_ns, .n_tok = p->n_tok};
}

char *rl_requests_jsonl(const rn_proc *p, const char *target, int64_t t0, size_t *len) {
    *len = 0;
    int n = p->mem_source ? p->n_rend : p->t_serve_start ? p->n_reqs : p->t_prefill_start && p->n_tok ? 1 : 0;
    if (!n) return NULL;
    char *buf = NULL;
    size_t cap = 0;
    FILE *f = open_memstream(&buf, &cap);
    if (!f) return NULL;
    int bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        rl_row r = p->mem_source ? rl_http_row(p, &p->rend[i]) : p->t_serve_start ? rl_serve_row(&p->reqs[i]) : rl_sequence_row(p);
        cJSON *o = rl_line(&r, target, t0);
        char *text = o ? cJSON_PrintUnformatted(o) : NULL;
        bad = !text || fprintf(f, "%s\n", text) < 0;
        free(text);
        cJSON_Delete(o);
    }
    if (fclose(f) || bad) {
        free(buf);
        return NULL;
    }
    *len = cap;
    return buf;
}

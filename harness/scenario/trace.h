/* Recorded request traces of LLM serving, read from their public formats as they are
 * published (samples and their provenance: <shared>/thirdparty/traces/README.md).
 * Pure parsing: no engine, no scenario; harness/child/serve.c turns a trace into requests.
 *
 * The built-in formats (trace.c tr_formats has their rows), one request a row
 *   mooncake   JSON Lines (kvcache-ai/Mooncake, FAST'25): {"timestamp": MS, "input_length": N,
 *              "output_length": N, "hash_ids": [ID, ...]}. timestamp: ms from the trace's
 *              start. hash_ids: one per block of TR_MOONCAKE_BLOCK prompt tokens (the last
 *              block may be partial); equal ids are equal prefixes (a prefix hash).
 *   azure      CSV (Azure LLM inference trace 2023, code and conv): TIMESTAMP,ContextTokens,
 *              GeneratedTokens; TIMESTAMP is absolute, "YYYY-MM-DD HH:MM:SS[.fraction]"
 *              (time zone unstated: only differences are used); a real calendar date
 *              (2023-02-29 is not one).
 *   burstgpt   CSV (HPMLL/BurstGPT): Timestamp,Model,Request tokens,Response tokens,
 *              Total tokens,Log Type; Timestamp in s from the first day's 0:00.
 *   sharegpt   CSV (microsoft/sarathi-serve's length files): num_prefill_tokens,
 *              num_decode_tokens[,...]; no timestamps: a length distribution only.
 *
 * Lines end at LF, CR LF or a lone CR (as Python's universal newlines read them). Every
 * timestamp is at most TR_MAX_SECONDS from the trace's start.
 * CSV columns are found by their header names (extra columns are ignored, a missing one
 * is an error); every row must have the header's number of fields. Blank lines are
 * skipped. Timestamps must not decrease from one row to the next (the replay is in file
 * order). A row with 0 input or 0 output tokens is not a request (BurstGPT writes its
 * failed requests so): it is dropped and counted in tr_trace.dropped, never an error.
 *
 * Errors name the file, the line and the column (1-based, in bytes), the field and what
 * was expected, e.g.
 *   traces/x.csv:17:29: column "ContextTokens": expected an integer 0 .. 16777216, got "12a"
 * and nothing is returned.
 */
#ifndef BENCH_TRACE_H
#define BENCH_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define TR_MOONCAKE_BLOCK 512       /* tokens of prompt per Mooncake hash id */
#define TR_MAX_TOKENS (1 << 24)     /* tokens of an input or output, at most */
#define TR_MAX_FILE (1ull << 30)    /* bytes of a trace file, at most */
/* s of a row's timestamp from the trace's start, at most (Azure: from the first row's
 * day): about 31.7 years, past any recorded trace, and 1e18 ns, a ninth of what an
 * int64 of ns holds (9.2e18), so that the replay's offsets, scaled and added to a run's
 * start, stay far from overflow */
#define TR_MAX_SECONDS 1e9

/* A format is one row of the table of formats (trace.c tr_formats): its name, how its rows are
 * written, which column holds what, and the unit of its times. One generic reader reads every
 * row's format; nothing else names a format. The built-in rows' ids, their places in that
 * table (a new built-in row takes the next one); tr_format_add appends rows after them. */
typedef enum tr_format { TR_MOONCAKE, TR_AZURE, TR_BURSTGPT, TR_SHAREGPT, TR_FORMAT_BUILTIN } tr_format;
#define TR_FORMAT_MAX (TR_FORMAT_BUILTIN + 4)   /* rows at most, the added ones included */

typedef enum tr_syntax {
    TR_CSV,         /* a header line names the columns (col[] are header names); fields split at ',' */
    TR_JSONL,       /* one JSON object a line (col[] are its keys) */
} tr_syntax;

typedef enum tr_time_unit {
    TR_TIME_S,          /* a decimal number of s >= 0 */
    TR_TIME_MS,         /* a number of ms >= 0 */
    TR_TIME_DATE,       /* "YYYY-MM-DD HH:MM:SS[.fraction]", a real calendar date; counted from the first row's day */
} tr_time_unit;

enum { TR_COL_TIME, TR_COL_IN, TR_COL_OUT, TR_COL_HASH, TR_NCOL };

typedef struct tr_format_def {
    const char *name;           /* what a scenario's trace.format, the messages and bench list call it */
    const char *about;          /* one line for bench list: whose trace, where it is published */
    tr_syntax syntax;
    /* the time, input tokens, output tokens and hash ids columns (CSV: header names; JSON Lines:
     * keys). time NULL: no times (a length distribution); out NULL: every request generates
     * output_tokens; hash NULL: no ids (JSON Lines only: a list of integers >= 0, one a block
     * of block_tokens prompt tokens) */
    const char *col[TR_NCOL];
    const char *shape;          /* CSV: the header as published; JSON Lines: a line's shape (for messages) */
    tr_time_unit unit;
    const char *origin;         /* what times count from, for messages; NULL: "the trace's start" */
    int block_tokens;           /* with hash ids: prompt tokens per id */
    int output_tokens;          /* without an output column: each request's, > 0 */
} tr_format_def;

typedef struct tr_req {
    double t_s;             /* s from the first kept row's timestamp; 0 in a trace without time */
    int input, output;      /* tokens of prompt, tokens generated */
    int n_hash;             /* mooncake: hash ids of the prompt's first blocks (all, or
                             * tr_window.max_hash); 0 otherwise */
    size_t hash_at;         /* its first id in tr_trace.hash */
    int line;               /* where it is in the file (1-based), for messages */
} tr_req;

/* Which rows to keep: the first max_requests, and those within max_seconds of the first;
 * 0: no limit. Reading stops at the first row past the window. max_hash: a row's first
 * max_hash ids are kept, the rest (blocks past what a prompt cap keeps) dropped as read,
 * though each is still checked; 0: all. */
typedef struct tr_window {
    int max_requests;
    double max_seconds;
    int max_hash;
} tr_window;

typedef struct tr_trace {
    tr_format format;
    int timed;              /* 1: rows carry arrival times */
    int block_tokens;       /* prompt tokens per hash id: TR_MOONCAKE_BLOCK, 0 without ids */
    int n;
    tr_req *r;              /* (n) in file order */
    size_t n_hash;
    int64_t *hash;          /* (n_hash) every row's hash ids, r[i].hash_at onwards */
    int dropped;            /* rows of 0 input or 0 output tokens, not kept */
} tr_trace;

/* A format's name -> its id (TR_* for the built-in ones), -1 for any other name. */
int tr_format_from_name(const char *name);
const char *tr_format_name(tr_format f);
/* The format names, comma-separated in the table's order, for messages. */
const char *tr_format_list(void);
int tr_format_count(void);                      /* the rows: ids 0 .. count - 1 */
const tr_format_def *tr_format_get(tr_format f);   /* NULL for an id out of range */
/* Appends a row (copied; its strings must outlive the process's use of it): a test's
 * made-up format, or one read by code outside the tree. Returns its id, or -1 with err
 * (a name taken, a row the reader cannot read, the table full). */
int tr_format_add(const tr_format_def *def, char *err, size_t errlen);

/* Reads file as format f. Returns 0 with *out (free with tr_free), or -1 with err and
 * *out NULL. w may be NULL (every row). */
int tr_read(const char *file, tr_format f, const tr_window *w, tr_trace **out, char *err, size_t errlen);
/* The same from fd, a regular file opened by the caller (cf_open_checked); name names it
 * in messages. fd stays open. */
int tr_read_fd(int fd, const char *name, tr_format f, const tr_window *w, tr_trace **out, char *err, size_t errlen);
/* The same over text[0 .. len); name only names it in messages. */
int tr_parse(const char *name, const char *text, size_t len, tr_format f, const tr_window *w, tr_trace **out,
             char *err, size_t errlen);
void tr_free(tr_trace *t);      /* t may be NULL */

#endif

/* The formats bench writes, one row each (model_write.h: model_writer). Every list of them
 * (the help of bench model convert and synth, the messages, a scenario's model.synth.format)
 * and every rule that differs between them (the dtypes a format holds, whether it shards,
 * where its vocabulary goes, the ending a path takes) is read from these rows.
 *
 * How to add a format: docs/extending.md, "A model format bench writes". */
#include "model_write.h"

#include <stdio.h>
#include <string.h>

/* ---- the writers, with one signature ---- */

static int gguf_write_row(const char *path, const model_write_src *src, uint64_t shard_bytes, char *err, size_t errlen) {
    (void)shard_bytes; /* one file */
    return gguf_write(path, src, err, errlen);
}

static int llama2c_write_row(const char *path, const model_write_src *src, uint64_t shard_bytes, char *err,
                             size_t errlen) {
    (void)shard_bytes; /* one file */
    return llama2c_write(path, src, err, errlen);
}

#define DT(t) (1u << (t))
#define DT_EVERY ((1u << BENCH_DTYPE_COUNT) - 1u)

_Static_assert(BENCH_DTYPE_COUNT < 32, "model_writer.dtypes is a 32-bit mask over bench_dtype");

/* ---- the table ---- */

const model_writer model_writers[] = {
    {.format = MODEL_FORMAT_GGUF, .suffix = ".gguf", .dtypes = DT_EVERY, .can_shard = 0,
     .about = "GGUF v3, the vocabulary inside as tokenizer.ggml.*", .write = gguf_write_row,
     .vocab_path = NULL, .vocab_write = NULL, .lost = NULL},
    {.format = MODEL_FORMAT_SAFETENSORS, .suffix = NULL, .dtypes = DT(BENCH_F32) | DT(BENCH_F16) | DT(BENCH_BF16),
     .can_shard = 1, .about = "a folder of config.json, tokenizer.json, model*.safetensors", .write = safetensors_write,
     .vocab_path = NULL, .vocab_write = NULL, .lost = NULL},
    {.format = MODEL_FORMAT_LLAMA2C, .suffix = ".bin", .dtypes = DT(BENCH_F32), .can_shard = 0,
     .about = "a llama2.c checkpoint, and llama2.c's tokenizer.bin beside it",
     .write = llama2c_write_row, .vocab_path = llama2c_tokenizer_path, .vocab_write = llama2c_write_tokenizer,
     .lost = llama2c_lost},
    {.write = NULL},
};

/* ---- finding a row ---- */

const char *model_writer_name(const model_writer *w) { return model_format_name(w->format); }

const model_writer *model_writer_find(const char *name) {
    if (!name) return NULL;
    for (const model_writer *w = model_writers; w->write; w++)
        if (!strcmp(model_writer_name(w), name)) return w;
    return NULL;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

const model_writer *model_writer_for_path(const char *path) {
    const model_writer *folder = NULL;
    for (const model_writer *w = model_writers; w->write; w++) {
        if (w->suffix && ends_with(path, w->suffix)) return w;
        if (!w->suffix && !folder) folder = w;
    }
    return folder;
}

int model_writer_holds(const model_writer *w, bench_dtype dt) {
    return (unsigned)dt < BENCH_DTYPE_COUNT && (w->dtypes & DT(dt));
}

/* ---- texts ---- */

/* Appends to buf[len] at *used, as snprintf would, truncating. */
static void put(char *buf, size_t len, size_t *used, const char *s) {
    int w = snprintf(buf + *used, *used < len ? len - *used : 0, "%s", s);
    if (w > 0) *used += (size_t)w;
    if (*used >= len && len) *used = len - 1;
}

const char *model_writer_names(char *buf, size_t len, const char *sep) {
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (const model_writer *w = model_writers; w->write; w++) {
        if (w != model_writers) put(buf, len, &used, sep);
        put(buf, len, &used, model_writer_name(w));
    }
    return buf;
}

const char *model_writer_suffix_rule(char *buf, size_t len) {
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (const model_writer *w = model_writers; w->write; w++) {
        if (!w->suffix) continue;
        put(buf, len, &used, w->suffix);
        put(buf, len, &used, " -> ");
        put(buf, len, &used, model_writer_name(w));
        put(buf, len, &used, ", ");
    }
    const model_writer *other = model_writer_for_path("");
    put(buf, len, &used, "else ");
    put(buf, len, &used, other ? model_writer_name(other) : "none");
    return buf;
}

const char *model_writer_dtype_text(const model_writer *w, char *buf, size_t len) {
    int total = 0, n = 0;
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (int t = 0; t < BENCH_DTYPE_COUNT; t++) total += model_writer_holds(w, (bench_dtype)t);
    if (total == BENCH_DTYPE_COUNT) {
        put(buf, len, &used, "every dtype bench reads");
        return buf;
    }
    for (int t = 0; t < BENCH_DTYPE_COUNT; t++) {
        if (!model_writer_holds(w, (bench_dtype)t)) continue;
        if (n) put(buf, len, &used, n + 1 == total ? " and " : ", ");
        put(buf, len, &used, bench_dtype_name((bench_dtype)t));
        n++;
    }
    if (total == 1) put(buf, len, &used, " only");
    return buf;
}

const char *model_writer_refusal(const model_writer *w, bench_dtype dt, char *buf, size_t len) {
    char held[160];
    snprintf(buf, len, "format %s holds %s, not %s", model_writer_name(w), model_writer_dtype_text(w, held, sizeof held),
             bench_dtype_name(dt));
    return buf;
}

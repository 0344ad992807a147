/* Format dispatch: which reader opens a path (by kind of file, suffix and magic), and
 * what model_open adds after any of them (a name, a tokenizer.bin, validation). Kept out of
 * model.c so that the readers, which use model.c's helpers, are not also called by it. */
#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int model_open_vocab(const char *path, model **out, char *err, size_t errlen) {
    *out = NULL;
    model *m = calloc(1, sizeof(*m));
    if (!m) return bench_errf(err, errlen, "%s: out of memory", path);
    struct stat st;
    char tj[4096];
    uint8_t magic[4] = {0};
    int rc;
    if (stat(path, &st)) { bench_errf(err, errlen, "%s: %s", path, strerror(errno)); goto err; }
    if (S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(tj, sizeof(tj), "%s/tokenizer.json", path) >= sizeof(tj)) { bench_errf(err, errlen, "%s: path too long", path); goto err; }
        rc = safetensors_read_tokenizer(tj, m, err, errlen);
    } else if (has_suffix(path, ".json")) {
        rc = safetensors_read_tokenizer(path, m, err, errlen);
    } else {
        int fd = model_open_regular(path, err, errlen);
        if (fd < 0) goto err;
        ssize_t got = pread(fd, magic, 4, 0);
        close(fd);
        if (got == 4 && memcmp(magic, "GGUF", 4) == 0) rc = gguf_open(path, m, err, errlen);
        else rc = model_vocab_load_llama2c(path, 0, &m->vocab, err, errlen);
    }
    if (rc) goto err;
    if (m->vocab.n == 0) { bench_errf(err, errlen, "%s: holds no vocabulary", path); goto err; }
    *out = m;
    return 0;
err:
    model_free(m);
    return -1;
}

int model_open(const char *path, const char *tokenizer_path, model **out, char *err, size_t errlen) {
    *out = NULL;
    model *m = calloc(1, sizeof(*m));
    if (!m) return bench_errf(err, errlen, "%s: out of memory", path);
    struct stat st;
    if (stat(path, &st)) { bench_errf(err, errlen, "%s: %s", path, strerror(errno)); goto err; }
    int rc;
    if (S_ISDIR(st.st_mode) || has_suffix(path, ".safetensors") || has_suffix(path, ".json")) {
        rc = safetensors_open(path, m, err, errlen);
    } else {
        uint8_t magic[4] = {0};
        int fd = model_open_regular(path, err, errlen);
        if (fd < 0) goto err;
        ssize_t got = pread(fd, magic, 4, 0);
        close(fd);
        if (got == 4 && memcmp(magic, "GGUF", 4) == 0) rc = gguf_open(path, m, err, errlen);
        else rc = llama2c_open(path, m, err, errlen);
    }
    if (rc) goto err;
    if (!m->name) {
        const char *base = strrchr(path, '/');
        m->name = strdup(base ? base + 1 : path);
    }
    if (tokenizer_path) {
        model_vocab_free(&m->vocab);
        if (model_vocab_load_llama2c(tokenizer_path, m->cfg.vocab_size, &m->vocab, err, errlen)) goto err;
    }
    /* llama.cpp's vocabulary-only GGUF files: a tokenizer and no weights (model_open_vocab reads them) */
    if (m->format == MODEL_FORMAT_GGUF && !m->n_tensors && m->vocab.n) {
        bench_errf(err, errlen, "%s: a vocabulary-only file (%d tokens, no tensors): it holds no weights to run; "
                   "bench model info and bench tokenize read it, generate and run need a model with weights", path, m->vocab.n);
        goto err;
    }
    if (model_validate(m, err, errlen)) goto err;
    *out = m;
    return 0;
err:
    model_free(m);
    return -1;
}

/* bench tokenize: a vocabulary's ids for a text, with no weights loaded. */
#include "commands.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/core/model/model.h"
#include "engines/core/tokenizer/tokenizer.h"
#include "util/ut_fs.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench tokenize --model FILE (--text TEXT | --file F) [--bos] [--pieces] [--tokenizer-fallback]\n\n"
            "Prints the token ids of the text on one line (stdout), and the tokenizer and count on\n"
            "stderr. Only the vocabulary is read: llama.cpp's vocabulary-only GGUF files work.\n"
            "FILE: a .gguf, a tokenizer.json (or a directory holding one), or a llama2.c tokenizer.bin.\n\n"
            "  --bos        put the vocabulary's BOS id first\n"
            "  --pieces     print each id with the text it decodes to, one per line\n"
            "  --tokenizer-fallback  a tokenizer.ggml.model or .pre bench does not know is tokenized with\n"
            "               the nearest one (SentencePiece, gpt-2's split), with a warning naming what is lost\n\n"
            "example:\n"
            "  bench tokenize --model ../shared/thirdparty/vocab/ggml-vocab-gpt-2.gguf --text \"Hello world\"\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL, *text = NULL, *file = NULL;
    int bos = 0, pieces = 0, fallback = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--model") && v) path = v, i++;
        else if (!strcmp(a, "--text") && v) text = v, i++;
        else if (!strcmp(a, "--file") && v) file = v, i++;
        else if (!strcmp(a, "--bos")) bos = 1;
        else if (!strcmp(a, "--pieces")) pieces = 1;
        else if (!strcmp(a, "--tokenizer-fallback")) fallback = 1;
        else {
            fprintf(stderr, "bench tokenize: unknown or incomplete argument \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!path || (!text) == (!file)) {
        fprintf(stderr, "bench tokenize: expected --model FILE and one of --text or --file\n");
        usage(stderr);
        return 2;
    }
    char err[1024] = "";
    char *buf = NULL;
    if (file) {
        if (!(buf = ut_slurp(file, SIZE_MAX, NULL, err, sizeof(err)))) {
            fprintf(stderr, "bench tokenize: %s: cannot read\n", file);
            return 1;
        }
        text = buf;
    }
    model *m = NULL;
    tokenizer *t = NULL;
    int *ids = NULL, rc = 1;
    if (model_open_vocab(path, &m, err, sizeof(err)) ||
        tokenizer_create_ex(&m->vocab, fallback ? TOKENIZER_FALLBACK : 0, &t, err, sizeof(err))) {
        fprintf(stderr, "bench tokenize: %s\n", err);
        goto out;
    }
    if (tokenizer_warning(t)[0]) fprintf(stderr, "bench tokenize: %s\n", tokenizer_warning(t));
    size_t max = strlen(text) + 2; /* at most one token per byte, and BOS */
    if (max > (size_t)1 << 30 || !(ids = malloc(max * sizeof(*ids)))) {
        fprintf(stderr, "bench tokenize: text too long\n");
        goto out;
    }
    int n = tokenizer_encode(t, text, bos, 0, ids, (int)max, err, sizeof(err));
    if (n < 0) {
        fprintf(stderr, "bench tokenize: %s\n", err);
        goto out;
    }
    char piece[64];
    for (int i = 0; i < n; i++) {
        if (!pieces) {
            printf("%s%d", i ? " " : "", ids[i]);
            continue;
        }
        printf("%d\t\"", ids[i]);
        for (const char *p = tokenizer_decode(t, i ? ids[i - 1] : -1, ids[i], piece, sizeof(piece)); *p; p++) {
            unsigned char c = (unsigned char)*p;
            if (c == '"' || c == '\\') printf("\\%c", c);
            else if (c < 0x20) printf("\\x%02x", c);
            else putchar(c);
        }
        printf("\"\n");
    }
    if (!pieces) printf("\n");
    fprintf(stderr, "bench tokenize: %d tokens (%s, %d in the vocabulary)\n", n, tokenizer_kind(t), tokenizer_vocab_size(t));
    rc = 0;
out:
    free(ids);
    free(buf);
    tokenizer_free(t);
    model_free(m);
    return rc;
}

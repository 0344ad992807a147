/* The safetensors reader (engines/core/model/safetensors.c): a model directory's
 * config.json, the .safetensors JSON header, model.safetensors.index.json and
 * tokenizer.json.
 * Input: FLAGS(1 byte) DATALEN(2 bytes, LE) then parts split at "\n@@\n":
 *   CONFIG, HEADER, INDEX, TOKENIZER.
 * FLAGS bit 0: HEADER is the whole .safetensors file (length prefix included);
 *   otherwise the target writes the 8-byte length, HEADER, and DATALEN zero bytes,
 *   so the fuzzer works on the JSON rather than on matching lengths.
 * FLAGS bit 1: write INDEX as model.safetensors.index.json, the shard being both
 *   model-00001-of-00001.safetensors and model.safetensors.
 * FLAGS bit 2: no tokenizer.json; bit 3: no config.json. */
#include "fuzz/fz.h"
#include "engines/core/model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    unsigned flags = data[0];
    size_t datalen = (size_t)data[1] | (size_t)data[2] << 8;
    const uint8_t *part[4];
    size_t len[4];
    char p[512], err[1024];
    fz_split(data + 3, size - 3, "\n@@\n", part, len, 4);

    if (flags & 8) fz_unlink("config.json");
    else fz_write("config.json", part[0], len[0], p, sizeof(p));
    if (flags & 4) fz_unlink("tokenizer.json");
    else fz_write("tokenizer.json", part[3], len[3], p, sizeof(p));

    uint8_t *st;
    size_t stn;
    if (flags & 1) {
        st = malloc(len[1] ? len[1] : 1);
        if (!st) abort();
        memcpy(st, part[1], len[1]);
        stn = len[1];
    } else {
        stn = 8 + len[1] + datalen;
        st = calloc(1, stn);
        if (!st) abort();
        for (int i = 0; i < 8; i++) st[i] = (uint8_t)((uint64_t)len[1] >> (8 * i));
        memcpy(st + 8, part[1], len[1]);
    }
    fz_write("model.safetensors", st, stn, p, sizeof(p));
    if (flags & 2) {
        fz_write("model-00001-of-00001.safetensors", st, stn, p, sizeof(p));
        fz_write("model.safetensors.index.json", part[2], len[2], p, sizeof(p));
    } else {
        fz_unlink("model-00001-of-00001.safetensors");
        fz_unlink("model.safetensors.index.json");
    }
    free(st);

    model *m = NULL;
    int rc = model_open(fz_dir(), NULL, &m, err, sizeof(err));
    fz_say("safetensors", rc ? err : NULL);
    if (rc == 0) model_free(m);
    else if (!err[0]) abort();
    return 0;
}

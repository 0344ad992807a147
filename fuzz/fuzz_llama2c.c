/* llama2.c checkpoints and tokenizer.bin (engines/core/model/model.c, vocab.c).
 * Input: CHECKPOINT "\n@@tok@@\n" TOKENIZER. With a tokenizer part, model_open
 * loads it against the checkpoint's vocab size; the tokenizer is also read alone
 * (expected_n 0: any count). */
#include "fuzz/fz.h"
#include "engines/core/model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t len[2];
    char mp[512], tp[512], err[1024];
    int n = fz_split(data, size, "\n@@tok@@\n", part, len, 2);
    fz_write("m.bin", part[0], len[0], mp, sizeof(mp));
    if (n > 1) fz_write("tokenizer.bin", part[1], len[1], tp, sizeof(tp));
    model *m = NULL;
    int rc = model_open(mp, n > 1 ? tp : NULL, &m, err, sizeof(err));
    fz_say("llama2c", rc ? err : NULL);
    if (rc == 0) model_free(m);
    else if (!err[0]) abort();
    if (n > 1) {
        model_vocab v = {0};
        err[0] = 0;
        if (model_vocab_load_llama2c(tp, 0, &v, err, sizeof(err)) != 0 && !err[0]) abort();
        model_vocab_free(&v);
    }
    return 0;
}

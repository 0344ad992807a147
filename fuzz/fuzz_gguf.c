/* GGUF header, metadata and tensor infos (engines/core/model/gguf.c), through
 * model_open as `bench` opens a model: dispatch, parse, model_validate. */
#include "fuzz/fz.h"
#include "engines/core/model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512], err[1024];
    model *m = NULL;
    fz_write("m.gguf", data, size, path, sizeof(path));
    int rc = model_open(path, NULL, &m, err, sizeof(err));
    fz_say("gguf", rc ? err : NULL);
    if (rc == 0) {
        (void)model_weight_bytes(m);
        (void)model_param_count(m);
        model_free(m);
    } else if (!err[0]) {
        abort(); /* a failure must say why */
    }
    return 0;
}

/* Scenario files (harness/spec/scenario.c): parse and validate, as `bench run`
 * does before anything runs. Modules are looked up in FUZZ_MODULE_DIR (default
 * build/modules: the release build's, which `make fuzz` builds first). */
#include "fuzz/fz.h"
#include "harness/spec/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *md = getenv("FUZZ_MODULE_DIR");
    char *text = fz_strndup(data, size);
    scenario *s = NULL;
    sc_errors errs = {0};
    int rc = sc_parse("fuzz.json", text, md ? md : "build/modules", &s, &errs);
    fz_say("scenario", rc ? errs.v[0] : NULL);
    if (rc == 0) sc_free(s);
    else if (errs.n == 0) abort(); /* a rejected file must say why */
    sc_errors_free(&errs);
    free(text);
    return 0;
}

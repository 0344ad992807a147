/* The results reader behind `bench compare` and `bench history`
 * (harness/report/resread.c), and the comparison of the document with itself
 * (harness/report/compare.c): every series and summary read goes through it. */
#include "fuzz/fz.h"
#include "harness/report/compare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512], err[1024];
    fz_write("results.json", data, size, path, sizeof(path));
    rr_doc d = {0};
    int rc = rr_load(path, &d, err, sizeof(err));
    fz_say("results", rc ? err : NULL);
    if (rc != 0) {
        if (!err[0]) abort();
        return 0;
    }
    cmp_opts o = {.threshold = 0.05};
    cmp_report rep = {0};
    if (cmp_docs(&d, &d, &o, &rep, err, sizeof(err)) == 0) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            cmp_print(null, &rep, CMP_FMT_JSON, 0, &o);
            cmp_print(null, &rep, CMP_FMT_TABLE, 0, &o);
            fclose(null);
        }
    }
    cmp_report_free(&rep);
    rr_free(&d);
    return 0;
}

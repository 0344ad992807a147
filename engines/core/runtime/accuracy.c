#include "accuracy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

engine_spec acc_reference_spec(const engine_spec *variant) {
    engine_spec r = *variant;
    if (r.device && strcmp(r.device, "cpu")) {
        /* a device's own f32 path is not the exact reference: on cuda, prefill puts f16 and
         * bf16 weights through cuBLAS with 16-bit inputs. The CPU's modules by default: the
         * device's (pinned, vmm) and their options are not the CPU's, and on the CPU every
         * loader and kv module gives the same logits. */
        r.device = NULL;
        r.device_opts = (bench_opts){0};
        r.loader = r.kv = r.alloc = NULL;
        r.loader_opts = r.kv_opts = r.alloc_opts = (bench_opts){0};
        r.kv_budget_bytes = r.kv_budget_tokens = 0;
    }
    r.kernels = "auto";
    r.numerics = ENGINE_NUMERICS_EXACT;     /* the reference never rounds x */
    r.kv_k_type = r.kv_v_type = BENCH_F32;
    r.llama_numerics = 0;
    r.trace_alloc = NULL;
    r.on_region = NULL;
    r.region_user = NULL;
    return r;
}

int acc_logits(const engine_spec *spec, const char *who, int *ids, int n_prompt, int generate, int teacher,
               float **logits_out, int *vocab_out, char *err, size_t errlen) {
    engine *e = NULL;
    char e1[768];
    *logits_out = NULL;
    int rc = engine_create(spec, &e, e1, sizeof(e1));
    if (rc) return bench_errc(err, errlen, -rc, "%s: %s", who, e1);
    int vocab = engine_model(e)->cfg.vocab_size, n = n_prompt + generate - 1;
    if (*vocab_out && *vocab_out != vocab) {
        engine_destroy(e);
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "%s: vocabulary of %d, the other engine's %d", who, vocab, *vocab_out);
    }
    *vocab_out = vocab;
    float *logits = malloc((size_t)n * (size_t)vocab * sizeof(float));
    if (!logits) {
        engine_destroy(e);
        return bench_errc(err, errlen, BENCH_ERR_NOMEM, "%s: out of memory for %d x %d logits", who, n, vocab);
    }
    if ((rc = engine_forward_all(e, 0, ids, n_prompt, 0, logits, e1, sizeof(e1)))) goto fail;
    for (int k = 0; k < generate - 1; k++) {
        int pos = n_prompt + k;
        if (!teacher) ids[pos] = acc_argmax(logits + (size_t)(pos - 1) * vocab, vocab);
        float *l;
        if ((rc = engine_forward(e, 0, &ids[pos], 1, pos, &l, e1, sizeof(e1)))) goto fail;
        memcpy(logits + (size_t)pos * vocab, l, (size_t)vocab * sizeof(float));
    }
    engine_destroy(e);
    *logits_out = logits;
    return 0;
fail:
    engine_destroy(e);
    free(logits);
    return bench_errc(err, errlen, -rc, "%s: %s", who, e1);
}

int acc_measure(const engine_spec *variant, const engine_spec *reference, const int *prompt, int n_prompt, int generate,
                acc_figures *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    if (n_prompt < 1 || generate < 1)
        return bench_errc(err, errlen, BENCH_ERR_INVALID, "accuracy: a prompt of %d and %d generated: expected 1 or more of each",
                          n_prompt, generate);
    /* positions 0 .. n_prompt + generate - 2 carry a token; the last decode step's logits
     * are those of position n - 1 */
    int n = n_prompt + generate - 1, vocab = 0;
    int *ids = malloc((size_t)(n + 1) * sizeof(int));
    if (!ids) return bench_errc(err, errlen, BENCH_ERR_NOMEM, "accuracy: out of memory");
    memcpy(ids, prompt, (size_t)n_prompt * sizeof(int));
    float *ref = NULL, *var = NULL;
    /* the reference first, alone: its tokens and logits; then the variant on those tokens */
    int rc = acc_logits(reference, "accuracy reference", ids, n_prompt, generate, 0, &ref, &vocab, err, errlen);
    if (!rc) rc = acc_logits(variant, "accuracy variant", ids, n_prompt, generate, 1, &var, &vocab, err, errlen);
    if (!rc) acc_compare(ref, var, n, vocab, out);
    free(ids);
    free(ref);
    free(var);
    return rc;
}

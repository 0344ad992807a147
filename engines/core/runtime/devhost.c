#include "devhost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modreg.h"

struct devhost {
    modreg_entry mod;
    const struct bench_device_iface *iface;
    void *ctx;
    char *name;
    int sample_failed;          /* the device's sampler failed once: the host samples from then on */
};

int devhost_open(const char *module_dir, const char *name, const bench_opts *opts, devhost **out, void **stream,
                 char *err, size_t errlen) {
    *out = NULL;
    *stream = NULL;
    devhost *d = calloc(1, sizeof(*d));
    if (!d || !(d->name = strdup(name))) {
        free(d);
        return bench_errf(err, errlen, "out of memory");
    }
    char e[768];
    int lrc = modreg_load(module_dir, "device", name, &d->mod, e, sizeof(e));
    if (lrc && lrc != -BENCH_ERR_NOTFOUND) {
        /* the module is there but refused (its interface version, a broken file): say why */
        bench_errf(err, errlen, "%s", e);
        goto fail;
    }
    if (!d->mod.mod) {
        char *dir = modreg_default_dir(module_dir), *have = modreg_names(dir, "device");
        if (have && *have)
            bench_errf(err, errlen, "unknown device \"%s\" (have: cpu, %s)", name, have);
        else
            bench_errf(err, errlen, "device \"%s\" is not built here: no device_%s.so in %s (make builds the CUDA modules "
                       "where nvcc is on the PATH)", name, name, dir ? dir : "?");
        free(dir);
        free(have);
        goto fail;
    }
    d->iface = d->mod.mod->iface;
    if (d->iface->probe ? !d->iface->probe(e, sizeof(e)) : (d->mod.mod->score && !d->mod.mod->score())) {
        bench_errf(err, errlen, "device %s: %s", name, d->iface->probe ? e : "not usable on this machine");
        goto fail;
    }
    void *filled = NULL;
    if (modreg_fill_opts(d->mod.mod, opts, &filled, err, errlen)) goto fail;
    int rc = d->iface->create(filled, &d->ctx, stream, err, errlen);
    free(filled);  /* a device reads its options at create and keeps none of the struct */
    if (rc) goto fail;
    *out = d;
    return 0;
fail:
    devhost_close(d);
    return -1;
}

int devhost_bind(devhost *d, const model_config *c, const tf_weights *w, int max_pos, const bench_kv *kv, char *err,
                 size_t errlen) {
    /* tf_weights' matrices and layers are the device ABI's types (transformer.h): no copy */
    bench_dev_model m = {.dim = c->dim, .hidden_dim = c->hidden_dim, .n_layers = c->n_layers, .n_heads = c->n_heads,
                         .n_kv_heads = c->n_kv_heads, .vocab_size = c->vocab_size, .max_pos = max_pos,
                         .rope_theta = c->rope_theta, .norm_eps = c->norm_eps, .rope_half = c->rope == ROPE_HALF,
                         .tok_embd = w->tok_embd, .output = w->output, .out_norm = w->out_norm,
                         .layers = w->layers, .kv = kv};
    return d->iface->bind(d->ctx, &m, err, errlen);
}

int devhost_forward(devhost *d, int seq, const int *tokens, int n, int pos0, float *logits, int n_out, char *err,
                    size_t errlen) {
    return d->iface->forward(d->ctx, seq, tokens, n, pos0, logits, n_out, err, errlen);
}

int devhost_sample(devhost *d, sampler *s, int *token) {
    if (!d->iface->sample || d->sample_failed) return -1;
    float t = sampler_temperature(s), coin = t > 0 ? sampler_next_coin(s) : 0.0f;
    char err[512];
    if (d->iface->sample(d->ctx, t, sampler_topp(s), coin, token, err, sizeof(err))) {
        fprintf(stderr, "bench: %s; sampling on the host from now on\n", err);
        d->sample_failed = 1;
        return -1;
    }
    return 0;
}

double devhost_bandwidth(devhost *d, size_t bytes_per_array, int reps) {
    return d->iface->bandwidth ? d->iface->bandwidth(d->ctx, bytes_per_array, reps) : 0;
}

void devhost_counters(const devhost *d, const bench_counter_sink *sink) {
    if (d->iface->counters) d->iface->counters(d->ctx, sink);
}

const char *devhost_name(const devhost *d) { return d->name; }

void devhost_close(devhost *d) {
    if (!d) return;
    if (d->iface && d->ctx) d->iface->destroy(d->ctx);
    modreg_entry_close(&d->mod);
    free(d->name);
    free(d);
}

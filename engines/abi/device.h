/* Family "device": an accelerator that runs the forward pass. Version BENCH_DEVICE_IFACE_VERSION.
 *
 * The CPU is no module: the core's own forward pass (engines/core/compute/transformer.c) runs
 * there. A device module `device_<name>.so` owns what the forward pass needs on its
 * device: a context and a stream, the kernels, scratch memory, and the device's own
 * measurements (memory in use, event timings, kernel time shares), which it reports
 * as counters. The loader and KV modules the engine runs with are those built for the
 * device (<dir>/<name>/<family>_<name>.so, see module.h): they receive the device's
 * stream in bench_host.stream and deal in device pointers.
 *
 * Order of calls (engines/core/runtime/devhost.c):
 *   probe -> create -> [loader open + load, kv create, with host.stream = create's stream]
 *         -> bind -> { forward, sample }* -> counters -> destroy (after the loader and KV
 *            modules are closed: their device memory goes first)
 */
#ifndef BENCH_DEVICE_H
#define BENCH_DEVICE_H

#include "module.h"
#include "dtype.h"
#include "kv.h"

/* Version 3: bench_dev_model.kv is the engine's KV instance (a bench_kv handle, kv.h), not
 * a vtable and a context of its own. Version 2 (module API 2): create takes the module's
 * filled options struct. A module of another version is refused at load (modreg.c). */
#define BENCH_DEVICE_IFACE_VERSION 3u

/* A weight matrix, row-major (rows, cols), in its stored dtype, where the loader put it: in
 * device memory for a device module, in host memory for the CPU's forward pass, which
 * describes its weights with these same types (engines/core/compute/transformer.h). */
typedef struct bench_dev_matrix {
    const void *data;
    bench_dtype dtype;
    int rows, cols;
} bench_dev_matrix;

typedef struct bench_dev_layer {
    const float *attn_norm;         /* (dim) f32 */
    const float *ffn_norm;          /* (dim) f32 */
    bench_dev_matrix wq;            /* (n_heads*hd, dim) */
    bench_dev_matrix wk, wv;        /* (n_kv_heads*hd, dim) */
    bench_dev_matrix wo;            /* (dim, n_heads*hd) */
    bench_dev_matrix w1, w3;        /* (hidden, dim) gate, up */
    bench_dev_matrix w2;            /* (dim, hidden) down */
} bench_dev_layer;

/* The model as the device runs it: the core's description (engines/core/model/model.h) with
 * every tensor already bound to the loader's device pointers. */
typedef struct bench_dev_model {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size;
    int max_pos;                    /* positions of one sequence the KV module holds */
    float rope_theta, norm_eps;
    int rope_half;                  /* 0: pairs (2i, 2i+1) of a head (llama2.c, GGUF); 1: (i, i + hd/2) (HF) */
    bench_dev_matrix tok_embd;      /* (vocab, dim) */
    bench_dev_matrix output;        /* (vocab, dim); tok_embd's when the classifier is tied */
    const float *out_norm;          /* (dim) f32 */
    const bench_dev_layer *layers;  /* (n_layers), a host array: copy what is kept past bind */
    /* the engine's instance of the KV module built for this device: the handle is the
     * engine's (it lives until the engine goes, after the device's last forward pass) */
    const bench_kv *kv;
} bench_dev_model;

struct bench_device_iface {
    uint32_t version;   /* BENCH_DEVICE_IFACE_VERSION */
    /* 1 when the device can run here; 0 with why not in err ("no CUDA device: ..."). */
    int  (*probe)(char *err, size_t errlen);
    /* Takes the device, makes the stream the loader, KV and forward pass share (*stream). */
    int  (*create)(const void *opts, void **ctx, void **stream, char *err, size_t errlen);
    /* Keeps m (the weights stay the loader's) and sizes what the forward pass needs. */
    int  (*bind)(void *ctx, const bench_dev_model *m, char *err, size_t errlen);
    /* As tf_forward (engines/core/compute/transformer.h): tokens (n) at positions pos0.. of sequence
     * seq, host arrays in and out; logits (n_out, vocab) of the last n_out positions. Returns
     * when the logits are on the host. The KV room is reserved. */
    int  (*forward)(void *ctx, int seq, const int *tokens, int n, int pos0, float *logits, int n_out,
                    char *err, size_t errlen);
    /* (optional) The next token from the last logits row of the last forward, drawn on the
     * device as engines/core/runtime/sampler.c draws it: temperature 0 is the first index of the
     * maximum; else softmax(logits / temperature), the top-p nucleus, and coin in [0, 1).
     * Default: the engine samples the host's copy of the logits. */
    int  (*sample)(void *ctx, float temperature, float topp, float coin, int *token, char *err, size_t errlen);
    /* (optional) Bytes per second of device memory: a triad over 3 arrays of bytes_per_array
     * (0: the module's default), best of reps, counting 3 arrays of traffic. 0 when it fails. */
    double (*bandwidth)(void *ctx, size_t bytes_per_array, int reps);
    /* (optional) memory in use, event timings, kernel time shares ... */
    void (*counters)(void *ctx, const bench_counter_sink *sink);
    void (*destroy)(void *ctx);     /* ctx may be NULL */
};

#endif

/* The engine's side of a device module (engines/abi/device.h): finds and opens
 * device_<name>.so, checks that the device is there, hands it the weights as the
 * loader placed them on it, and passes the engine's forward passes, draws and counter
 * requests on. The core's only contact with a device: engine_create reads
 * engine_spec.device once and, off the CPU, runs everything through here. */
#ifndef BENCH_DEVHOST_H
#define BENCH_DEVHOST_H

#include "engines/abi/device.h"
#include "engines/core/model/model.h"
#include "sampler.h"
#include "engines/core/compute/transformer.h"

typedef struct devhost devhost;

/* Opens device `name` from the module directory (NULL: modreg's default), checks its
 * options and that it can run here, and creates it; *stream is what the device's loader
 * and KV modules queue on (bench_host.stream). Errors say what to do: "device "cuda" is
 * not built here ...", "device cuda: no CUDA device: ...". */
int devhost_open(const char *module_dir, const char *name, const bench_opts *opts, devhost **out, void **stream,
                 char *err, size_t errlen);
/* The model as tf_bind bound it to the loader's device pointers (its layers are the device
 * ABI's bench_dev_layer, handed over as they are), and the engine's KV instance, which must
 * outlive the device's forward passes. */
int devhost_bind(devhost *d, const model_config *c, const tf_weights *w, int max_pos, const bench_kv *kv, char *err,
                 size_t errlen);
/* As tf_forward; the logits land on the host. */
int devhost_forward(devhost *d, int seq, const int *tokens, int n, int pos0, float *logits, int n_out, char *err,
                    size_t errlen);
/* The next token drawn on the device from the last pass's last logits, with s's temperature,
 * top-p and next coin; -1 when the device does not sample (the caller samples on the host). */
int devhost_sample(devhost *d, sampler *s, int *token);
double devhost_bandwidth(devhost *d, size_t bytes_per_array, int reps);
void devhost_counters(const devhost *d, const bench_counter_sink *sink);
const char *devhost_name(const devhost *d);
void devhost_close(devhost *d);     /* d may be NULL; after the loader and KV modules are closed */

#endif

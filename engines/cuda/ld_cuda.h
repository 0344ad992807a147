/* What the CUDA loaders share (loader "pread", "pinned", "mmap" built for cuda): the
 * weights' device region (one cudaMalloc; tensors at 256-byte aligned offsets in list
 * order, host/staging.h), the model files, and the counters each reports:
 *   load_ms        from load()'s start until every byte is on the device
 *   h2d_bytes      bytes copied host to device (the tensors)
 *   h2d_gb_s       h2d_bytes / load_ms: the rate the loader achieves, reads included
 *   pinned_bytes   page-locked host memory it used (staging slab, or registered mappings)
 * plus bytes_read, read_ms, device_bytes and what is particular to each. */
#ifndef BENCH_CUDA_LD_H
#define BENCH_CUDA_LD_H

#include "engines/abi/loader.h"
#include "engines/cuda/host/staging.h"

#define LDC_ALIGN 256   /* B: each tensor's device offset; 16-byte vector loads need 16 */

typedef struct ldc {
    const char *mod;            /* "loader pread", ... for messages */
    const bench_host *host;     /* its log (bench_logf) */
    void *stream;               /* the device's cudaStream_t */
    void *dev;                  /* (dev_bytes) the weights on the device */
    uint64_t dev_bytes;
    uint64_t *dst;              /* (n) each tensor's offset in dev */
    int *fds;                   /* (n_files) -1 when not open */
    uint64_t *file_bytes;       /* (n_files) */
    int n_files;
    uint64_t t0_ns, load_ns, read_ns;
    uint64_t bytes_read, read_calls, h2d_bytes, pinned_bytes;
} ldc;

/* Checks the host gives a stream (the module runs only with the cuda device). */
int ldc_init(ldc *c, const char *mod, const bench_host *host, char *err, size_t errlen);

/* Starts a load: the clock, the files (opened, and checked to hold every tensor), the
 * device region, and data[i] = the device address of tensor i. */
int ldc_begin(ldc *c, const char *const *files, int n_files, const bench_tensor_ref *t, int n, const void **data,
              char *err, size_t errlen);

/* The tensors as staging pieces (file range -> device offset) for stg_plan_make. (n) */
stg_piece *ldc_pieces(const ldc *c, const bench_tensor_ref *t, int n);

/* pread of [off, off + len) of file f into buf, with the read counters. */
int ldc_read(ldc *c, int f, const char *path, void *buf, uint64_t off, size_t len, char *err, size_t errlen);

/* Ends a load: waits for the stream, closes the files, stops the clock. */
int ldc_end(ldc *c, char *err, size_t errlen);

void ldc_counters(const ldc *c, const bench_counter_sink *s);
void ldc_close(ldc *c);         /* frees the device region; c may be zeroed */

#endif

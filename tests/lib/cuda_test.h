/* What the CUDA tests need to know first: is the CUDA device module built, and is there a
 * GPU it can use. Asked through the module (dlopen), so that no test binary links the
 * CUDA runtime and a build without nvcc still builds and runs them. */
#ifndef BENCH_CUDA_TEST_H
#define BENCH_CUDA_TEST_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engines/abi/device.h"
#include "engines/core/runtime/modreg.h"
#include "tests/lib/testutil.h"

enum { CT_NOT_BUILT, CT_NO_GPU, CT_GPU };

/* The state, and in why (may be NULL) a line that says it. */
static inline int ct_state(char *why, size_t n) {
    char path[1024], err[768];
    snprintf(path, sizeof(path), "%s/device_cuda.so", tu_module_dir());
    if (access(path, R_OK) != 0) {
        if (why) snprintf(why, n, "%.500s is not built (no nvcc, or CUDA=0)", path);
        return CT_NOT_BUILT;
    }
    modreg_entry e;
    if (modreg_load(tu_module_dir(), "device", "cuda", &e, err, sizeof(err))) {
        if (why) snprintf(why, n, "%.300s does not load: %.400s", path, err);
        return CT_NOT_BUILT;
    }
    const struct bench_device_iface *d = e.mod->iface;
    int usable = d->probe(err, sizeof(err));
    if (why) snprintf(why, n, "%s", usable ? "a CUDA GPU is there" : err);
    modreg_entry_close(&e);
    return usable ? CT_GPU : CT_NO_GPU;
}

#endif

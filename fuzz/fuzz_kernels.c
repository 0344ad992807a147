/* libFuzzer entry point: fzt_kernels in fuzz/targets.h says what is fuzzed and how the input is laid out. */
#include "fuzz/targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    if (fzt_kernels(data, size, err, sizeof(err))) abort(); /* a family outside its bound */
    return 0;
}

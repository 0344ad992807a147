/* libFuzzer entry point: fzt_prom in fuzz/targets.h says what is fuzzed and how the input is laid out. */
#include "fuzz/targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fzt_prom(data, size, NULL, 0)) abort(); /* rejected without a message */
    return 0;
}

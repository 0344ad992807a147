/* libFuzzer entry point: fzt_scenario in fuzz/targets.h. Modules are looked up in
 * FUZZ_MODULE_DIR (make fuzz and fuzz/run_cpu.sh give build/fuzz/modules: the release build's CPU modules). */
#include "fuzz/targets.h"
#include "harness/cli/kinds.h"

/* the workload kinds (engine, allocators), as main() hands them to the spec layer */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    bench_kinds_use();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *md = getenv("FUZZ_MODULE_DIR");
    if (fzt_scenario(data, size, md ? md : "build/modules", NULL, 0)) abort(); /* rejected without a message */
    return 0;
}

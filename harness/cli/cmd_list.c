/* bench list: every module found, with family, devices and options. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "engines/core/compute/kernels.h"
#include "engines/core/runtime/modreg.h"

int cmd_list(int argc, char **argv) {
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench list [--modules DIR]\n\n"
                   "Lists every engine module found (default: $BENCH_MODULE_PATH, else modules/ beside the bench binary,\n"
                   "and a device's modules in the directory of its name there, e.g. modules/cuda/), with its family,\n"
                   "devices and options (name, type, default). A module that cannot run on this machine (a CUDA\n"
                   "module without a GPU) is marked \"not usable here\".\n");
            return 0;
        } else if (!strcmp(argv[i], "--modules") && i + 1 < argc) {
            dir = argv[++i];
        } else {
            fprintf(stderr, "bench list: unknown argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    modreg r;
    char warn[4096], err[512];
    if (modreg_open_all(dir, &r, warn, sizeof(warn), err, sizeof(err))) {
        fprintf(stderr, "bench list: %s\n", err);
        modreg_close(&r);
        return 1;
    }
    if (warn[0]) fprintf(stderr, "%s", warn);
    static const char *families[] = {"loader", "kv", "alloc", "device", NULL};
    printf("modules in %s\n", r.dir);
    for (const char **f = families; *f; f++) {
        printf("\n%s:\n", *f);
        if (!strcmp(*f, "device")) printf("  %-10s %s  [devices: cpu]\n", "cpu", "the core's own forward pass (built in, the default)");
        for (int i = 0; i < r.n; i++) {
            const bench_module *m = r.v[i].mod;
            if (strcmp(m->family, *f)) continue;
            int usable = !m->score || m->score() > 0;
            printf("  %-10s %s  [devices: %s]%s\n", m->name, m->summary, m->devices ? m->devices : "cpu",
                   usable ? "" : "  (not usable here)");
            for (const bench_option_desc *o = m->options; o && o->name; o++)
                printf("      %-15s %-22s default %-6s %s\n", o->name, o->type, o->def, o->help);
        }
    }
    /* the kernels are built in, not modules, but are chosen the same way (--kernels, a scenario axis) */
    printf("\nkernels (CPU, built in; auto: the first exact one this CPU runs; the int8 and bf16 ones round x and run only when named):\n");
    for (int i = 0; i < kn_isa_count(); i++) {
        int here = 0;
        const char *name = kn_isa_name(i, &here);
        printf("  %-12s %s\n", name, here ? (strcmp(name, kn_isa_resolve("auto")) ? "runs here" : "runs here (auto)")
                                          : "(not on this CPU)");
    }
    modreg_close(&r);
    return 0;
}

/* An investigation, not part of the test suite: why glibc with mallopt(M_MMAP_THRESHOLD,
 * 32 MiB) and mallopt(M_TRIM_THRESHOLD, 64 MiB) (the "libc-tuned" allocator of
 * scenarios/allocators.json) grows its heap while replaying the forward-pass trace.
 *
 *   make tools
 *   build/tools/investigate_glibc_memalign scenarios/traces/llama-110m-p128-d32.trace [ROUNDS] [--malloc-info]
 *   GLIBC_TUNABLES=glibc.malloc.tcache_count=0 build/tools/investigate_glibc_memalign ...   (tcache off)
 *
 * Replays the trace's allocs (posix_memalign with the recorded alignment, as the libc
 * module does) and frees ROUNDS times (default 20), writing one byte per 4 KiB of each
 * block as the allocator workload does (touch: pages), and prints per round: minor
 * faults, RSS, and glibc's own view (mallinfo2: heap size, free bytes, top chunk, free
 * chunks); --malloc-info adds malloc_info's free-chunk sizes after each round.
 * Measurements go to stdout; errors to stderr. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum { MAX_OPS = 4096 };

typedef struct trace_op {
    char kind;       /* 'a' alloc, 'f' free */
    unsigned id;
    size_t size;     /* B, alloc */
    size_t align;    /* B, alloc */
} trace_op;

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * 4;
}

static long minflt(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TRACE [ROUNDS] [--malloc-info]\n", argv[0]);
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 20, info = argc > 3 && !strcmp(argv[3], "--malloc-info");
    static trace_op ops[MAX_OPS];
    static void *slot[MAX_OPS];
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    char line[256];
    int n = 0;
    while (n < MAX_OPS && fgets(line, sizeof(line), f)) {
        trace_op *o = &ops[n];
        if (line[0] == 'a' && sscanf(line, "a %u %zu %zu", &o->id, &o->size, &o->align) == 3 && o->id < MAX_OPS) o->kind = 'a', n++;
        else if (line[0] == 'f' && sscanf(line, "f %u", &o->id) == 1 && o->id < MAX_OPS) o->kind = 'f', n++;
    }
    fclose(f);
    /* the libc-tuned options */
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    printf("round  faults  rss_KiB    heap_B(arena)  free_B(fordblks)  top_B(keepcost)  free_chunks(ordblks)\n");
    for (int r = 0; r < rounds; r++) {
        long f0 = minflt();
        for (int i = 0; i < n; i++) {
            trace_op *o = &ops[i];
            if (o->kind == 'f') {
                free(slot[o->id]);
                slot[o->id] = NULL;
                continue;
            }
            void *p = NULL;
            if (posix_memalign(&p, o->align < sizeof(void *) ? sizeof(void *) : o->align, o->size)) {
                fprintf(stderr, "posix_memalign(%zu, %zu) failed\n", o->align, o->size);
                return 1;
            }
            for (size_t off = 0; off < o->size; off += 4096) ((volatile char *)p)[off] = 1;
            slot[o->id] = p;
        }
        struct mallinfo2 mi = mallinfo2();
        printf("%5d  %6ld  %7ld  %13zu  %16zu  %15zu  %20zu\n", r, minflt() - f0, rss_kib(), mi.arena, mi.fordblks,
               mi.keepcost, mi.ordblks);
        if (info) malloc_info(0, stdout);
    }
    return 0;
}

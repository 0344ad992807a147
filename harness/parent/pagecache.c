#include "pagecache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/abi/module.h"

int pc_evict(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bench_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    /* dirty pages are not dropped by DONTNEED: write them back first */
    if (fdatasync(fd) && errno != EINVAL) {
        int e = errno;
        close(fd);
        return bench_errf(err, errlen, "%s: fdatasync: %s", path, strerror(e));
    }
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    if (rc) return bench_errf(err, errlen, "%s: posix_fadvise(DONTNEED): %s", path, strerror(rc));
    return 0;
}

int pc_warm(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bench_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    size_t len = 1u << 20;
    char *buf = malloc(len);
    if (!buf) {
        close(fd);
        return bench_errf(err, errlen, "out of memory");
    }
    ssize_t r;
    while ((r = read(fd, buf, len)) != 0) {
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return bench_errf(err, errlen, "%s: read: %s", path, strerror(e));
        }
    }
    free(buf);
    close(fd);
    return 0;
}

int pc_warm_reread(const char *path, char *err, size_t errlen) {
    return pc_evict(path, err, errlen) || pc_warm(path, err, errlen) ? -1 : 0;
}

int pc_residency(const char *path, uint64_t *resident, uint64_t *total, char *err, size_t errlen) {
    *resident = *total = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bench_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return bench_errf(err, errlen, "%s: fstat: %s", path, strerror(e));
    }
    if (st.st_size == 0) {
        close(fd);
        return 0;
    }
    long pg = sysconf(_SC_PAGESIZE);
    size_t len = (size_t)st.st_size, pages = (len + (size_t)pg - 1) / (size_t)pg;
    /* mapping the file does not read it: mincore only looks at the page cache */
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return bench_errf(err, errlen, "%s: mmap: %s", path, strerror(errno));
    unsigned char *vec = malloc(pages);
    if (!vec) {
        munmap(m, len);
        return bench_errf(err, errlen, "out of memory");
    }
    int rc = mincore(m, len, vec);
    int e = errno;
    munmap(m, len);
    if (rc) {
        free(vec);
        return bench_errf(err, errlen, "%s: mincore: %s", path, strerror(e));
    }
    for (size_t i = 0; i < pages; i++) *resident += vec[i] & 1;
    *total = pages;
    free(vec);
    return 0;
}

#include "ut_fs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ut_buf.h"

int ut_mkdirs(const char *path) {
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}

char *ut_slurp(const char *path, size_t max, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        errno = e;
        return NULL;
    }
    char *p = ut_slurp_file(f, path, max, len, err, errlen);
    int e = errno;
    fclose(f);
    errno = e;
    return p;
}

char *ut_slurp_file(FILE *f, const char *name, size_t max, size_t *len, char *err, size_t errlen) {
    /* read to the end rather than trust st_size: pipes and /proc files report 0. The buffer
     * starts small (a few KiB: scenario and spec files) and doubles. */
    ut_buf b = {0};
    int e = 0;
    for (;;) {
        if (b.len > max) {
            snprintf(err, errlen, "%s: larger than %zu bytes", name, max);
            e = EFBIG;
            goto fail;
        }
        if (ut_buf_reserve(&b, b.len + 4096 + 1)) {
            snprintf(err, errlen, "%s: out of memory", name);
            e = ENOMEM;
            goto fail;
        }
        size_t got = fread(b.p + b.len, 1, b.cap - b.len - 1, f);
        b.len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error", name);
        e = EIO;
        goto fail;
    }
    b.p[b.len] = 0;
    if (len) *len = b.len;
    return b.p;
fail:
    ut_buf_free(&b);
    errno = e;
    return NULL;
}

#include "ut_vec.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t ut_vec_next_cap(size_t cap, size_t need) {
    size_t c = cap ? cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2) return 0;
        c *= 2;
    }
    return c;
}

int ut_vec_resize(void *pp, size_t n, size_t elem) {
    if (elem && n > SIZE_MAX / elem) return -1;
    void *p;
    memcpy(&p, pp, sizeof(p));      /* pp is a T **: read through memcpy, not a void ** */
    size_t bytes = n * elem;
    void *np = realloc(p, bytes ? bytes : 1);
    if (!np) return -1;
    memcpy(pp, &np, sizeof(np));
    return 0;
}

int ut_vec_reserve_par(int *cap, size_t need, size_t k, void *const pp[], const size_t elem[]) {
    if (need <= (size_t)(*cap > 0 ? *cap : 0)) return 0;
    size_t nc = ut_vec_next_cap((size_t)(*cap > 0 ? *cap : 0), need);
    if (!nc || nc > INT_MAX) return -1;
    for (size_t i = 0; i < k; i++)
        if (ut_vec_resize(pp[i], nc, elem[i])) return -1;
    *cap = (int)nc;
    return 0;
}

int ut_vec_reserve_(void *pp, size_t elem, void *cap, size_t cap_size, size_t need) {
    size_t old;
    if (cap_size == sizeof(int)) {
        int c;
        memcpy(&c, cap, sizeof(c));
        old = c > 0 ? (size_t)c : 0;
    } else {
        memcpy(&old, cap, sizeof(old));
    }
    size_t nc = ut_vec_next_cap(old, need);
    if (!nc || (cap_size == sizeof(int) && nc > INT_MAX) || ut_vec_resize(pp, nc, elem)) return -1;
    if (cap_size == sizeof(int)) {
        int c = (int)nc;
        memcpy(cap, &c, sizeof(c));
    } else {
        memcpy(cap, &nc, sizeof(nc));
    }
    return 0;
}

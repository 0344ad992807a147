/* Growth of a typed array: one doubling rule instead of a hand-written block per array.
 *
 *     double *v = NULL; int n = 0, cap = 0;
 *     if (UT_VEC_RESERVE(v, cap, n + 1)) return -1;   // v and cap untouched on failure
 *     v[n++] = x;
 *
 * cap may be any integer type of 4 or 8 bytes (the structs of bench use int and size_t);
 * a capacity that would not fit it is a failure, like out of memory. A macro: p, cap and
 * need are evaluated more than once, so they must have no side effects. Parallel arrays with one
 * count grow together with ut_vec_reserve_par. */
#ifndef UT_VEC_H
#define UT_VEC_H

#include <stddef.h>

/* The capacity to grow to for need elements from cap: doubling, from 16; 0 on overflow. */
size_t ut_vec_next_cap(size_t cap, size_t need);
/* *(T **)pp resized to n elements of elem bytes (realloc, with the product checked).
 * 0, or -1 with the array untouched. */
int ut_vec_resize(void *pp, size_t n, size_t elem);
/* Parallel arrays of one count (k of them: pp[i] is a T_i **, elem[i] its sizeof) grown
 * together for need elements; *cap moves only when every one has grown, so a failure halfway
 * leaves some arrays larger than *cap, never smaller. 0 or -1. */
int ut_vec_reserve_par(int *cap, size_t need, size_t k, void *const pp[], const size_t elem[]);
/* The macro's body: see above. */
int ut_vec_reserve_(void *pp, size_t elem, void *cap, size_t cap_size, size_t need);

/* (the sizeof of a negative-length array stops a cap of another width at compile time) */
#define UT_VEC_RESERVE(p, cap, need)                                                                 \
    ((void)sizeof(char[sizeof(cap) == sizeof(int) || sizeof(cap) == sizeof(size_t) ? 1 : -1]),      \
     (size_t)(need) <= (size_t)(cap) ? 0 : ut_vec_reserve_(&(p), sizeof(*(p)), &(cap), sizeof(cap), (size_t)(need)))

#endif

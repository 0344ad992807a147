/* The top-p (nucleus) draw of the CUDA sampler, without a sort: the reference on the
 * host of what the kernel does (engines/cuda/kernels.cu, sample_kernel), tested against
 * the sort-based draw of engines/core/runtime/sampler.c on the CPU (tests/test_cuda_host.c).
 *
 * sampler.c sorts the candidates (p >= cutoff = (1 - topp) / (n - 1)) by probability,
 * descending, ties by index; takes the shortest prefix whose mass exceeds topp (all of
 * them when none does); and returns the first of that prefix whose running sum exceeds
 * coin * its mass. A GPU sort of the vocabulary each token costs more than the rest of
 * the sampler, so the kernel finds the same elements by bisection instead:
 *
 *   level     the bit pattern of a probability: for p >= 0 it orders as p does, so
 *             mass(L) = sum of the candidates' p with bits(p) >= L falls as L grows
 *   boundary  P = the largest level with mass(P) > topp; the prefix is every candidate
 *             above P and the first k (by index) at P, k the fewest with mass(P+1) + k*p(P) > topp
 *   draw      r = coin * prefix mass; Q = the largest level with (capped) mass(Q) > r; the
 *             element drawn is the j-th (by index) at level Q, j the fewest with
 *             mass(Q+1) + j*p(Q) > r
 * Each mass is one reduction over the vocabulary (about 30 per bisection). The result is
 * sampler.c's draw whenever the sums round alike (exactly so when every partial sum is
 * exact, as the tests arrange); otherwise the same distribution.
 */
#ifndef BENCH_CUDA_TOPP_H
#define BENCH_CUDA_TOPP_H

#include <stdint.h>

#define TOPP_LEVEL_ONE 0x3f800000u      /* bits of 1.0f: no probability lies above */

/* The draw from probabilities p (n, summing to 1) with topp in (0, 1] (1: the whole
 * distribution, in index order) and coin in [0, 1). */
int topp_ref_sample(const float *p, int n, float topp, float coin);

#endif

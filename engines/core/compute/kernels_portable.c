/* Portable instantiation of the matmul kernels: one float per "vector", plain
 * C the compiler may vectorise for the baseline ISA. The reference the SIMD
 * tables are tested against, and the fallback on any CPU. */
#include "kernels_impl.h"

typedef float vf;
#define VL 1
/* prefill tile: 4 rows x 4 tokens of scalars */
#define KN_MV 4
#define KN_NR 4
#define KN_FN(name) name##_portable
#define KN_INLINE static inline __attribute__((always_inline))

KN_INLINE vf v_zero(void) { return 0.0f; }
KN_INLINE vf v_set1(float a) { return a; }
KN_INLINE vf v_fma(vf a, vf b, vf c) { return a * b + c; }
KN_INLINE vf v_mul(vf a, vf b) { return a * b; }
KN_INLINE vf v_add(vf a, vf b) { return a + b; }
KN_INLINE float v_hsum(vf a) { return a; }
KN_INLINE void v_store(float *p, vf a) { *p = a; }
KN_INLINE vf v_load_f32(const float *p) { return *p; }
KN_INLINE vf v_load_f16(const uint16_t *p) { return bench_f16_to_f32(*p); }
KN_INLINE vf v_load_bf16(const uint16_t *p) { return bench_bf16_to_f32(*p); }
/* a bf16 column pair (bf16r16.h); memcpy: a file's tensor may be only 2-byte aligned */
KN_INLINE vf v_load_bf16_even(const uint32_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return bench_bf16_to_f32((uint16_t)(v & 0xffffu));
}
KN_INLINE vf v_load_bf16_odd(const uint32_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return bench_bf16_to_f32((uint16_t)(v >> 16));
}
KN_INLINE vf v_load_q8(const int8_t *p) { return (float)*p; }
KN_INLINE float kn_half_to_float(uint16_t h) { return bench_f16_to_f32(h); }
KN_INLINE void v_tr_regs(const vf *r, float *dst, size_t ds) { (void)ds; *dst = r[0]; }

#include "kernels_simd.inc"

const kn_ops kn_ops_portable = KN_TABLE();

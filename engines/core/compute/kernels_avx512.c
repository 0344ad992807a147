/* AVX-512 instantiation of the matmul kernels (16 floats per vector).
 * The target pragma, not -march, enables the instructions, so the rest of the
 * binary stays portable; kn_init only selects this table on CPUs that have
 * AVX-512 F/BW/VL/DQ. */
#include "kernels_impl.h"

#if KN_HAVE_X86
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")
#include <immintrin.h>

typedef __m512 vf;
#define VL 16
/* 4 rows x 6 tokens = 24 accumulators + 4 weight vectors + 1 x vector of the 32 zmm registers */
#define KN_TB 6
#define KN_FN(name) name##_avx512
#define KN_INLINE static inline __attribute__((always_inline))

KN_INLINE vf v_zero(void) { return _mm512_setzero_ps(); }
KN_INLINE vf v_set1(float a) { return _mm512_set1_ps(a); }
KN_INLINE vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
KN_INLINE vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
KN_INLINE float v_hsum(vf a) { return _mm512_reduce_add_ps(a); }
KN_INLINE void v_store(float *p, vf a) { _mm512_storeu_ps(p, a); }
KN_INLINE vf v_load_f32(const float *p) { return _mm512_loadu_ps(p); }
KN_INLINE vf v_load_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
KN_INLINE vf v_load_bf16(const uint16_t *p) {
    /* bf16 is the high half of an f32: widen and shift, exact for every value */
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
KN_INLINE vf v_load_q8(const int8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
KN_INLINE float kn_half_to_float(uint16_t h) { return _cvtsh_ss(h); }

#include "kernels_simd.inc"

const kn_ops kn_ops_avx512 = KN_TABLE("avx512");
#endif

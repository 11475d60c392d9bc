/* fusedrnn: exact int8 x int8 matrix products for the SDK targets' compiled loops (targets/litert/_kernel.c,
 * targets/mli/_kernel.c include this file).
 *
 * With AVX-512 VNNI, vpdpbusd multiplies unsigned by signed bytes and adds four products to each int32 lane. The
 * signed operand x (int8 values) is offset to x + 128 (uint8) and the accumulators start from
 * off[j] = -128 * sum_k W[k, j], so that
 *     off[j] + sum_k (x_k + 128) W[k, j] = sum_k x_k W[k, j]   (mod 2^32),
 * the exact sum wherever it fits int32, and otherwise the same wrap as an int32 accumulator (vpdpbusd does not
 * saturate). Weights are stored as quads of rows, W8 [K4 / 4, N, 4] (K4 = K rounded up to a multiple of 4, the
 * padding rows 0), so one 32-bit broadcast of x meets 16 columns x 4 rows per instruction: four times the
 * multiply-adds of a float32 FMA of the same width.
 */
#ifndef FUSEDRNN_INT8_DOT_H
#define FUSEDRNN_INT8_DOT_H
#include <stdint.h>

/* dst[b, k] = src[b, k] + 128 for k < K, 128 (the value 0) up to K4: int16 rows holding int8 values */
static inline void i8dot_offset_rows16(const int16_t *src, int64_t lds, int K, uint8_t *dst, int K4, int B) {
    for (int b = 0; b < B; b++) {
        const int16_t *restrict s = src + (int64_t)b * lds;
        uint8_t *restrict d = dst + (int64_t)b * K4;
        for (int k = 0; k < K; k++) d[k] = (uint8_t)(s[k] + 128);
        for (int k = K; k < K4; k++) d[k] = 128;
    }
}

/* the same for int8 rows */
static inline void i8dot_offset_rows8(const int8_t *src, int64_t lds, int K, uint8_t *dst, int K4, int B) {
    for (int b = 0; b < B; b++) {
        const int8_t *restrict s = src + (int64_t)b * lds;
        uint8_t *restrict d = dst + (int64_t)b * K4;
        for (int k = 0; k < K; k++) d[k] = (uint8_t)(s[k] + 128);
        for (int k = K; k < K4; k++) d[k] = 128;
    }
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
#define I8DOT_VNNI 1

/* one tile: rows [b, b + R) x columns [j, j + 16 NV) of acc (row stride ldc), R in 1..4, NV in 1..4 */
#define I8DOT_TILE(R, NV)                                                                                     \
    do {                                                                                                      \
        __m512i c[4][4];                                                                                      \
        const int32_t *xr[4];                                                                                 \
        for (int r = 0; r < (R); r++) {                                                                       \
            xr[r] = (const int32_t *)(xu + (int64_t)(b + r) * K4);                                            \
            for (int v = 0; v < (NV); v++) c[r][v] = _mm512_loadu_si512(off + j + 16 * v);                   \
        }                                                                                                     \
        for (int kq = 0; kq < Kq; kq++) {                                                                     \
            const int8_t *w = W8 + ((int64_t)kq * N + j) * 4;                                                 \
            __m512i wv[4];                                                                                    \
            for (int v = 0; v < (NV); v++) wv[v] = _mm512_loadu_si512(w + 64 * v);                            \
            for (int r = 0; r < (R); r++) {                                                                   \
                const __m512i xb = _mm512_set1_epi32(xr[r][kq]);                                              \
                for (int v = 0; v < (NV); v++) c[r][v] = _mm512_dpbusd_epi32(c[r][v], xb, wv[v]);             \
            }                                                                                                 \
        }                                                                                                     \
        for (int r = 0; r < (R); r++)                                                                         \
            for (int v = 0; v < (NV); v++) _mm512_storeu_si512(acc + (int64_t)(b + r) * ldc + j + 16 * v, c[r][v]); \
    } while (0)

/* acc[b, j] = off[j] + sum_k xu[b, k] W8[k, j] (mod 2^32) for b < B, j < N (N a multiple of 16): xu uint8
 * [B, K4] (x + 128, K4 a multiple of 4), W8 int8 [K4 / 4, N, 4], off int32 [N], acc int32 with row stride ldc */
static void i8dot_gemm(const uint8_t *restrict xu, int K4, const int8_t *restrict W8, const int32_t *restrict off,
                       int32_t *restrict acc, int64_t ldc, int B, int N) {
    const int Kq = K4 / 4;
    int j = 0;
    for (; j + 64 <= N; j += 64) {
        int b = 0;
        for (; b + 4 <= B; b += 4) I8DOT_TILE(4, 4);
        for (; b < B; b++) I8DOT_TILE(1, 4);
    }
    for (; j < N; j += 16) {
        int b = 0;
        for (; b + 4 <= B; b += 4) I8DOT_TILE(4, 1);
        for (; b < B; b++) I8DOT_TILE(1, 1);
    }
}
#undef I8DOT_TILE
#else
#define I8DOT_VNNI 0
#endif

#endif

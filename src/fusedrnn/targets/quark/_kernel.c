/* The ExtendedLSTM recurrence of kernel.py in C: the whole time loop of both directions in one call.
 *
 * Same arithmetic as the NumPy path, to the bit (tests/test_quark_compiled.py):
 *  - exact integer products h @ R'^T and x @ W'^T: the int16 activations are split into a signed high byte and an
 *    unsigned low byte (a = 256 * hi + lo), each multiplied with the int16 weights in int32 (pair sums < 2^24,
 *    at most 128 pairs per int32 chunk, so no int32 sum can overflow), combined in int64;
 *  - srs_int rounded shifts (half away from zero; faithful: int32 saturation, the kernel's INT_MIN constant at
 *    shift 32), the int32 wrap of the faithful gate sum, float32 gates;
 *  - Y written as uint16 codes (and optionally dequantized) directly;
 *  - tanhf: the fdlibm float32 algorithm, written from tanhf.py's vectorised version (float32 arithmetic, no
 *    contraction: built with -ffp-contract=off), the cell and output in float32 / float64 as kernel.py does;
 *  - signed integer overflow wraps (-fwrapv) exactly where NumPy's int64 arithmetic wraps.
 * Weights are packed in panels of 16 columns: P[n / 16][k / 2][n % 16][k % 2] (Np = padded columns).
 * Layouts: see QuarkArgs. Built by _compiled.py; never called when the build fails (NumPy runs instead).
 */
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#pragma STDC FP_CONTRACT OFF

#define QUARK_ABI 6

int quark_abi_version(void) { return QUARK_ABI; }

typedef struct {
    int64_t shift, half, delta, sat; /* rounded shift: (x + half - (x < 0) * delta) >> shift; sat: int32 clamp */
} Srs;

typedef struct {
    int32_t T, B, I, H, G, D, Ip, Hp, Gp, faithful, rev0, rev1, has_qb, ts; /* ts: steps per x-projection block */
    int64_t qx, qh, qa, qb, ohs, ohz, ohz_term;
    Srs xw, xwq, hr, hrq, xss, hss, oh;
    float y_scale;      /* Y = float32((code - y_zp) * y_scale) into yf when yf is not NULL */
    int32_t y_zp;
    const int16_t *x;   /* [T][B][Ip], int16-domain inputs (zero padded to Ip, even) */
    int16_t *xh, *xl;   /* scratch [T][B][Ip]: high and low bytes of x */
    const int64_t *qc;  /* [D][G] */
    const int16_t *W;   /* [D][Gp/16][Ip/2][16][2]: W'[d][g][k] at [g/16][k/2][g%16][k%2], zero padded */
    const int16_t *R;   /* [D][Gp/16][Hp/2][16][2] */
    int16_t *h;         /* [D][B][Hp] in/out, int16-domain */
    float *c;           /* [D][B][H] in/out */
    uint16_t *y;        /* [T][D][B][H] out: Y's uint16 codes (h + 32768), in input time order */
    float *yf;          /* [T][D][B][H] out (optional): Y dequantized */
    int64_t *acc;       /* scratch [B][Gp] */
    int64_t *accx;      /* scratch [D][ts][B][Gp] */
    float *gf;          /* scratch [2 G + 2 H] */
    int16_t *hn;        /* scratch [B][H] */
    int16_t *hs;        /* scratch [2][B][Hp]: high and low bytes of h */
    int32_t xlo[2];     /* first input step of each direction's x-projection block */
    int32_t d0, d1;     /* the directions this call runs: [d0, d1) (two calls on two threads may share h, c, y,
                           accx: each touches its own direction's part; the other scratch is per call) */
} QuarkArgs;

static inline int64_t srs(int64_t x, const Srs *s) {
    int64_t r = (x + s->half - (x < 0 ? s->delta : 0)) >> s->shift;
    if (s->sat) {
        if (r < INT32_MIN) r = INT32_MIN;
        if (r > INT32_MAX) r = INT32_MAX;
    }
    return r;
}

/* srs with the constants in registers and the clamp as min / max (lo, hi: the int32 limits when saturating, else
 * the int64 limits), written so that the compiler vectorises the loops that use it */
static inline int64_t srs_v(int64_t x, int64_t half, int64_t delta, int64_t shift, int64_t lo, int64_t hi) {
    int64_t r = (x + half - ((x >> 63) & delta)) >> shift;
    r = r < lo ? lo : r;
    return r > hi ? hi : r;
}

/* ---- exact int16 products -------------------------------------------------------------------------------- */
/* out[m][n] (n < N) = sum_k (256 * ah[m][k] + al[m][k]) * P[.] for m < M: the int16 activations a = 256 ah + al
 * split into a signed high byte ah and an unsigned low byte al (each an int16 row of Kp columns, Kp even, zero
 * padded), the int16 weights P in panels [Np/16][Kp/2][16][2] (Np a multiple of 16), see the header. Pair
 * products in int32 with int32 chunk sums of CHUNK pairs: |ah * w| <= 2^22, |al * w| < 2^23, so a pair sum is
 * < 2^24 and CHUNK of them < 2^31; chunks are combined in int64. */
#define CHUNK 128

static void split_bytes(const int16_t *restrict a, int16_t *restrict hi, int16_t *restrict lo, size_t n) {
    for (size_t i = 0; i < n; i++) {
        hi[i] = (int16_t)(a[i] >> 8);
        lo[i] = (int16_t)(a[i] & 255);
    }
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define TILE_N 16
typedef __m512i vec;
#define V_ZERO() _mm512_setzero_si512()
#define V_SET1(p) _mm512_set1_epi32(p)
#define V_LOAD(ptr) _mm512_loadu_si512((const void *)(ptr))
#define V_DOT(acc, b, w) _mm512_dpwssd_epi32(acc, b, w)
#define V_STORE(ptr, v) _mm512_storeu_si512((void *)(ptr), v)
#elif defined(__AVX2__)
#define TILE_N 8
typedef __m256i vec;
#define V_ZERO() _mm256_setzero_si256()
#define V_SET1(p) _mm256_set1_epi32(p)
#define V_LOAD(ptr) _mm256_loadu_si256((const __m256i *)(ptr))
#define V_DOT(acc, b, w) _mm256_add_epi32(acc, _mm256_madd_epi16(b, w))
#define V_STORE(ptr, v) _mm256_storeu_si256((__m256i *)(ptr), v)
#endif

#ifdef TILE_N
static inline int32_t pair_at(const int16_t *a, int kp) {
    int32_t p;
    memcpy(&p, a + 2 * kp, 4);
    return p;
}

/* NR rows (<= 4) x NP * TILE_N columns starting at column n0 (a multiple of 16 plus 0 or 8 for AVX2 halves of a
 * panel); writes NP * TILE_N columns of each row (out has Np columns). */
static inline __attribute__((always_inline)) void tile(const int16_t *ah, const int16_t *al, int lda, int NR,
                                                       int kp2, const int16_t *P, int n0, int NP, int64_t *out,
                                                       int ldo) {
    int64_t acc[4][4 * TILE_N];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NP * TILE_N; j++) acc[r][j] = 0;
    for (int k0 = 0; k0 < kp2; k0 += CHUNK) {
        int k1 = k0 + CHUNK < kp2 ? k0 + CHUNK : kp2;
        vec sh[4][4], sl[4][4];
        for (int r = 0; r < 4; r++)
            for (int q = 0; q < 4; q++) { sh[r][q] = V_ZERO(); sl[r][q] = V_ZERO(); }
        for (int kp = k0; kp < k1; kp++) {
            vec w[4];
            for (int q = 0; q < NP; q++) {
                int n = n0 + q * TILE_N;
                w[q] = V_LOAD(P + (((size_t)(n / 16) * kp2 + kp) * 16 + n % 16) * 2);
            }
            for (int r = 0; r < NR; r++) {
                const vec bh = V_SET1(pair_at(ah + (size_t)r * lda, kp)), bl = V_SET1(pair_at(al + (size_t)r * lda, kp));
                for (int q = 0; q < NP; q++) {
                    sh[r][q] = V_DOT(sh[r][q], bh, w[q]);
                    sl[r][q] = V_DOT(sl[r][q], bl, w[q]);
                }
            }
        }
        for (int r = 0; r < NR; r++)
            for (int q = 0; q < NP; q++) {
                int32_t hh[TILE_N], ll[TILE_N];
                V_STORE(hh, sh[r][q]);
                V_STORE(ll, sl[r][q]);
                for (int j = 0; j < TILE_N; j++) acc[r][q * TILE_N + j] += (int64_t)hh[j] * 256 + ll[j];
            }
    }
    for (int r = 0; r < NR; r++) memcpy(out + (size_t)r * ldo + n0, acc[r], sizeof(int64_t) * NP * TILE_N);
}

/* column groups of GN tiles: 4 for one row (independent dot-product chains), fewer for 4 rows (registers) */
#define TILE_ROWS(NR, GN)                                                                                         \
    for (; n0 + GN * TILE_N <= Np; n0 += GN * TILE_N) tile(ah, al, lda, NR, kp2, P, n0, GN, out, ldo);          \
    for (; n0 < Np; n0 += TILE_N) tile(ah, al, lda, NR, kp2, P, n0, 1, out, ldo);
#define GN4 (TILE_N == 16 ? 2 : 1)

/* rows of 1 (the batch-1 recurrence: 4 column groups for independent dot-product chains) or 4 at a time */
static void gemm(const int16_t *ah, const int16_t *al, int lda, int M, int Kp, const int16_t *P, int Np,
                 int64_t *out, int ldo) {
    const int kp2 = Kp / 2;
    for (int m = 0; m < M; m += 4) {
        int n0 = 0;
        switch (M - m < 4 ? M - m : 4) {
        case 4: { TILE_ROWS(4, GN4) } break;
        case 3: { TILE_ROWS(3, GN4) } break;
        case 2: { TILE_ROWS(2, 2) } break;
        default: { TILE_ROWS(1, 4) } break;
        }
        ah += (size_t)4 * lda;
        al += (size_t)4 * lda;
        out += (size_t)4 * ldo;
    }
}
#else
static void gemm(const int16_t *ah, const int16_t *al, int lda, int M, int Kp, const int16_t *P, int Np,
                 int64_t *out, int ldo) {
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < Np; n++) {
            int64_t s = 0;
            for (int k = 0; k < Kp; k++) {
                size_t i = (((size_t)(n / 16) * (Kp / 2) + k / 2) * 16 + n % 16) * 2 + (k & 1);
                s += (256 * (int64_t)ah[(size_t)m * lda + k] + al[(size_t)m * lda + k]) * P[i];
            }
            out[(size_t)m * ldo + n] = s;
        }
    }
}
#endif

/* ---- tanhf (fdlibm's float32 algorithm, as tanhf.py) ------------------------------------------------------- */
static inline float f_of(uint32_t w) { float f; memcpy(&f, &w, 4); return f; }
static inline uint32_t w_of(float f) { uint32_t w; memcpy(&w, &f, 4); return w; }

/* expm1f's argument reduction y = k·ln2 + xr (xr with its correction c) and rational approximation e, the part
 * that every k shares; hs = ±0.5 rounds y / ln2 to k (the exact k = 0 bound of tanhf.py's _expm1f_tanh) */
typedef struct {
    int32_t k;
    float xr, c, hxs, e;
} expm1f_red;

static inline expm1f_red expm1f_reduce(float y, float hs) {
    const float ln2_hi = f_of(0x3F317180), ln2_lo = f_of(0x3717F7D1), invln2 = f_of(0x3FB8AA3B);
    const float q0 = f_of(0xBD088889), q1 = f_of(0x3AD00D01), q2 = f_of(0xB8A670CD), q3 = f_of(0x36867E54),
                q4 = f_of(0xB457EDBB);
    expm1f_red r;
    float prod = invln2 * y;
    int32_t k = (int32_t)(prod + hs);
    r.k = w_of(y) == 0xBEB17218u ? 0 : k;
    float tk = (float)r.k;
    float hi = y - tk * ln2_hi;
    float lo = tk * ln2_lo;
    r.xr = hi - lo;
    r.c = (hi - r.xr) - lo;
    float hfx = 0.5f * r.xr;
    r.hxs = r.xr * hfx;
    float r1 = 1.0f + r.hxs * (q0 + r.hxs * (q1 + r.hxs * (q2 + r.hxs * (q3 + r.hxs * q4))));
    float t = 3.0f - r1 * hfx;
    r.e = r.hxs * ((r1 - t) / (6.0f - r.xr * t));
    return r;
}

/* expm1f for y = 2|x| in [2, 19) or y = -2|x| in (-2, 0] (tanhf.py's _expm1f_tanh) */
static inline float expm1f_tanh(float y) {
    const expm1f_red r = expm1f_reduce(y, y < 0.0f ? -0.5f : 0.5f);
    const int32_t k = r.k;
    const float xr = r.xr, c = r.c, hxs = r.hxs;
    float e = r.e;
    if (k == 0) return xr - (xr * e - hxs);
    e = (xr * (e - c) - c) - hxs;
    if (k == -1) return 0.5f * (xr - e) - 0.5f;
    float ex = e - xr, yk;
    if (k < 0) {
        yk = 1.0f - ex;
    } else {
        float two_mk = f_of((uint32_t)(0x7F - k) << 23);
        yk = k < 23 ? (1.0f - two_mk) - ex : (xr - (e + two_mk)) + 1.0f;
    }
    yk = f_of(w_of(yk) + ((uint32_t)k << 23));
    return k < 0 ? yk - 1.0f : yk;
}

static inline float tanhf_fd(float x) { /* finite x */
    uint32_t ix = w_of(x) & 0x7FFFFFFFu;
    float ax = f_of(ix);
    float y = 2.0f * (ax < 9.5f ? ax : 9.5f);
    float z;
    if (ix >= 0x3F800000u) {
        float t = expm1f_tanh(y);
        z = 1.0f - 2.0f / (t + 2.0f);
    } else {
        float t = expm1f_tanh(-y);
        z = -t / (t + 2.0f);
    }
    return f_of((w_of(z) & 0x7FFFFFFFu) | (w_of(x) & 0x80000000u)); /* copysign */
}

/* The same function over an array, branch-free (every lane computes every formula, one select at the end, as
 * tanhf.py does) so that the compiler vectorises the loop. */
static void tanhf_loop(const float *restrict x, float *restrict out, int n) {
    for (int i = 0; i < n; i++) {
        uint32_t wx = w_of(x[i]);
        uint32_t ix = wx & 0x7FFFFFFFu;
        float ax = f_of(ix);
        float y2 = 2.0f * (ax < 9.5f ? ax : 9.5f);
        int ge1 = ix >= 0x3F800000u;
        /* y = ge1 ? 2|x| : -2|x| and hs = ge1 ? 0.5 : -0.5 by their sign bit: written as selects, GCC evaluated
         * the whole reduction for both signs */
        const uint32_t neg = ge1 ? 0u : 0x80000000u;
        const expm1f_red r = expm1f_reduce(f_of(w_of(y2) ^ neg), f_of(w_of(0.5f) | neg));
        const int32_t k = r.k;
        const float xr = r.xr, c = r.c, hxs = r.hxs;
        float e = r.e;
        float r0 = xr - (xr * e - hxs);
        e = (xr * (e - c) - c) - hxs;
        float rm1 = 0.5f * (xr - e) - 0.5f;
        float ex = e - xr;
        float two_mk = f_of((uint32_t)(0x7F - k) << 23);
        float ylow = (1.0f - two_mk) - ex, yhigh = (xr - (e + two_mk)) + 1.0f, yneg = 1.0f - ex;
        float yk = k < 0 ? yneg : (k < 23 ? ylow : yhigh);
        yk = f_of(w_of(yk) + ((uint32_t)k << 23));
        float ykm1 = yk - 1.0f;
        yk = k < 0 ? ykm1 : yk;
        float em = k == 0 ? r0 : (k == -1 ? rm1 : yk);
        float t2 = em + 2.0f;
        float q = (ge1 ? 2.0f : -em) / t2; /* 2 / t2 (|x| >= 1) or -em / t2 */
        float z = ge1 ? 1.0f - q : q;
        out[i] = f_of((w_of(z) & 0x7FFFFFFFu) | (wx & 0x80000000u));
    }
}

#ifdef __AVX512F__
/* tanhf_loop's formulas on 16 lanes, written with intrinsics: GCC's vectorised loop divided both numerators of the
 * last division (2 and -em) and selected, twice the divisions of a lane that needs one (tests/test_quark_compiled:
 * the same bits as tanhf.py on random and dense inputs) */
static inline __m512 tanhf16(__m512 x) {
#define F(v) _mm512_set1_ps(v)
#define FW(w) _mm512_castsi512_ps(_mm512_set1_epi32((int32_t)(w)))
    const __m512i wx = _mm512_castps_si512(x), ix = _mm512_and_si512(wx, _mm512_set1_epi32(0x7FFFFFFF));
    const __m512 y2 = _mm512_mul_ps(F(2.0f), _mm512_min_ps(_mm512_castsi512_ps(ix), F(9.5f)));
    const __mmask16 ge1 = _mm512_cmpge_epu32_mask(ix, _mm512_set1_epi32(0x3F800000));
    const __m512i neg = _mm512_maskz_mov_epi32((__mmask16)~ge1, _mm512_set1_epi32((int32_t)0x80000000u));
    const __m512 y = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(y2), neg));
    const __m512 hs = _mm512_castsi512_ps(_mm512_or_si512(_mm512_set1_epi32(0x3F000000), neg));
    /* expm1f_reduce */
    __m512i k = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(FW(0x3FB8AA3B), y), hs));
    k = _mm512_mask_mov_epi32(k, _mm512_cmpeq_epi32_mask(_mm512_castps_si512(y), _mm512_set1_epi32((int32_t)0xBEB17218u)),
                              _mm512_setzero_si512());
    const __m512 tk = _mm512_cvtepi32_ps(k);
    const __m512 hi = _mm512_sub_ps(y, _mm512_mul_ps(tk, FW(0x3F317180))), lo = _mm512_mul_ps(tk, FW(0x3717F7D1));
    const __m512 xr = _mm512_sub_ps(hi, lo), c = _mm512_sub_ps(_mm512_sub_ps(hi, xr), lo);
    const __m512 hfx = _mm512_mul_ps(F(0.5f), xr), hxs = _mm512_mul_ps(xr, hfx);
    __m512 p = _mm512_add_ps(FW(0x36867E54), _mm512_mul_ps(hxs, FW(0xB457EDBB))); /* q3 + hxs q4 */
    p = _mm512_add_ps(FW(0xB8A670CD), _mm512_mul_ps(hxs, p));
    p = _mm512_add_ps(FW(0x3AD00D01), _mm512_mul_ps(hxs, p));
    p = _mm512_add_ps(FW(0xBD088889), _mm512_mul_ps(hxs, p));
    const __m512 r1 = _mm512_add_ps(F(1.0f), _mm512_mul_ps(hxs, p));
    const __m512 t = _mm512_sub_ps(F(3.0f), _mm512_mul_ps(r1, hfx));
    __m512 e = _mm512_mul_ps(hxs, _mm512_div_ps(_mm512_sub_ps(r1, t), _mm512_sub_ps(F(6.0f), _mm512_mul_ps(xr, t))));
    /* the cases of k */
    const __m512 r0 = _mm512_sub_ps(xr, _mm512_sub_ps(_mm512_mul_ps(xr, e), hxs));
    e = _mm512_sub_ps(_mm512_sub_ps(_mm512_mul_ps(xr, _mm512_sub_ps(e, c)), c), hxs);
    const __m512 rm1 = _mm512_sub_ps(_mm512_mul_ps(F(0.5f), _mm512_sub_ps(xr, e)), F(0.5f));
    const __m512 ex = _mm512_sub_ps(e, xr);
    const __m512 two_mk = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(0x7F), k), 23));
    const __m512 ylow = _mm512_sub_ps(_mm512_sub_ps(F(1.0f), two_mk), ex);
    const __m512 yhigh = _mm512_add_ps(_mm512_sub_ps(xr, _mm512_add_ps(e, two_mk)), F(1.0f));
    const __m512 yneg = _mm512_sub_ps(F(1.0f), ex);
    const __mmask16 kneg = _mm512_cmplt_epi32_mask(k, _mm512_setzero_si512());
    __m512 yk = _mm512_mask_blend_ps(_mm512_cmplt_epi32_mask(k, _mm512_set1_epi32(23)), yhigh, ylow);
    yk = _mm512_mask_blend_ps(kneg, yk, yneg);
    yk = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(yk), _mm512_slli_epi32(k, 23)));
    yk = _mm512_mask_sub_ps(yk, kneg, yk, F(1.0f));
    __m512 em = _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(-1)), yk, rm1);
    em = _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(k, _mm512_setzero_si512()), em, r0);
    /* tanh from expm1 */
    const __m512 t2 = _mm512_add_ps(em, F(2.0f));
    const __m512 nem = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(em), _mm512_set1_epi32((int32_t)0x80000000u)));
    const __m512 num = _mm512_mask_blend_ps(ge1, nem, F(2.0f)); /* 2 / t2 (|x| >= 1) or -em / t2 */
    const __m512 q = _mm512_div_ps(num, t2);
    const __m512 z = _mm512_mask_sub_ps(q, ge1, F(1.0f), q);
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(z), wx,
                                                         _mm512_set1_epi32(0x7FFFFFFF), 0xE4)); /* copysign */
#undef F
#undef FW
}

static void tanhf_vec(const float *restrict x, float *restrict out, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, tanhf16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(out + i, m, tanhf16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
#else
#define tanhf_vec tanhf_loop
#endif

float quark_tanhf(float x) { return tanhf_fd(x); }

void quark_tanhf_vec(const float *x, float *out, int64_t n) { tanhf_vec(x, out, (int)n); }

void quark_tanhf_array(const float *x, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = tanhf_fd(x[i]);
}

/* ---- the time loop ---------------------------------------------------------------------------------------- */
/* The gate pre-activations of one sequence and step, scaled to float32 (g / 2^25 or g / 2^24 over [k0, k1)). */
static inline __attribute__((always_inline)) void gates(const QuarkArgs *a, const int64_t *restrict ax,
                                                        const int64_t *restrict ar, const int64_t *restrict qc,
                                                        int64_t base, int k0, int k1, float scale,
                                                        float *restrict gf) {
    const int64_t qx = a->qx, qh = a->qh;
    const int64_t lo_w = a->xw.sat ? INT32_MIN : INT64_MIN, hi_w = a->xw.sat ? INT32_MAX : INT64_MAX;
    const int64_t lo_wq = a->xwq.sat ? INT32_MIN : INT64_MIN, hi_wq = a->xwq.sat ? INT32_MAX : INT64_MAX;
    const int64_t lo_r = a->hr.sat ? INT32_MIN : INT64_MIN, hi_r = a->hr.sat ? INT32_MAX : INT64_MAX;
    const int64_t lo_rq = a->hrq.sat ? INT32_MIN : INT64_MIN, hi_rq = a->hrq.sat ? INT32_MAX : INT64_MAX;
    const int64_t h1 = a->xw.half, d1 = a->xw.delta, s1 = a->xw.shift, h2 = a->xwq.half, d2 = a->xwq.delta,
                  s2 = a->xwq.shift, h3 = a->hr.half, d3 = a->hr.delta, s3 = a->hr.shift, h4 = a->hrq.half,
                  d4 = a->hrq.delta, s4 = a->hrq.shift;
    if (a->faithful) { /* the kernel's int32 gate sum wraps */
        for (int k = k0; k < k1; k++) {
            int64_t g = srs_v(srs_v(ax[k], h1, d1, s1, lo_w, hi_w) * qx, h2, d2, s2, lo_wq, hi_wq)
                        + srs_v(srs_v(ar[k], h3, d3, s3, lo_r, hi_r) * qh, h4, d4, s4, lo_rq, hi_rq) + qc[k] + base;
            gf[k] = (float)(int32_t)g * scale;
        }
    } else {
        for (int k = k0; k < k1; k++) {
            int64_t g = srs_v(srs_v(ax[k], h1, d1, s1, lo_w, hi_w) * qx, h2, d2, s2, lo_wq, hi_wq)
                        + srs_v(srs_v(ar[k], h3, d3, s3, lo_r, hi_r) * qh, h4, d4, s4, lo_rq, hi_rq) + qc[k] + base;
            gf[k] = (float)g * scale;
        }
    }
}

/* h = o * tanh(c) re-quantised with Y's parameters (kernel.py's two branches), written as int16-domain h, Y's
 * uint16 codes and optionally dequantized Y. */
static inline __attribute__((always_inline)) void outputs(const QuarkArgs *a, const float *restrict so_v,
                                                          const float *restrict th, int16_t *restrict hn,
                                                          uint16_t *restrict yc, float *restrict yf) {
    const int H = a->H;
    const int64_t ohs = a->ohs, ohz = a->ohz, ohz_term = a->ohz_term;
    const int64_t hh = a->oh.half, dd_ = a->oh.delta, sh = a->oh.shift;
    if (a->faithful) {
        for (int j = 0; j < H; j++) {
            float so = so_v[j] * 0.5f + 0.5f;
            double d = (double)(so * th[j]) * 16777216.0;
            double r = __builtin_trunc(__builtin_fabs(d) + 0.5);
            double rs = d >= 0.0 ? r : (d <= -1.0 ? -r : 0.0); /* the kernel's sign test after truncation */
            int64_t q = srs_v((int64_t)rs * ohs + ohz_term, hh, dd_, sh, INT64_MIN, INT64_MAX);
            q = q < -65536 ? -65536 : (q > 65535 ? 65535 : q);
            hn[j] = (int16_t)q; /* the low 16 bits (defect 2) */
        }
    } else {
        for (int j = 0; j < H; j++) {
            float so = so_v[j] * 0.5f + 0.5f;
            double d = (double)(so * th[j]) * 16777216.0;
            double r = __builtin_trunc(__builtin_fabs(d) + 0.5);
            double rs = d < 0.0 ? -r : r;
            int64_t q = srs_v((int64_t)rs * ohs, hh, dd_, sh, INT64_MIN, INT64_MAX) + ohz;
            q = q < -32768 ? -32768 : (q > 32767 ? 32767 : q);
            hn[j] = (int16_t)q;
        }
    }
    for (int j = 0; j < H; j++) yc[j] = (uint16_t)((uint16_t)hn[j] ^ 0x8000u);
    if (yf) {
        const float ys = a->y_scale;
        const int32_t zp = a->y_zp;
        for (int j = 0; j < H; j++) yf[j] = (float)((int32_t)yc[j] - zp) * ys;
    }
}

/* c = i * cc + f * c in float32 (i, f = tanhf * 0.5 + 0.5), also copied to cn */
static inline void cell(const float *restrict vi, const float *restrict vf, const float *restrict vc,
                        float *restrict c, float *restrict cn, int H) {
    for (int j = 0; j < H; j++) {
        float si = vi[j] * 0.5f + 0.5f, sf = vf[j] * 0.5f + 0.5f;
        float cj = si * vc[j] + sf * c[j];
        c[j] = cj;
        cn[j] = cj;
    }
}

int quark_run(QuarkArgs *a) {
    const int T = a->T, B = a->B, H = a->H, G = a->G, D = a->D, Ip = a->Ip, Hp = a->Hp, Gp = a->Gp;
    const float s25 = 1.0f / 33554432.0f, s24 = 1.0f / 16777216.0f;
    split_bytes(a->x, a->xh, a->xl, (size_t)T * B * Ip);
    for (int t = 0; t < T; t++) {
        for (int d = a->d0; d < a->d1; d++) {
            const int rev = d ? a->rev1 : a->rev0;
            const int tx = rev ? T - 1 - t : t;
            int16_t *h = a->h + (size_t)d * B * Hp;
            float *c = a->c + (size_t)d * B * H;
            const size_t wo = (size_t)d * (Ip / 2) * Gp * 2, ro = (size_t)d * (Hp / 2) * Gp * 2;
            if (t % a->ts == 0) { /* x projection of the next ts steps of this direction, in input time order */
                int n = T - t < a->ts ? T - t : a->ts;
                int lo = rev ? T - t - n : t;
                gemm(a->xh + (size_t)lo * B * Ip, a->xl + (size_t)lo * B * Ip, Ip, n * B, Ip, a->W + wo, Gp,
                     a->accx + (size_t)d * a->ts * B * Gp, Gp);
                a->xlo[d] = lo;
            }
            split_bytes(h, a->hs, a->hs + (size_t)B * Hp, (size_t)B * Hp);
            gemm(a->hs, a->hs + (size_t)B * Hp, Hp, B, Hp, a->R + ro, Gp, a->acc, Gp);
            const int64_t *qc = a->qc + (size_t)d * G;
            for (int b = 0; b < B; b++) {
                const int16_t *hb = h + (size_t)b * Hp, *xb = a->x + ((size_t)tx * B + b) * Ip;
                float *restrict cb = c + (size_t)b * H;
                const int64_t *ax = a->accx + (((size_t)d * a->ts + (tx - a->xlo[d])) * B + b) * Gp,
                              *ar = a->acc + (size_t)b * Gp;
                int64_t xsum = 0, hterm = 0;
                for (int j = 0; j < Ip; j++) xsum += xb[j]; /* padding is zero */
                const int64_t xs = srs(xsum * a->qa, &a->xss);
                if (a->has_qb) {
                    int64_t hsum = 0;
                    for (int j = 0; j < H; j++) hsum += hb[j];
                    hterm = srs(hsum * a->qb, &a->hss);
                }
                float *restrict gf = a->gf, *restrict v = a->gf + G, *restrict cn = a->gf + 2 * G,
                      *restrict th = a->gf + 2 * G + H;
                gates(a, ax, ar, qc, -xs - hterm, 0, 3 * H, s25, gf);
                gates(a, ax, ar, qc, -xs - hterm, 3 * H, G, s24, gf);
                tanhf_vec(gf, v, G);
                cell(v, v + 2 * H, v + 3 * H, cb, cn, H);
                tanhf_vec(cn, th, H);
                const size_t yo = (((size_t)tx * D + d) * B + b) * H;
                outputs(a, v + H, th, a->hn + (size_t)b * H, a->y + yo, a->yf ? a->yf + yo : NULL);
            }
            /* h is read by every gate of the step above, so it is updated after the whole row set */
            for (int b = 0; b < B; b++) memcpy(h + (size_t)b * Hp, a->hn + (size_t)b * H, (size_t)H * 2);
        }
    }
    return 0;
}

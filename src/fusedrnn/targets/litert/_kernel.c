/* fusedrnn LiteRT compiled recurrence: the time loop of the 8x8_16 LSTM kernel (lstm_integer.py), bit-exact with
 * that NumPy path, which stays the reference.
 *
 * Built at first use by fusedrnn.targets.litert._compiled (the machine's cc, -O3 -march=native; ctypes, no Python
 * C-API). Python prepares every table (gemmlowp logistic / tanh of all int16 inputs) and the weights in the
 * layouts of the dot products below; this file does, per step, the input and recurrent dot products (int32 sums
 * of int8 x int8 products, wrapping modulo 2^32 exactly as the C++ int32 accumulators and the wrap32 that
 * follows them), their requantization, peepholes, layer norm, the look-ups, the cell update, the hidden
 * requantization and the projection, in the integer arithmetic of _arith.py / gemmlowp (int64 holding the C++
 * int16 / int32 values).
 *
 * Dot products (dots): with AVX-512 VNNI, vpdpbusd on uint8-offset operands (../_int8_dot.h); without VNNI:
 * int16 pairs and vpmaddwd (|x|, |W| <= 128, so every pair sum fits int32), or plain C.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../_int8_dot.h"
#include "../_tflite_requant.h"

#define LITERT_ABI 6
int litert_abi_version(void) { return LITERT_ABI; }

/* one weight matrix [K, N] (K rows, zero padded) in the layouts of dots(): w16 int16 [K/2, N, 2] (pairs of rows),
 * w8 int8 [K4/4, N, 4] (quads of rows, K4 = K rounded up to 4) and off[j] = -128 * sum_k W[k, j] */
typedef struct {
    const int16_t *w16;
    const int8_t *w8;
    const int32_t *off;
} mat_t;

typedef struct {
    int32_t B, I, H, Hp, G;          /* batch, input, cell, output, gates present (3 with CIFG, else 4) */
    int32_t cifg, ln, proj, single;  /* single: TFLITE_SINGLE_ROUNDING, else the double rounding */
    int32_t nb;                      /* peephole flat-buffer group (the section 8 quirk): B time-major, else 1 */
    int32_t sh_ig, qcell_clip, qproj_clip, zp_hid, zp_h;
    int32_t Ki, Ni, Kr, Nr, Kp, Np;  /* padded shapes (K even, N a multiple of 64): input [Ki = even I] x [Ni],
                                        recurrent [Kr = even Hp] x [Nr], projection [Kp = even H] x [Np] */
    int32_t col[4];                  /* column block of gate i, f, c, o (-1: absent) */
    int32_t has_p[4];                /* peephole present for gate i, f, o (index 0, 1, 3) */
    int64_t p_q[4], p_s[4];          /* peephole requantization */
    int64_t ln_q[4], ln_s[4], ln_guard[4];
    int64_t hid_q, hid_s, proj_q, proj_s;
    const int64_t *in_req, *rec_req; /* [5, G]: per gate block Q, left shift, right shift, its nudge, [right>0] */
    const int64_t *in_bias, *rec_bias; /* [G*H] */
    mat_t W, R, Wp;                  /* input [I, G*H], recurrent [Hp, G*H], projection [H, Hp] weights */
    const int64_t *proj_bias;        /* [Hp] */
    const int64_t *P[4];             /* [H] peephole weights */
    const int64_t *L[4], *Lb[4];     /* [H] layer-norm coefficients and gate biases */
    const int32_t *sig, *tanh3, *tanhc; /* [65536] at raw int16 & 0xFFFF */
    int16_t *h;                      /* [B, Kr] output state (int8 values; padding 0), updated */
    int32_t *c;                      /* [B, H] cell (int16 values), updated */
    int32_t *gate;                   /* [B, G*H] scratch */
    int16_t *m;                      /* [B, Kp] scratch (padding 0) */
    int32_t *acc;                    /* [B, max(Nr, Np)] scratch */
    int32_t *acc_in;                 /* [ts * B, Ni] scratch */
    int16_t *xs;                     /* [ts * B, Ki] scratch (padding 0) */
    uint8_t *xu;                     /* [ts * B, round4(max(Ki, Kr, Kp))] scratch */
    int32_t *gin;                    /* [ts * B, G*H] scratch: the input terms of a block of steps */
    int32_t ts, pad_ts;              /* steps per block of input terms (>= 1) */
} lstm_args;

/* ---- gemmlowp pieces of GetInvSqrtQuantizedMultiplierExp (numerics/gemmlowp.py) -------------------------- */
static inline int64_t g_rdpot(int64_t x, int e) {
    int64_t mask = ((int64_t)1 << e) - 1, thr = (mask >> 1) + (x < 0);
    return (x >> e) + ((x & mask) > thr);
}
static inline int64_t g_srdhm(int64_t a, int64_t b) {
    if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
    int64_t ab = a * b, x = ab + (ab >= 0 ? ((int64_t)1 << 30) : 1 - ((int64_t)1 << 30));
    return (x + ((x >> 63) & (((int64_t)1 << 31) - 1))) >> 31;
}
static inline int64_t g_srmpot(int64_t x, int e) {
    if (e == 0) return x;
    if (e < 0) return g_rdpot(x, -e);
    int64_t thr = ((int64_t)1 << (31 - e)) - 1;
    if (x > thr) return INT32_MAX;
    if (x < -thr) return INT32_MIN;
    return wrap32((int64_t)((uint64_t)x << e));
}
static void inv_sqrt(int64_t x, int64_t *Q, int64_t *S) {
    if (x <= 1) { *Q = INT32_MAX; *S = 0; return; }
    int64_t v = x, shift = 11;
    while (v >= ((int64_t)1 << 29)) { v /= 4; shift++; }
    int clz = 32 - (64 - __builtin_clzll((uint64_t)v));
    int left_pairs = (clz - 1) / 2 - 1;
    shift -= left_pairs;
    v <<= 2 * left_pairs;
    int64_t half_input = g_rdpot(v >> 1, 1), half_three = ((int64_t)1 << 28) + ((int64_t)1 << 27);
    int64_t est = (int64_t)1 << 28;
    for (int k = 0; k < 5; k++) {
        int64_t cube = g_srmpot(g_srdhm(g_srdhm(est, est), est), 6);
        est = g_srmpot(wrap32(g_srdhm(half_three, est) - g_srdhm(half_input, cube)), 3);
    }
    est = g_srdhm(est, 1518500250);
    if (shift < 0) { est = wrap32((int64_t)((uint64_t)est << -shift)); shift = 0; }
    *Q = wrap32(est);
    *S = wrap32(-shift);
}

/* PortableApplyLayerNorm over one row of n int16 values, in place (lstm_integer._layer_norm) */
static void layer_norm(const lstm_args *a, int g, int32_t *x, int n) {
    int64_t s = 0, ssq = 0;
    for (int k = 0; k < n; k++) { s += x[k]; ssq += (int64_t)x[k] * x[k]; }
    int64_t mean = wrap32(s * 1024 / n);
    int64_t var = ssq * (((int64_t)1 << 20) / n) - mean * mean;
    int64_t var2 = wrap32(var / ((int64_t)1 << 20));
    if (var2 < 1) var2 = a->ln_guard[g];
    int64_t q, sh;
    inv_sqrt(var2, &q, &sh);
    const int64_t *L = a->L[g], *Lb = a->Lb[g];
    for (int k = 0; k < n; k++) {
        int64_t r = mbqm(wrap32(1024 * (int64_t)x[k] - mean), q, sh, a->single);
        int64_t v3 = r * L[k] + Lb[k];
        int64_t v4 = wrap32((v3 > 0 ? v3 + 512 : v3 - 512) / 1024);
        x[k] = (int32_t)sat(mbqm(v4, a->ln_q[g], a->ln_s[g], a->single), -32768, 32767);
    }
}

/* gate += MBQM(P * c) over the flat [B*H] buffers of gate g, n_output elements of each nb*H group (the section 8
 * quirk; nb*Hp = nb*H elements with P[k % H] when Hp == H, the plain element-wise peephole) */
static void peephole(const lstm_args *a, int g, int32_t *v, int64_t ld) {
    const int B = a->B, H = a->H, Hp = a->Hp, nb = a->nb;
    const int64_t *P = a->P[g];
    for (int grp = 0; grp < B / nb; grp++) {
        const int32_t *cg = a->c + (int64_t)grp * nb * H;
        for (int k = 0; k < nb * Hp; k++) {
            int64_t flat = (int64_t)grp * nb * H + k, b = flat / H;
            int32_t *e = v + b * ld + (flat - b * H);
            *e = (int32_t)sat(*e + mbqm(P[k % Hp] * cg[k], a->p_q[g], a->p_s[g], a->single), -32768, 32767);
        }
    }
}

/* acc[b, j] = sum_k x[b, k] W[k, j] for int16 x [B, K] (K even), W as [K/2, N, 2] pairs, N a multiple of 64;
 * exact in int32 (|x|, |W| <= 128) */
#if defined(__AVX512BW__)
#include <immintrin.h>
#if defined(__AVX512VNNI__)
#define MADD(acc, x, w) _mm512_dpwssd_epi32(acc, x, w)
#else
#define MADD(acc, x, w) _mm512_add_epi32(acc, _mm512_madd_epi16(x, w))
#endif
static __attribute__((unused)) void gemv(const int16_t *x, const int16_t *W, int32_t *acc, int B, int K, int N) {
    for (int j = 0; j < N; j += 64) {
        int b = 0;
        for (; b + 2 <= B; b += 2) {
            const int32_t *x0 = (const int32_t *)(x + (int64_t)b * K), *x1 = (const int32_t *)(x + (int64_t)(b + 1) * K);
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0;
            for (int kp = 0; kp < K / 2; kp++) {
                const int16_t *w = W + ((int64_t)kp * N + j) * 2;
                __m512i w0 = _mm512_loadu_si512(w), w1 = _mm512_loadu_si512(w + 32);
                __m512i w2 = _mm512_loadu_si512(w + 64), w3 = _mm512_loadu_si512(w + 96);
                __m512i h0 = _mm512_set1_epi32(x0[kp]), h1 = _mm512_set1_epi32(x1[kp]);
                a0 = MADD(a0, h0, w0); a1 = MADD(a1, h0, w1); a2 = MADD(a2, h0, w2); a3 = MADD(a3, h0, w3);
                c0 = MADD(c0, h1, w0); c1 = MADD(c1, h1, w1); c2 = MADD(c2, h1, w2); c3 = MADD(c3, h1, w3);
            }
            int32_t *o0 = acc + (int64_t)b * N + j, *o1 = o0 + N;
            _mm512_storeu_si512(o0, a0); _mm512_storeu_si512(o0 + 16, a1);
            _mm512_storeu_si512(o0 + 32, a2); _mm512_storeu_si512(o0 + 48, a3);
            _mm512_storeu_si512(o1, c0); _mm512_storeu_si512(o1 + 16, c1);
            _mm512_storeu_si512(o1 + 32, c2); _mm512_storeu_si512(o1 + 48, c3);
        }
        for (; b < B; b++) {
            const int32_t *x0 = (const int32_t *)(x + (int64_t)b * K);
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
            for (int kp = 0; kp < K / 2; kp++) {
                const int16_t *w = W + ((int64_t)kp * N + j) * 2;
                __m512i h0 = _mm512_set1_epi32(x0[kp]);
                a0 = MADD(a0, h0, _mm512_loadu_si512(w)); a1 = MADD(a1, h0, _mm512_loadu_si512(w + 32));
                a2 = MADD(a2, h0, _mm512_loadu_si512(w + 64)); a3 = MADD(a3, h0, _mm512_loadu_si512(w + 96));
            }
            int32_t *o0 = acc + (int64_t)b * N + j;
            _mm512_storeu_si512(o0, a0); _mm512_storeu_si512(o0 + 16, a1);
            _mm512_storeu_si512(o0 + 32, a2); _mm512_storeu_si512(o0 + 48, a3);
        }
    }
}
#elif defined(__AVX2__)
#include <immintrin.h>
/* the same with 256-bit vpmaddwd: blocks of 32 columns, two rows at a time */
static __attribute__((unused)) void gemv(const int16_t *x, const int16_t *W, int32_t *acc, int B, int K, int N) {
#define MADD2(acc, x, w) _mm256_add_epi32(acc, _mm256_madd_epi16(x, w))
    for (int j = 0; j < N; j += 32) {
        int b = 0;
        for (; b < B; b += 2) {
            const int two = b + 1 < B;
            const int32_t *x0 = (const int32_t *)(x + (int64_t)b * K);
            const int32_t *x1 = (const int32_t *)(x + (int64_t)(b + two) * K);
            __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0;
            for (int kp = 0; kp < K / 2; kp++) {
                const int16_t *w = W + ((int64_t)kp * N + j) * 2;
                const __m256i w0 = _mm256_loadu_si256((const __m256i *)w), w1 = _mm256_loadu_si256((const __m256i *)(w + 16));
                const __m256i w2 = _mm256_loadu_si256((const __m256i *)(w + 32)), w3 = _mm256_loadu_si256((const __m256i *)(w + 48));
                const __m256i h0 = _mm256_set1_epi32(x0[kp]), h1 = _mm256_set1_epi32(x1[kp]);
                a0 = MADD2(a0, h0, w0); a1 = MADD2(a1, h0, w1); a2 = MADD2(a2, h0, w2); a3 = MADD2(a3, h0, w3);
                c0 = MADD2(c0, h1, w0); c1 = MADD2(c1, h1, w1); c2 = MADD2(c2, h1, w2); c3 = MADD2(c3, h1, w3);
            }
            int32_t *o0 = acc + (int64_t)b * N + j;
            _mm256_storeu_si256((__m256i *)o0, a0); _mm256_storeu_si256((__m256i *)(o0 + 8), a1);
            _mm256_storeu_si256((__m256i *)(o0 + 16), a2); _mm256_storeu_si256((__m256i *)(o0 + 24), a3);
            if (two) {
                int32_t *o1 = o0 + N;
                _mm256_storeu_si256((__m256i *)o1, c0); _mm256_storeu_si256((__m256i *)(o1 + 8), c1);
                _mm256_storeu_si256((__m256i *)(o1 + 16), c2); _mm256_storeu_si256((__m256i *)(o1 + 24), c3);
            }
        }
    }
#undef MADD2
}
#else
static __attribute__((unused)) void gemv(const int16_t *x, const int16_t *W, int32_t *acc, int B, int K, int N) {
    for (int b = 0; b < B; b++) {
        int32_t *o = acc + (int64_t)b * N;
        memset(o, 0, sizeof(int32_t) * (size_t)N);
        const int16_t *xb = x + (int64_t)b * K;
        for (int kp = 0; kp < K / 2; kp++) {
            int32_t x0 = xb[2 * kp], x1 = xb[2 * kp + 1];
            const int16_t *w = W + (int64_t)kp * N * 2;
            for (int j = 0; j < N; j++) o[j] += x0 * w[2 * j] + x1 * w[2 * j + 1];
        }
    }
}
#endif

/* acc [B, N] = x [B, K] (int16 rows holding int8 values, K even, padding 0) times matrix m [K, N] */
static void dots(const lstm_args *a, const int16_t *x, int K, const mat_t *m, int N, int32_t *acc) {
#if I8DOT_VNNI
    const int K4 = (K + 3) & ~3;
    i8dot_offset_rows16(x, K, K, a->xu, K4, a->B);
    i8dot_gemm(a->xu, K4, m->w8, m->off, acc, N, a->B, N);
#else
    gemv(x, m->w16, acc, a->B, K, N);
#endif
}

/* the input terms of the steps n0 .. n0 + ts - 1 of the call (processing order; t_lo, t_hi, reverse as in
 * litert_lstm): gin[j * B + b, g * H + k] = sat16(MBQM_g(x_t[b] . W[:, g * H + k] + in_bias)), t the time of step
 * n0 + j; one product of ts * B rows for the whole block (x int8 [T, B, I]) */
static void input_terms(const lstm_args *a, const int8_t *x, int32_t n0, int32_t ts, int32_t t_lo, int32_t t_hi,
                        int32_t reverse) {
    const int B = a->B, G = a->G, H = a->H, GH = a->G * a->H, I = a->I, R = ts * B;
    const int64_t *ri = a->in_req;
#if I8DOT_VNNI
    const int K4 = (a->Ki + 3) & ~3;
    for (int j = 0; j < ts; j++) {
        const int64_t t = reverse ? t_hi - 1 - (n0 + j) : t_lo + n0 + j;
        i8dot_offset_rows8(x + t * B * (int64_t)I, I, I, a->xu + (int64_t)j * B * K4, K4, B);
    }
    i8dot_gemm(a->xu, K4, a->W.w8, a->W.off, a->acc_in, a->Ni, R, a->Ni);
#else
    for (int j = 0; j < ts; j++) {
        const int64_t t = reverse ? t_hi - 1 - (n0 + j) : t_lo + n0 + j;
        for (int b = 0; b < B; b++) {
            const int8_t *restrict src = x + (t * B + b) * (int64_t)I;
            int16_t *restrict dst = a->xs + ((int64_t)j * B + b) * a->Ki;
            for (int k = 0; k < I; k++) dst[k] = src[k];
        }
    }
    gemv(a->xs, a->W.w16, a->acc_in, R, a->Ki, a->Ni);
#endif
    for (int r = 0; r < R; r++)
        for (int g = 0; g < G; g++) {
            const int32_t *restrict pi = a->acc_in + (int64_t)r * a->Ni + g * H;
            const int64_t *restrict ib = a->in_bias + g * H;
            int32_t *restrict out = a->gin + (int64_t)r * GH + g * H;
            const int64_t iq = ri[g], il = ri[G + g], ir = ri[2 * G + g], in_ = ri[3 * G + g], ip = ri[4 * G + g];
            if (a->single)
                for (int k = 0; k < H; k++)
                    out[k] = (int32_t)sat(rq_single((int32_t)wrap32((int64_t)pi[k] + ib[k]), (int32_t)iq, il),
                                          -32768, 32767);
            else
                for (int k = 0; k < H; k++)
                    out[k] = (int32_t)sat(rq_double((int32_t)wrap32((int64_t)pi[k] + ib[k]), (int32_t)iq, il, ir, in_,
                                                    ip), -32768, 32767);
        }
}

/* gate pre-activations of one step: sat16(input term + recurrent term), into a->gate [B, G*H]; gin: the step's
 * input terms [B, G*H] (input_terms) */
static void preact(const lstm_args *a, const int32_t *gin) {
    const int B = a->B, G = a->G, H = a->H, GH = a->G * a->H;
    const int64_t *rr = a->rec_req;
    dots(a, a->h, a->Kr, &a->R, a->Nr, a->acc);
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < G; g++) {
            const int32_t *restrict acc = a->acc + (int64_t)b * a->Nr + g * H;
            const int32_t *restrict gi = gin + (int64_t)b * GH + g * H;
            int32_t *restrict gate = a->gate + (int64_t)b * GH + g * H;
            const int64_t *restrict rb = a->rec_bias + g * H;
            int64_t rq = rr[g], rl = rr[G + g], rrr = rr[2 * G + g], rn = rr[3 * G + g], rp = rr[4 * G + g];
            if (a->single)
                for (int k = 0; k < H; k++)
                    gate[k] = (int32_t)sat(gi[k] + rq_single((int32_t)wrap32((int64_t)acc[k] + rb[k]), (int32_t)rq, rl),
                                           -32768, 32767);
            else
                for (int k = 0; k < H; k++)
                    gate[k] = (int32_t)sat(gi[k] + rq_double((int32_t)wrap32((int64_t)acc[k] + rb[k]), (int32_t)rq, rl,
                                                             rrr, rn, rp), -32768, 32767);
        }
    }
}

/* the cell update of one batch row: c = clip(sat16(rdpot(f c, 15) + rdpot(i t, sh))), in int32 (|f c|, |i t| <=
 * 2^30; 0 <= sh <= 31: checked in _compiled.py), gathers from the tables, so that it vectorises */
static void cell_row(const int32_t *restrict gf, const int32_t *restrict gi, const int32_t *restrict gc,
                     int32_t *restrict c, const int32_t *restrict sg, const int32_t *restrict t3, int H, int cifg,
                     int32_t sh, int32_t lo, int32_t hi) {
    const int32_t nud = sh > 0 ? (int32_t)1 << (sh - 1) : 0, spos = sh > 0;
#define CELL_LOOP(I_EXPR)                                                                                       \
    for (int k = 0; k < H; k++) {                                                                               \
        const int32_t f = sg[gf[k] & 0xFFFF], i = (I_EXPR);                                                     \
        const int32_t fc = f * c[k], it = i * t3[gc[k] & 0xFFFF];                                               \
        int32_t cc = ((fc + (1 << 14) - (fc < 0)) >> 15) + ((it + nud - ((it < 0) & spos)) >> sh);               \
        cc = cc < -32768 ? -32768 : (cc > 32767 ? 32767 : cc);                                                  \
        c[k] = cc < lo ? lo : (cc > hi ? hi : cc);                                                              \
    }
    if (cifg) {
        CELL_LOOP(32767 - f)
    } else {
        CELL_LOOP(sg[gi[k] & 0xFFFF])
    }
#undef CELL_LOOP
}

/* steps [t_lo, t_hi) of the sequence (descending when reverse); x: int8 [T, B, I] and y: int8 [T, B, Hp] of the
 * whole sequence */
int litert_lstm(const lstm_args *a, const int8_t *x, int8_t *y, int32_t t_lo, int32_t t_hi, int32_t reverse) {
    const int B = a->B, H = a->H, Hp = a->Hp, GH = a->G * a->H;
    const int32_t cI = a->col[0] * H, cF = a->col[1] * H, cC = a->col[2] * H, cO = a->col[3] * H;
    for (int32_t n = 0, n0 = 0; n < t_hi - t_lo; n++) {
        int32_t t = reverse ? t_hi - 1 - n : t_lo + n;
        if (n == n0 + a->ts || n == 0) {
            n0 = n;
            input_terms(a, x, n0, t_hi - t_lo - n0 < a->ts ? t_hi - t_lo - n0 : a->ts, t_lo, t_hi, reverse);
        }
        preact(a, a->gin + (int64_t)(n - n0) * B * GH);
        /* peepholes and layer norm of i, f, c (the output gate waits for the new cell) */
        for (int g = 0; g < 3; g++) {
            if (a->col[g] < 0) continue;
            int32_t *v = a->gate + a->col[g] * H;
            if (g != 2 && a->has_p[g]) peephole(a, g, v, GH);
            if (a->ln)
                for (int b = 0; b < B; b++) layer_norm(a, g, v + (int64_t)b * GH, H);
        }
        const int32_t hi = a->qcell_clip > 0 ? a->qcell_clip : 32767, lo = a->qcell_clip > 0 ? -hi : -32768;
        for (int b = 0; b < B; b++) {
            const int32_t *gr = a->gate + (int64_t)b * GH;
            cell_row(gr + cF, gr + (a->cifg ? cF : cI), gr + cC, a->c + (int64_t)b * H, a->sig, a->tanh3, H, a->cifg,
                     a->sh_ig, lo, hi);
        }
        if (a->has_p[3]) peephole(a, 3, a->gate + cO, GH);
        if (a->ln)
            for (int b = 0; b < B; b++) layer_norm(a, 3, a->gate + (int64_t)b * GH + cO, H);
        for (int b = 0; b < B; b++) {
            const int32_t *restrict go = a->gate + (int64_t)b * GH + cO, *restrict c = a->c + (int64_t)b * H;
            int16_t *restrict out = a->proj ? a->m + (int64_t)b * a->Kp : a->h + (int64_t)b * a->Kr;
            const int32_t *restrict sg = a->sig, *restrict tc = a->tanhc;
            const int64_t zp = a->proj ? -(int64_t)a->zp_hid : a->zp_hid, hq = a->hid_q, hs = a->hid_s;
            if (a->single) {
                for (int k = 0; k < H; k++)
                    out[k] = (int16_t)sat(rq_single(sg[go[k] & 0xFFFF] * tc[c[k] & 0xFFFF], (int32_t)hq, hs) + zp,
                                          -128, 127);
            } else {  /* sigmoid x tanh in Q0.30: |x| < 2^30 */
                const int64_t L = hs > 0 ? hs : 0, R = hs < 0 ? -hs : 0, nud = R > 0 ? (int64_t)1 << (R - 1) : 0;
                for (int k = 0; k < H; k++)
                    out[k] = (int16_t)sat(rq_double(sg[go[k] & 0xFFFF] * tc[c[k] & 0xFFFF], (int32_t)hq, L, R, nud, R > 0)
                                          + zp, -128, 127);
            }
        }
        if (a->proj) {
            dots(a, a->m, a->Kp, &a->Wp, a->Np, a->acc);
            for (int b = 0; b < B; b++) {
                const int32_t *acc = a->acc + (int64_t)b * a->Np;
                int16_t *hb = a->h + (int64_t)b * a->Kr;
                for (int j = 0; j < Hp; j++) {
                    int64_t h = sat(mbqm(wrap32(acc[j] + a->proj_bias[j]), a->proj_q, a->proj_s, a->single) + a->zp_h,
                                    -128, 127);
                    if (a->qproj_clip > 0) h = sat(h, -a->qproj_clip, a->qproj_clip);
                    hb[j] = (int16_t)h;
                }
            }
        }
        int8_t *restrict yt = y + (int64_t)t * B * Hp;
        for (int b = 0; b < B; b++) {
            const int16_t *restrict hb = a->h + (int64_t)b * a->Kr;
            for (int j = 0; j < Hp; j++) yt[(int64_t)b * Hp + j] = (int8_t)hb[j];
        }
    }
    return 0;
}

/* ---- the call's boundary: TFLite's QUANTIZE of the input and the int8 output's dequantization ------------------
 * (the NumPy forms took 40 and 50 µs of a 0.6 ms S4 call) */

/* out[i] = clamp(round_half_even(x[i] / scale) + zp, -128, 127), the division in double as
 * tflite_quant.quantize_values computes it; returns -1 (out not written) when a value is not finite: NumPy's cast
 * defines the result for those, so the caller keeps its NumPy form. */
int litert_quantize_i8(const float *x, int64_t n, double scale, int32_t zp, int8_t *out) {
    int finite = 1;
    for (int64_t i = 0; i < n; i++) finite &= isfinite(x[i]) != 0;
    if (!finite) return -1;
    for (int64_t i = 0; i < n; i++) {
        double q = nearbyint((double)x[i] / scale) + zp;
        out[i] = (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));
    }
    return 0;
}

/* out[r * ld + k] = lut[y[r * n + k] + 128] for r < rows, k < n: int8 values through their 256-entry table */
void litert_lookup_f32(const int8_t *y, int64_t rows, int64_t n, const float *lut, float *out, int64_t ld) {
    for (int64_t r = 0; r < rows; r++) {
        const int8_t *yr = y + r * n;
        float *o = out + r * ld;
        for (int64_t k = 0; k < n; k++) o[k] = lut[yr[k] + 128];
    }
}

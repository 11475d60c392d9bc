/* fusedrnn: the compiled time loop of the microcontroller integer LSTMs, TFLM's reference kernel (targets/tflm/
 * kernel.py: int8x16 and int16x8) and CMSIS-NN's arm_lstm_unidirectional_s8 / _s16 (targets/cmsis_nn/kernel.py),
 * bit-exact with those NumPy loops, which stay the reference (tests/test_micro_lstm.py). They differ in four
 * switches of one step. Driven by targets/micro_lstm.py, which prepares every constant and table.
 *
 * Per step, for batch rows b and the gate blocks i, f, c, o (H columns each, n = g * H + k):
 *     in   = clamp16(Rfc(sum_k x[k] W[k, n] + in_bias[n]))      the input term, for blocks of steps at once
 *     rec  = Rfc(sum_k h[k] R[k, n] + rec_bias[n])              none at the first step when first_rec is 0
 *                                                               (CMSIS-NN's NULL hidden state)
 *     pre  = clamp16(in + (sat_rec ? clamp16(rec) : rec))       TFLM saturates each FC output, CMSIS-NN not rec
 *     a_g  = table_g[pre]                                       int16 tables of every int16 input
 *     c    = clamp16(MBQM(a_f c, fc)) + (sat_ig ? clamp16 : id)(MBQM(a_i a_c, ic)), then clamped to
 *            [c_lo1, c_hi1] and to [c_lo2, c_hi2]
 *     h    = clamp(MBQM(tanh_c[c] a_o, hid) + zp_h, act_lo, act_hi)
 * MBQM is TFLite's double-rounding MultiplyByQuantizedMultiplier on int32 values (_tflite_requant.h). Rfc, by
 * fc_kind: 0 MBQM of the int32 sum (8-bit activations: int32 accumulators, wrapping); 1 TFLite's int64 MBQM
 * (TFLM 16x8: int64 sums, the multiplier reduced to 16 bits); 2 CMSIS-NN's arm_nn_requantize_s64 (s16: the
 * multiplier reduced by Python).
 *
 * Products: x and h are held as int16 rows (8-bit values too). With AVX-512 VNNI and 8-bit activations, vpdpbusd
 * (../_int8_dot.h: int32 sums modulo 2^32, as the C int32 accumulators); otherwise int16 pairs summed exactly in
 * int32 over chunks of PAIR_CHUNK pairs (|x| <= 2^15, |w| <= 2^7: a pair < 2^23, a chunk < 2^30), then in int64.
 */
#include <stdint.h>
#include <string.h>

#include "_int8_dot.h"
#include "_tflite_requant.h"

#define MICRO_ABI 1
int micro_abi_version(void) { return MICRO_ABI; }

#define PAIR_CHUNK 128

typedef struct {
    int32_t T, B, I, H, wide;        /* wide: int16 activations (else int8) */
    int32_t fc_kind, sat_rec, sat_ig, first_rec;
    int32_t zp_h, act_lo, act_hi, c_lo1, c_hi1, c_lo2, c_hi2;
    int32_t Ki, Kh, N, ts;           /* rows of x and h as even lengths; N = 4H rounded up to 16; steps per block */
    int64_t in_q[4], in_s[4], rec_q[4], rec_s[4];  /* the FC requantization of each gate block */
    int64_t fc_q, fc_s, ic_q, ic_s, hid_q, hid_s;  /* forget x cell, input x cell, hidden */
    const int64_t *in_bias, *rec_bias;             /* [4H] */
    const int16_t *Wp, *Rp;          /* weights as int16 pairs of rows [K/2, N, 2], zero padded */
    const int8_t *W8, *R8;           /* VNNI: as int8 quads of rows [K4/4, N, 4] (NULL: the pairs) */
    const int32_t *Woff, *Roff;      /* their offsets -128 * column sum */
    const int32_t *tab[4];           /* the activation of gate i, f, c, o: [65536], at value + 32768 */
    const int32_t *tanh_c;           /* tanh of the cell: [65536] */
    int16_t *h;                      /* [B, Kh] the output state (padding 0), updated */
    int32_t *c;                      /* [B, H] the cell, updated */
    int16_t *xs;                     /* scratch [ts * B, Ki] (padding 0) */
    uint8_t *xu;                     /* scratch [ts * B, round4(max(Ki, Kh))] */
    int32_t *acc32;                  /* scratch [ts * B, N] */
    int64_t *acc64;                  /* scratch [ts * B, N] */
    int32_t *gin;                    /* scratch [ts * B, 4H]: the input terms of a block of steps */
    int32_t *pre;                    /* scratch [B, 4H] */
} micro_args;

static inline int64_t clamp16(int64_t x) { return sat(x, -32768, 32767); }
/* NumPy's clip, min(max(x, lo), hi): hi where lo > hi (a cell clip the caller's parameters made negative) */
static inline int64_t np_clip(int64_t x, int64_t lo, int64_t hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

/* the FC requantization of an exact (or, fc_kind 0, modulo 2^32) sum plus its bias */
static inline int64_t fc_requant(int kind, int64_t acc, int64_t Q, int64_t S) {
    if (kind == 0) return mbqm(wrap32(acc), Q, S, 0);
    if (kind == 1) { /* MultiplyByQuantizedMultiplier(int64_t x, ...): Q reduced to 16 bits; total in [8, 46] */
        const int64_t qr = Q < 0x7FFF0000 ? (Q + (1 << 15)) >> 16 : 0x7FFF, total = 15 - S;
        return wrap32((acc * qr + ((int64_t)1 << (total - 1))) >> total);
    }
    const int64_t r = wrap32((acc * Q) >> (14 - S)); /* arm_nn_requantize_s64: S <= 14 */
    return wrap32(r + 1) >> 1;
}

/* One MBQM (Q, shift) prepared for its loop: the branch-free int32 form rq_double (vectorised) where 0 < Q < 2^31
 * (SRDHM's INT32_MIN x INT32_MIN case impossible), else the general mbqm. */
typedef struct {
    int64_t Q, S, L, R, nud, rpos;
    int fast;
} req_t;

static inline req_t req_prep(int64_t Q, int64_t S) {
    req_t r = {Q, S, S > 0 ? S : 0, S < 0 ? -S : 0, 0, S < 0, Q > 0 && Q < ((int64_t)1 << 31)};
    r.nud = r.R > 0 ? (int64_t)1 << (r.R - 1) : 0;
    return r;
}

/* MBQM of an int32 value x (int64-held) */
static inline int64_t req_apply(const req_t *r, int64_t x) {
    return r->fast ? rq_double((int32_t)x, (int32_t)r->Q, r->L, r->R, r->nud, r->rpos) : mbqm(x, r->Q, r->S, 0);
}

/* out[k] = (clamp16 if sat)(Rfc(acc[k] + bias[k])) for k < n, one loop per kind (no branch inside: they
 * vectorise); fc_kind 0 reads the int32 sums acc32 (modulo 2^32: the int32 sum with the bias wraps as in C), the
 * others the int64 ones */
static void fc_block(int kind, const int32_t *restrict acc32, const int64_t *restrict acc, const int64_t *restrict bias,
                     int64_t Q, int64_t S, int n, int sat, int32_t *restrict out) {
    if (kind == 0) {
        const req_t r = req_prep(Q, S);
        if (r.fast)
            for (int k = 0; k < n; k++) {
                const int32_t x = (int32_t)((uint32_t)acc32[k] + (uint32_t)bias[k]);
                const int64_t v = rq_double(x, (int32_t)r.Q, r.L, r.R, r.nud, r.rpos);
                out[k] = (int32_t)(sat ? clamp16(v) : v);
            }
        else
            for (int k = 0; k < n; k++) {
                const int64_t v = fc_requant(0, (int64_t)acc32[k] + bias[k], Q, S);
                out[k] = (int32_t)(sat ? clamp16(v) : v);
            }
    } else if (kind == 1) { /* fc_requant with a constant kind: its loop-invariant parts leave the loop */
        for (int k = 0; k < n; k++) {
            const int64_t v = fc_requant(1, acc[k] + bias[k], Q, S);
            out[k] = (int32_t)(sat ? clamp16(v) : v);
        }
    } else {
        for (int k = 0; k < n; k++) {
            const int64_t v = fc_requant(2, acc[k] + bias[k], Q, S);
            out[k] = (int32_t)(sat ? clamp16(v) : v);
        }
    }
}

/* fc_block on one sum, for the tests (tests/test_micro_lstm.py: against numerics.core and the CMSIS-NN port): the
 * loops' own code, the vectorised MBQM where 0 < Q < 2^31 included */
int64_t micro_requant(int32_t kind, int64_t acc, int64_t Q, int64_t S) {
    const int32_t acc32 = (int32_t)wrap32(acc);
    const int64_t bias = 0;
    int32_t out;
    fc_block(kind, &acc32, &acc, &bias, Q, S, 1, 0, &out);
    return out;
}

/* out[r, n] = sum_k x[r, k] P[k / 2, n, k % 2] exactly, for int16 rows x [R, Kp] (Kp even) and pairs P (N a
 * multiple of 16; tmp: scratch of N int32) */
#if defined(__AVX512BW__)
#include <immintrin.h>
/* vpmaddwd: a broadcast pair of x times 16 columns' pairs; RB rows x NV vectors of 16 columns at a time (each
 * weight vector loaded once for RB rows), int32 sums over a chunk of pairs, then added to the int64 output */
#define PAIRS_TILE(RB, NV)                                                                                        \
    do {                                                                                                          \
        for (int k0 = 0; k0 < Kp / 2; k0 += PAIR_CHUNK) {                                                         \
            const int k1 = k0 + PAIR_CHUNK < Kp / 2 ? k0 + PAIR_CHUNK : Kp / 2;                                   \
            __m512i s[4][4];                                                                                      \
            for (int q = 0; q < (RB); q++)                                                                        \
                for (int v = 0; v < (NV); v++) s[q][v] = _mm512_setzero_si512();                                  \
            for (int kp = k0; kp < k1; kp++) {                                                                    \
                const int16_t *w = P + ((int64_t)kp * N + j) * 2;                                                 \
                __m512i wv[4];                                                                                    \
                for (int v = 0; v < (NV); v++) wv[v] = _mm512_loadu_si512(w + 32 * v);                            \
                for (int q = 0; q < (RB); q++) {                                                                  \
                    const __m512i xb = _mm512_set1_epi32(xp[(int64_t)q * (Kp / 2) + kp]);                         \
                    for (int v = 0; v < (NV); v++) s[q][v] = _mm512_add_epi32(s[q][v], _mm512_madd_epi16(xb, wv[v])); \
                }                                                                                                 \
            }                                                                                                     \
            for (int q = 0; q < (RB); q++)                                                                        \
                for (int v = 0; v < (NV); v++) {                                                                  \
                    int64_t *o = out + (int64_t)(r + q) * N + j + 16 * v;                                         \
                    __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(s[q][v]));                          \
                    __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(s[q][v], 1));                    \
                    if (k0) {                                                                                     \
                        lo = _mm512_add_epi64(lo, _mm512_loadu_si512(o));                                         \
                        hi = _mm512_add_epi64(hi, _mm512_loadu_si512(o + 8));                                     \
                    }                                                                                             \
                    _mm512_storeu_si512(o, lo);                                                                   \
                    _mm512_storeu_si512(o + 8, hi);                                                               \
                }                                                                                                 \
        }                                                                                                         \
    } while (0)

static void pairs_gemm(const int16_t *restrict x, int Kp, const int16_t *restrict P, int N, int R,
                       int64_t *restrict out, int32_t *restrict tmp) {
    (void)tmp;
    int r = 0;
    for (; r + 4 <= R; r += 4) {
        const int32_t *xp = (const int32_t *)(x + (int64_t)r * Kp);
        int j = 0;
        for (; j + 64 <= N; j += 64) PAIRS_TILE(4, 4);
        for (; j < N; j += 16) PAIRS_TILE(4, 1);
    }
    for (; r < R; r++) {
        const int32_t *xp = (const int32_t *)(x + (int64_t)r * Kp);
        int j = 0;
        for (; j + 64 <= N; j += 64) PAIRS_TILE(1, 4);
        for (; j < N; j += 16) PAIRS_TILE(1, 1);
    }
}
#undef PAIRS_TILE
#else
static void pairs_gemm(const int16_t *restrict x, int Kp, const int16_t *restrict P, int N, int R,
                       int64_t *restrict out, int32_t *restrict tmp) {
    for (int r = 0; r < R; r++) {
        const int16_t *xr = x + (int64_t)r * Kp;
        int64_t *o = out + (int64_t)r * N;
        for (int n = 0; n < N; n++) o[n] = 0;
        for (int k0 = 0; k0 < Kp / 2; k0 += PAIR_CHUNK) {
            const int k1 = k0 + PAIR_CHUNK < Kp / 2 ? k0 + PAIR_CHUNK : Kp / 2;
            for (int n = 0; n < N; n++) tmp[n] = 0;
            for (int kp = k0; kp < k1; kp++) {
                const int32_t x0 = xr[2 * kp], x1 = xr[2 * kp + 1];
                const int16_t *restrict p = P + (int64_t)kp * N * 2;
                for (int n = 0; n < N; n++) tmp[n] += x0 * p[2 * n] + x1 * p[2 * n + 1];
            }
            for (int n = 0; n < N; n++) o[n] += tmp[n];
        }
    }
}
#endif

/* the products of R int16 rows x [R, Kp] with one weight matrix (see the header): into acc32 (their values modulo
 * 2^32, all that fc_kind 0 reads) for 8-bit activations, else into acc64 (exact) */
static void products(const micro_args *a, const int16_t *x, int Kp, const int16_t *P, const int8_t *Q8,
                     const int32_t *off, int R) {
    const int N = a->N;
#if I8DOT_VNNI
    if (Q8 && !a->wide) {
        const int K4 = (Kp + 3) & ~3;
        i8dot_offset_rows16(x, Kp, Kp, a->xu, K4, R);
        i8dot_gemm(a->xu, K4, Q8, off, a->acc32, N, R, N);
        return;
    }
#else
    (void)Q8;
    (void)off;
#endif
    pairs_gemm(x, Kp, P, N, R, a->acc64, a->acc32);
    if (!a->wide)
        for (int64_t i = 0; i < (int64_t)R * N; i++) a->acc32[i] = (int32_t)a->acc64[i];
}

/* the input terms of the steps n0 .. n0 + ts - 1 (processing order): gin[j * B + b, n] for the step's time t */
static void input_terms(const micro_args *a, const void *x, int32_t n0, int32_t ts, int32_t reverse) {
    const int B = a->B, I = a->I, H = a->H, R = ts * B;
    for (int j = 0; j < ts; j++) {
        const int64_t t = reverse ? a->T - 1 - (n0 + j) : n0 + j;
        for (int b = 0; b < B; b++) {
            int16_t *restrict dst = a->xs + ((int64_t)j * B + b) * a->Ki;
            const int64_t src = (t * B + b) * (int64_t)I;
            if (a->wide)
                for (int k = 0; k < I; k++) dst[k] = ((const int16_t *)x)[src + k];
            else
                for (int k = 0; k < I; k++) dst[k] = ((const int8_t *)x)[src + k];
        }
    }
    products(a, a->xs, a->Ki, a->Wp, a->W8, a->Woff, R);
    for (int r = 0; r < R; r++)
        for (int g = 0; g < 4; g++)
            fc_block(a->fc_kind, a->acc32 + (int64_t)r * a->N + g * H, a->acc64 + (int64_t)r * a->N + g * H,
                     a->in_bias + g * H, a->in_q[g], a->in_s[g], H, 1, a->gin + (int64_t)r * 4 * H + g * H);
}

/* the cell and hidden update of one row's H units from its pre-activations (see the header), the three MBQMs given
 * as expressions; tables, rows and outputs as restrict parameters, so that the fast form vectorises */
#define CELL_LOOP(FC, IG, HID)                                                                                   \
    const int64_t sat_ig = a->sat_ig, c_lo1 = a->c_lo1, c_hi1 = a->c_hi1, c_lo2 = a->c_lo2, c_hi2 = a->c_hi2;   \
    const int64_t zp_h = a->zp_h, act_lo = a->act_lo, act_hi = a->act_hi;                                       \
    const int32_t *restrict ti = a->tab[0], *restrict tf = a->tab[1], *restrict tc = a->tab[2];                 \
    const int32_t *restrict to = a->tab[3], *restrict tanh_c = a->tanh_c;                                      \
    for (int k = 0; k < a->H; k++) {                                                                             \
        const int32_t gi = ti[(pi[k] + 32768) & 0xFFFF], gf = tf[(pf[k] + 32768) & 0xFFFF];                      \
        const int32_t gc = tc[(pc[k] + 32768) & 0xFFFF], go = to[(po[k] + 32768) & 0xFFFF];                      \
        const int64_t fc = clamp16(FC);                                                                          \
        const int64_t ig0 = IG, ig = sat_ig ? clamp16(ig0) : ig0;                                                \
        const int64_t cn = np_clip(np_clip(fc + ig, c_lo1, c_hi1), c_lo2, c_hi2);                               \
        c[k] = (int32_t)cn;                                                                                      \
        const int32_t th = tanh_c[((int32_t)cn + 32768) & 0xFFFF]; /* cn is in int16: checked by the plan */    \
        h[k] = (int16_t)sat((HID) + zp_h, act_lo, act_hi);                                                       \
    }

/* with 0 < Q < 2^31 for the three MBQMs: rq_double, no branch */
static void cell_fast(const micro_args *a, const int32_t *restrict pi, const int32_t *restrict pf,
                      const int32_t *restrict pc, const int32_t *restrict po, int32_t *restrict c,
                      int16_t *restrict h, const req_t *rf, const req_t *ri, const req_t *rh) {
    const req_t f = *rf, i = *ri, o = *rh;
    CELL_LOOP(rq_double(gf * c[k], (int32_t)f.Q, f.L, f.R, f.nud, f.rpos),
              rq_double(gi * gc, (int32_t)i.Q, i.L, i.R, i.nud, i.rpos),
              rq_double(th * go, (int32_t)o.Q, o.L, o.R, o.nud, o.rpos))
}

static void cell_general(const micro_args *a, const int32_t *restrict pi, const int32_t *restrict pf,
                         const int32_t *restrict pc, const int32_t *restrict po, int32_t *restrict c,
                         int16_t *restrict h, const req_t *rf, const req_t *ri, const req_t *rh) {
    CELL_LOOP(req_apply(rf, (int64_t)gf * c[k]), req_apply(ri, (int64_t)gi * gc), req_apply(rh, (int64_t)th * go))
}
#undef CELL_LOOP

/* steps 0 .. T-1 (descending time when reverse); x: activation codes [T, B, I], y: [T, B, H] (int8 or int16) */
int micro_lstm(const micro_args *a, const void *x, void *y, int32_t reverse) {
    const int T = a->T, B = a->B, H = a->H, G4 = 4 * H;
    const req_t rfc = req_prep(a->fc_q, a->fc_s), ric = req_prep(a->ic_q, a->ic_s), rh = req_prep(a->hid_q, a->hid_s);
    const int fast = rfc.fast && ric.fast && rh.fast;
    for (int32_t n = 0, n0 = 0; n < T; n++) {
        const int64_t t = reverse ? T - 1 - n : n;
        if (n == 0 || n == n0 + a->ts) {
            n0 = n;
            input_terms(a, x, n0, T - n0 < a->ts ? T - n0 : a->ts, reverse);
        }
        const int32_t *gin = a->gin + (int64_t)(n - n0) * B * G4;
        const int rec = n > 0 || a->first_rec;
        if (rec) products(a, a->h, a->Kh, a->Rp, a->R8, a->Roff, B);
        for (int b = 0; b < B; b++)
            for (int g = 0; g < 4; g++) {
                const int32_t *restrict in = gin + (int64_t)b * G4 + g * H;
                int32_t *restrict pre = a->pre + (int64_t)b * G4 + g * H;
                if (!rec) {
                    for (int k = 0; k < H; k++) pre[k] = in[k];
                    continue;
                }
                fc_block(a->fc_kind, a->acc32 + (int64_t)b * a->N + g * H, a->acc64 + (int64_t)b * a->N + g * H,
                         a->rec_bias + g * H, a->rec_q[g], a->rec_s[g], H, a->sat_rec, pre);
                for (int k = 0; k < H; k++) pre[k] = (int32_t)clamp16((int64_t)in[k] + pre[k]);
            }
        for (int b = 0; b < B; b++) {
            const int32_t *restrict pi = a->pre + (int64_t)b * G4, *restrict pf = pi + H, *restrict pc = pi + 2 * H;
            const int32_t *restrict po = pi + 3 * H;
            int32_t *restrict c = a->c + (int64_t)b * H;
            int16_t *restrict h = a->h + (int64_t)b * a->Kh;
            if (fast)
                cell_fast(a, pi, pf, pc, po, c, h, &rfc, &ric, &rh);
            else
                cell_general(a, pi, pf, pc, po, c, h, &rfc, &ric, &rh);
            if (a->wide) memcpy((int16_t *)y + (t * B + b) * H, h, sizeof(int16_t) * H);
            else
                for (int k = 0; k < H; k++) ((int8_t *)y)[(t * B + b) * H + k] = (int8_t)h[k];
        }
    }
    return 0;
}

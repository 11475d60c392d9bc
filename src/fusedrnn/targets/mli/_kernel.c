/* fusedrnn MLI compiled recurrence: the time loops of the MLI 2.0 LSTM / GRU cells (cells.py) and the MLI 1.x
 * LSTM cell (mli1.py), bit-exact with those NumPy paths, which stay the reference.
 *
 * Built by fusedrnn._native per instruction-set level (ctypes, no Python C-API). The Python side precomputes
 * the input partials of every step (products from mli_i8_products for sa8, else one exact float GEMM, finished by
 * mli2_partials) and every table: activations (all possible inputs) and, for sa8, the element-wise MUL / ADD /
 * SUB of every int8 operand pair. This file does per step the recurrent dot products (exact integer arithmetic),
 * their requantization, the saturating sum with the input partial, and the element-wise cell update. Integer
 * helpers mirror _arith.py (mli_math.h semantics). Where every partial sum provably fits int32 (sa8, fx16_fx8_fx8
 * without wrapping), the recurrent product is an int16 multiply-add GEMM on pair-packed weights (gemm32: AVX-512
 * and AVX2 panels of one macro, or plain C; sa8 with AVX-512 VNNI: vpdpbusd on int8 quads, ../_int8_dot.h), and
 * requantizations whose parameters rule out saturation use rq_fast (same results, vectorisable).
 */
#include <stdint.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "../_int8_dot.h"

#define MLI_ABI 5
int mli_abi_version(void) { return MLI_ABI; }

/* ---- mli_math.h primitives on int64 values (see _arith.py) ------------------------------------------------ */
static inline int64_t hi_w(int w) { return w >= 64 ? INT64_MAX : (((int64_t)1 << (w - 1)) - 1); }
static inline int64_t sat_w(int64_t x, int w) {
    if (w >= 64) return x;
    int64_t hi = hi_w(w), lo = -hi - 1;
    return x < lo ? lo : (x > hi ? hi : x);
}
static inline int64_t wrap32(int64_t x) { return (int64_t)(int32_t)(uint32_t)(uint64_t)x; }
static inline int64_t add_sat_w(int64_t a, int64_t b, int w) {
    if (w < 64) return sat_w((int64_t)((uint64_t)a + (uint64_t)b), w);
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return a > 0 ? INT64_MAX : INT64_MIN;
    return r;
}
static inline int64_t asl_w(int64_t x, int n, int w) {
    if (n < 0) return x >> (-n > 63 ? 63 : -n);
    int64_t hi = hi_w(w), lo = -hi - 1;
    if (n > w - 1) return x > 0 ? hi : (x < 0 ? lo : 0);
    if (w <= 32) return sat_w((int64_t)((uint64_t)x << n), w);
    return x > (hi >> n) ? hi : (x < (lo >> n) ? lo : (int64_t)((uint64_t)x << n));
}
/* mli_math_asr_rnd_fx<intW>: mode 0 ROUND_UP (the add saturates), 1 ROUND_CONVERGENT */
static inline int64_t rnd_w(int64_t x, int n, int w, int mode) {
    if (n < 0) return asl_w(x, -n, w);
    if (n == 0) return x;
    if (n > w - 1) return 0;
    int64_t c = (w >= 32 && n == w - 1) ? -((int64_t)1 << (w - 2)) : ((int64_t)1 << (n - 1));
    if (mode == 0) return add_sat_w(x, c, w) >> n;
    int64_t r = x >> n;
    return r + (((x & c) != 0) & (((r & 1) != 0) | ((x & (c - 1)) != 0)));
}

enum { FL_SA8, FL_FX16, FL_FX16_8_8 };

/* A requantization rnd_w(x, sh, w) with loop-invariant parameters, on the fast path where no saturation can occur:
 * sa8: x = s·mul with |s| < 2^31, |mul| < 2^31 (so |x| < 2^62) and 1 <= sh <= 62; fx16: 1 <= sh <= 39 on an exact
 * sum far from 2^63; fx16_fx8_fx8: 1 <= sh <= 30 on an int32 value (the ROUND_UP add saturates at INT32_MAX). */
typedef struct { int64_t mul, c, mask; int32_t sh, fast; } rq_t;

static inline rq_t rq_prep(int flavor, const int64_t *mul, const int64_t *shift, int g) {
    rq_t q = {0, 0, 0, 0, 0};
    if (flavor == FL_SA8) {
        int64_t sh = shift[g] > 63 ? 63 : shift[g];
        q.mul = mul[g];
        q.sh = (int32_t)sh;
        q.fast = sh >= 1 && sh <= 62 && q.mul > -((int64_t)1 << 31) && q.mul < ((int64_t)1 << 31);
    } else if (flavor == FL_FX16) {
        int64_t sh = shift[0] > 39 ? 39 : shift[0];
        q.sh = (int32_t)sh;
        q.fast = sh >= 1;
    } else {
        q.sh = (int32_t)shift[0];
        q.fast = q.sh >= 1 && q.sh <= 30;
    }
    if (q.fast) {
        q.c = (int64_t)1 << (q.sh - 1);
        q.mask = ((int64_t)1 << q.sh) - 1;
    }
    return q;
}

#define AIF static inline __attribute__((always_inline))
AIF int64_t rq_fast(const int flavor, const int mode, int64_t s, const rq_t q) {
    int64_t x = flavor == FL_SA8 ? s * q.mul : s, r;
    if (mode == 0) {
        x += q.c;
        if (flavor == FL_FX16_8_8) x = x > INT32_MAX ? INT32_MAX : x;
        r = x >> q.sh;
    } else {
        r = x >> q.sh;
        const int64_t rem = x & q.mask;
        r += (rem > q.c) | ((rem == q.c) & (r & 1));
    }
    if (flavor == FL_SA8) r = r < INT32_MIN ? INT32_MIN : (r > INT32_MAX ? INT32_MAX : r);
    return r;
}

/* ---- element-wise ops and activations -------------------------------------------------------------------- */
typedef struct {
    const int16_t *tab; /* sa8: [65536] indexed ((a + 128) << 8) + (b + 128); NULL: the fx16 formula */
    int32_t kind;       /* fx16: 0 MUL, 1 ADD, 2 SUB */
    int32_t sa, sb, so; /* MUL: so = min(f1 + f2 - fo, 31); ADD/SUB: sa, sb <= 0 alignments, so output shift */
} binop;

typedef struct {
    const int16_t *tab; /* y = tab[x + off] for every possible input x */
    int32_t off, pad;
    const int32_t *tab32; /* sa8: the same table widened to int32 (vector gathers), else NULL */
} act_t;

#define AI static inline __attribute__((always_inline))
AI int64_t bin(const binop *op, int64_t a, int64_t b, int mode, int sa8) {
    if (sa8) return op->tab[((a + 128) << 8) + (b + 128)];
    if (op->tab) return op->tab[((a + 128) << 8) + (b + 128)];
    if (op->kind == 0) return sat_w(rnd_w(a * b, op->so, 64, mode), 16);
    int64_t x = rnd_w(a, op->sa, 32, mode), y = rnd_w(b, op->sb, 32, mode);
    int64_t s = sat_w(op->kind == 1 ? x + y : x - y, 32);
    return sat_w(rnd_w(s, op->so, 64, mode), 16);
}
static inline int64_t act(const act_t *a, int64_t x) { return a->tab[x + a->off]; }

/* sa8 MUL / ADD / SUB computed from their parameters (eltwise.py sa8_mul / sa8_addsub) on int8 operands, where
 * the parameters rule out every saturating shift (the Python side decides ``fast``; otherwise the table is used):
 * MUL: p = sat16(a - z1)·sat16(b - z2) (|p| <= 2^30), p16 = sat16(rnd32(p, s1)) with 0 <= s1 <= 3,
 *      t = sat16(rnd32(p16·m1, s2)) with 1 <= s2 <= 30;
 * ADD/SUB: v_i = rnd32(sat16(x_i - z_i)·m_i, s_i) with 0 <= s_i <= 30, s = sat16(v1 ± v2) (= sat16(sat32(.)));
 * then y = sat8(sat16(t + zo)). All products fit int32, so these are the rnd_w results without saturation. */
typedef struct {
    int32_t kind, fast;     /* kind 0 MUL, 1 ADD, 2 SUB */
    int32_t z1, z2, zo, m1, m2, s1, s2, pad;
} ew_t;

AI int32_t sat_i(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : (x > hi ? hi : x); }
/* rnd32 by 0 <= n <= 30 of |x| <= 2^30 (no saturation): ROUND_UP or ROUND_CONVERGENT */
AI int32_t rnd_s(int32_t x, int32_t n, const int mode) {
    const int32_t c = n > 0 ? (int32_t)1 << (n - 1) : 0;
    if (mode == 0) return (x + c) >> n;
    const int32_t r = x >> n, rem = x & (((int32_t)1 << n) - 1);
    return r + ((n > 0) & ((rem > c) | ((rem == c) & (r & 1))));
}
AI int32_t ew_mul(const ew_t e, int32_t a, int32_t b, const int mode) {
    const int32_t p = sat_i(a - e.z1, -32768, 32767) * sat_i(b - e.z2, -32768, 32767);
    const int32_t p16 = sat_i(rnd_s(p, e.s1, mode), -32768, 32767);
    const int32_t t = sat_i(rnd_s(p16 * e.m1, e.s2, mode), -32768, 32767);
    return sat_i(t + e.zo, -128, 127); /* |t + zo| < 2^16: sat8(sat16(.)) = sat8(.) */
}
AI int32_t ew_add(const ew_t e, int32_t a, int32_t b, const int sub, const int mode) {
    const int32_t v1 = rnd_s(sat_i(a - e.z1, -32768, 32767) * e.m1, e.s1, mode);
    const int32_t v2 = rnd_s(sat_i(b - e.z2, -32768, 32767) * e.m2, e.s2, mode);
    const int64_t s = sub ? (int64_t)v1 - v2 : (int64_t)v1 + v2;
    const int32_t s16 = (int32_t)(s < -32768 ? -32768 : (s > 32767 ? 32767 : s));
    return sat_i(s16 + e.zo, -128, 127);
}

/* out[i] = op(a[i], b[i]) for i < n: one pass (table look-ups independent; the sa8 fast path vectorises) */
AI void ew_pass(const binop *op, const ew_t *e, const int64_t *a, const int64_t *b, int64_t *out, int n,
                const int mode, const int sa8) {
    if (sa8 && e->fast) {
        const ew_t q = *e;
        if (q.kind == 0) {
            for (int i = 0; i < n; i++) out[i] = ew_mul(q, (int32_t)a[i], (int32_t)b[i], mode);
        } else if (q.kind == 1) {
            for (int i = 0; i < n; i++) out[i] = ew_add(q, (int32_t)a[i], (int32_t)b[i], 0, mode);
        } else {
            for (int i = 0; i < n; i++) out[i] = ew_add(q, (int32_t)a[i], (int32_t)b[i], 1, mode);
        }
        return;
    }
    for (int i = 0; i < n; i++) out[i] = bin(op, a[i], b[i], mode, sa8);
}

/* test entry point: out[i] = op(a[i], b[i]) through ew_pass (sa8: the fast path when e->fast, else the table) */
typedef struct {
    binop op;
    ew_t e;
    int32_t n, mode, sa8, pad;
    const int64_t *a, *b;
    int64_t *out;
} ew_args;

int mli2_eltwise(const ew_args *x) {
    if (x->mode == 0) ew_pass(&x->op, &x->e, x->a, x->b, x->out, x->n, 0, x->sa8);
    else ew_pass(&x->op, &x->e, x->a, x->b, x->out, x->n, 1, x->sa8);
    return 0;
}

/* ---- recurrent dot products: exact, or wrapped to int32 as MLI's 32-bit accumulators ------------------------ */
static inline int32_t dot32(const int16_t *restrict a, const int16_t *restrict b, int K) {
    int32_t s = 0; /* callers use it only where |sum| < 2^31 is proven */
    for (int k = 0; k < K; k++) s += (int32_t)a[k] * (int32_t)b[k];
    return s;
}
static inline int64_t dot64(const int16_t *restrict a, const int16_t *restrict b, int K) {
    int64_t s = 0;
    for (int k = 0; k < K; k++) s += (int64_t)((int32_t)a[k] * (int32_t)b[k]);
    return s;
}

typedef struct {
    int32_t flavor, mode, T, B, M, K;
    int32_t s0, s1, reverse, r0_64;
    int32_t wrap, acc64;        /* wrap: the accumulator may leave int32 (wrap it); acc64: sum in int64 */
    int32_t io_lo, io_hi;       /* IR clamp of the 32-bit flavours */
    int32_t zp_in, has_out_act; /* recurrent input zero point (sa8); LSTM output activation present */
    int64_t mul[4], shift[4];   /* recurrent requantization per gate block (sa8: multiplier and shift; fx: shift) */
    int64_t one;                /* GRU "one" */
    const void *r0, *r0n;       /* input partials [T, B, G*M] (int32 or int64); GRU new gate [T, B, M] */
    const int16_t *W, *Wn;      /* recurrent weights transposed: [G*M, K]; GRU new gate [M, K] */
    const int64_t *cs, *csn;    /* their column sums (sa8 zero-point term) */
    act_t sig, tnh, actc;       /* sigmoid / tanh of the IR; output activation of the cell (LSTM) */
    binop op[5];
    const uint8_t *valid;       /* [T, B] in processing order, or NULL */
    int64_t *h, *c;             /* [B, M] states, updated */
    int64_t *Y;                 /* [T, B, M] processing order */
    int16_t *hk;                /* scratch [B, K] */
    int64_t *acc;               /* scratch [B, G*M] */
    int64_t *tmp;               /* scratch [B, 4*M] */
    int32_t Kp, np_w, np_n, pad2; /* K rounded up to even (row stride of hk); padded columns of W2 / Wn2 */
    const int16_t *W2, *Wn2;    /* int32-exact path: weights as [Kp/2, np, 2] pairs (NULL: the dot products) */
    int32_t *acc32;             /* scratch [B, max(np_w, np_n)] */
    ew_t ew[5];                 /* sa8: op[k] from its parameters where ew[k].fast */
    const int8_t *W8, *Wn8;     /* sa8: W2 / Wn2 as int8 quads [K4 / 4, np, 4] for i8dot_gemm (NULL: gemm32) */
    const int32_t *off_w, *off_n; /* their offsets -128 * column sum (_int8_dot.h) */
    uint8_t *xu;                /* scratch [B, K4] */
    float *yf;                  /* NULL, or Y's real values: yf[t * ldy + b * M + m] (t in time order) */
    int64_t ldy, y_zp;          /* the time stride of yf (elements); Y's zero point */
    double y_scale;             /* Y's scale: yf = float32((y - y_zp) * y_scale), in double, rounded once */
} mli2_args;

/* row b of step s (time index t) into the outputs: Y's integer codes [T, B, M] in processing order where a->Y is
 * not NULL, and their real values into yf where it is not NULL (the dequantization of target.py, the same bits:
 * q - zp is exact in double, one product, one rounding to float32) */
static inline void y_row(const mli2_args *a, int s, int t, int b, const int64_t *restrict h) {
    const int M = a->M;
    if (a->Y) memcpy(a->Y + ((int64_t)s * a->B + b) * M, h, sizeof(int64_t) * M);
    if (a->yf) {
        float *restrict o = a->yf + (int64_t)t * a->ldy + (int64_t)b * M;
        const double sc = a->y_scale;
        const int64_t zp = a->y_zp;
        for (int m = 0; m < M; m++) o[m] = (float)((double)(h[m] - zp) * sc);
    }
}

/* input partials: int64 for fx16, int32 otherwise (``flavor`` is a compile-time constant where it is used) */
#define R0(p, i) (flavor == FL_FX16 ? ((const int64_t *)(p))[i] : (int64_t)((const int32_t *)(p))[i])

/* requant_partial (dense.py) of an accumulator s for gate block g */
AI int64_t requant(int flavor, int mode, const int64_t *mul, const int64_t *shift, int g, int64_t s) {
    if (flavor == FL_SA8) {
        int64_t sh = shift[g] > 63 ? 63 : shift[g];
        return sat_w(rnd_w((int64_t)((uint64_t)s * (uint64_t)mul[g]), (int)sh, 64, mode), 32);
    }
    if (flavor == FL_FX16) return rnd_w(s, (int)(shift[0] > 39 ? 39 : shift[0]), 64, mode);
    return rnd_w(s, (int)shift[0], 32, mode);
}

/* first_partial (dense.py) from exact products (float, or int32 from mli_i8_products): r_0 = requant(wrap(acc -
 * zp·colsum + bias)) */
typedef struct {
    int32_t flavor, mode, R, N, G, ld; /* rows, columns, gate blocks (N / G columns each), row stride of accf */
    int32_t f64, out64, zp_in, pad;    /* f64: accf is float32 (0), float64 (1) or int32 (2: mli_i8_products) */
    int64_t mul[4], shift[4];
    const void *accf;                  /* [R, ld] float32 or float64 holding exact integers, or int32 (mod 2^32) */
    const int64_t *cs, *bias;          /* [N] */
    void *out;                         /* [R, N] int32 or int64 */
} part_args;

AI void partials_rows(const part_args *a, const int flavor, const int mode, const int f64, const int out64) {
    const int N = a->N, G = a->G, w = N / G;
    const int64_t zp = a->zp_in;
    for (int g = 0; g < G; g++) {
        const rq_t q = rq_prep(flavor, a->mul, a->shift, g);
        const int64_t *restrict cs = a->cs + (int64_t)g * w, *restrict bias = a->bias + (int64_t)g * w;
        for (int64_t r = 0; r < a->R; r++) {
            const int64_t i0 = r * a->ld + (int64_t)g * w, o0 = r * N + (int64_t)g * w;
            const double *restrict fd = (const double *)a->accf + i0;
            const float *restrict ff = (const float *)a->accf + i0;
            const int32_t *restrict fi = (const int32_t *)a->accf + i0;
            int64_t *restrict o64 = (int64_t *)a->out + o0;
            int32_t *restrict o32 = (int32_t *)a->out + o0;
#define PART_BODY(RQ)                                                                       \
            for (int j = 0; j < w; j++) {                                                   \
                int64_t v = (f64 == 2 ? (int64_t)fi[j] : f64 ? (int64_t)fd[j] : (int64_t)ff[j]) - zp * cs[j] + bias[j]; \
                if (flavor != FL_FX16) v = wrap32(v);                                       \
                v = RQ;                                                                     \
                if (out64) o64[j] = v;                                                      \
                else o32[j] = (int32_t)v;                                                   \
            }
            if (q.fast) {
                PART_BODY(rq_fast(flavor, mode, v, q))
            } else {
                PART_BODY(requant(flavor, mode, a->mul, a->shift, g, v))
            }
#undef PART_BODY
        }
    }
}

AI int partials_impl(const part_args *a, const int flavor, const int mode) {
    if (a->f64 == 2) { /* sa8 only: the int32 sums wrap like the int32 value v */
        if (a->out64) partials_rows(a, flavor, mode, 2, 1);
        else partials_rows(a, flavor, mode, 2, 0);
    } else if (a->f64) {
        if (a->out64) partials_rows(a, flavor, mode, 1, 1);
        else partials_rows(a, flavor, mode, 1, 0);
    } else {
        if (a->out64) partials_rows(a, flavor, mode, 0, 1);
        else partials_rows(a, flavor, mode, 0, 0);
    }
    return 0;
}

/* acc32[b, n] = sum_k hk[b, k] * W[k, n] for an int32-exact product (|pair sums| < 2^31): W stored as pairs
 * W2[k / 2, n, 2] (K and the columns zero-padded to Kp even and np % 16 == 0), so that one multiply-add of int16
 * lanes adds two k terms to each column. */
#if defined(__AVX2__)
/* gemm32 over columns [n_from, n_to) (a multiple of 2L) with vectors V of L int32 lanes: panels of 2L columns,
 * 4 rows x 2 vectors per tile, then each remaining row with two independent chains. ZERO, LOAD, STORE, SET1 and
 * ADD are V's intrinsics; DPW(c, x, w) adds the int16 pair products of x and w to c (wrapping, as madd + add). */
#define GEMM32_PANELS(NAME, V, L, ZERO, LOAD, STORE, SET1, ADD, DPW)                                              \
    static void NAME(const int16_t *restrict hk, const int16_t *restrict W2, int B, int Kp, int np, int n_from,  \
                     int n_to, int32_t *restrict acc) {                                                          \
        const int KP = Kp / 2;                                                                                   \
        for (int n0 = n_from; n0 < n_to; n0 += 2 * (L)) {                                                        \
            int b = 0;                                                                                           \
            for (; b + 4 <= B; b += 4) {                                                                         \
                V c00 = ZERO(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;     \
                const int16_t *h0 = hk + (int64_t)b * Kp, *h1 = h0 + Kp, *h2 = h1 + Kp, *h3 = h2 + Kp;           \
                for (int kp = 0; kp < KP; kp++) {                                                                \
                    const int16_t *wp = W2 + ((int64_t)kp * np + n0) * 2;                                        \
                    const V w0 = LOAD(wp);                                                                       \
                    const V w1 = LOAD(wp + 2 * (L));                                                             \
                    int32_t p0, p1, p2, p3;                                                                      \
                    memcpy(&p0, h0 + 2 * kp, 4);                                                                 \
                    memcpy(&p1, h1 + 2 * kp, 4);                                                                 \
                    memcpy(&p2, h2 + 2 * kp, 4);                                                                 \
                    memcpy(&p3, h3 + 2 * kp, 4);                                                                 \
                    V x = SET1(p0);                                                                              \
                    c00 = DPW(c00, x, w0);                                                                       \
                    c01 = DPW(c01, x, w1);                                                                       \
                    x = SET1(p1);                                                                                \
                    c10 = DPW(c10, x, w0);                                                                       \
                    c11 = DPW(c11, x, w1);                                                                       \
                    x = SET1(p2);                                                                                \
                    c20 = DPW(c20, x, w0);                                                                       \
                    c21 = DPW(c21, x, w1);                                                                       \
                    x = SET1(p3);                                                                                \
                    c30 = DPW(c30, x, w0);                                                                       \
                    c31 = DPW(c31, x, w1);                                                                       \
                }                                                                                                \
                int32_t *o = acc + (int64_t)b * np + n0;                                                         \
                STORE(o, c00);                                                                                   \
                STORE(o + (L), c01);                                                                             \
                STORE(o + np, c10);                                                                              \
                STORE(o + np + (L), c11);                                                                        \
                STORE(o + 2 * np, c20);                                                                          \
                STORE(o + 2 * np + (L), c21);                                                                    \
                STORE(o + 3 * np, c30);                                                                          \
                STORE(o + 3 * np + (L), c31);                                                                    \
            }                                                                                                    \
            for (; b < B; b++) {                                                                                 \
                V c0 = ZERO(), c1 = c0, d0 = c0, d1 = c0;                                                        \
                const int16_t *h = hk + (int64_t)b * Kp;                                                         \
                int kp = 0;                                                                                      \
                for (; kp + 2 <= KP; kp += 2) { /* two independent chains */                                     \
                    const int16_t *wp = W2 + ((int64_t)kp * np + n0) * 2;                                        \
                    int32_t p0, p1;                                                                              \
                    memcpy(&p0, h + 2 * kp, 4);                                                                  \
                    memcpy(&p1, h + 2 * kp + 2, 4);                                                              \
                    const V x0 = SET1(p0), x1 = SET1(p1);                                                        \
                    c0 = DPW(c0, x0, LOAD(wp));                                                                  \
                    c1 = DPW(c1, x0, LOAD(wp + 2 * (L)));                                                        \
                    d0 = DPW(d0, x1, LOAD(wp + 2 * np));                                                         \
                    d1 = DPW(d1, x1, LOAD(wp + 2 * np + 2 * (L)));                                               \
                }                                                                                                \
                for (; kp < KP; kp++) {                                                                          \
                    const int16_t *wp = W2 + ((int64_t)kp * np + n0) * 2;                                        \
                    int32_t p0;                                                                                  \
                    memcpy(&p0, h + 2 * kp, 4);                                                                  \
                    const V x0 = SET1(p0);                                                                       \
                    c0 = DPW(c0, x0, LOAD(wp));                                                                  \
                    c1 = DPW(c1, x0, LOAD(wp + 2 * (L)));                                                        \
                }                                                                                                \
                int32_t *o = acc + (int64_t)b * np + n0;                                                         \
                STORE(o, ADD(c0, d0));                                                                           \
                STORE(o + (L), ADD(c1, d1));                                                                     \
            }                                                                                                    \
        }                                                                                                        \
    }

#define LOAD256(p) _mm256_loadu_si256((const __m256i *)(p))
#define STORE256(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define DPW256(c, x, w) _mm256_add_epi32(c, _mm256_madd_epi16(x, w))
GEMM32_PANELS(gemm32_256, __m256i, 8, _mm256_setzero_si256, LOAD256, STORE256, _mm256_set1_epi32, _mm256_add_epi32,
              DPW256)

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define LOAD512(p) _mm512_loadu_si512((const void *)(p))
#define STORE512(p, v) _mm512_storeu_si512((void *)(p), v)
#if defined(__AVX512VNNI__)
#define DPW512(c, x, w) _mm512_dpwssd_epi32(c, x, w) /* c + pair sums, wrapping like madd + add */
#else
#define DPW512(c, x, w) _mm512_add_epi32(c, _mm512_madd_epi16(x, w))
#endif
GEMM32_PANELS(gemm32_512, __m512i, 16, _mm512_setzero_si512, LOAD512, STORE512, _mm512_set1_epi32, _mm512_add_epi32,
              DPW512)
#endif
#endif

static void gemm32(const int16_t *restrict hk, const int16_t *restrict W2, int B, int Kp, int np, int32_t *restrict acc) {
#if defined(__AVX2__)
    int nstart = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    nstart = np & ~31; /* 512-bit panels of 32 columns, the rest (16 columns at most) in 256-bit ones */
    gemm32_512(hk, W2, B, Kp, np, 0, nstart, acc);
#endif
    gemm32_256(hk, W2, B, Kp, np, nstart, np, acc);
#else
    const int KP = Kp / 2;
    for (int b = 0; b < B; b++) {
        int32_t *restrict o = acc + (int64_t)b * np;
        memset(o, 0, sizeof(int32_t) * np);
        const int16_t *h = hk + (int64_t)b * Kp;
        for (int kp = 0; kp < KP; kp++) {
            const int32_t x0 = h[2 * kp], x1 = h[2 * kp + 1];
            const int16_t *restrict wp = W2 + (int64_t)kp * np * 2;
            for (int n = 0; n < np; n++) o[n] += x0 * wp[2 * n] + x1 * wp[2 * n + 1];
        }
    }
#endif
}

/* acc[b, n] = requantized recurrent partial r_1 of outputs n in [0, N) (gate block of n: gate0 + n / M) */
AI void rec(const mli2_args *a, const int16_t *W, const int16_t *W2, const int8_t *W8, const int32_t *off, int np,
            const int64_t *cs, int N, int gate0, int64_t *restrict acc, const int flavor, const int mode) {
    const int B = a->B, K = a->K, Kp = a->Kp, M = a->M, acc64 = a->acc64, wrap = a->wrap;
    const int16_t *hk = a->hk;
    int64_t mul[4], shift[4];
    memcpy(mul, a->mul, sizeof mul);
    memcpy(shift, a->shift, sizeof shift);
    if (W2 && !acc64 && !wrap) { /* |sum| < 2^31 and every pair sum fits int32 */
#if I8DOT_VNNI
        if (flavor == FL_SA8 && W8) { /* the same sums: int8 states and weights */
            const int K4 = (K + 3) & ~3;
            i8dot_offset_rows16(hk, Kp, K, a->xu, K4, B);
            i8dot_gemm(a->xu, K4, W8, off, a->acc32, np, B, np);
        } else
#endif
        gemm32(hk, W2, B, Kp, np, a->acc32);
        (void)W8, (void)off;
        const int64_t zp = a->zp_in;
        for (int gg = 0; gg < N / M; gg++) {
            const int g = gate0 + gg;
            const rq_t q = rq_prep(flavor, mul, shift, g);
            const int64_t *restrict c = cs + (int64_t)gg * M;
            for (int b = 0; b < B; b++) {
                const int32_t *restrict s32 = a->acc32 + (int64_t)b * np + (int64_t)gg * M;
                int64_t *restrict o = acc + (int64_t)b * N + (int64_t)gg * M;
                if (q.fast) {
                    for (int m = 0; m < M; m++) o[m] = rq_fast(flavor, mode, (int64_t)s32[m] - zp * c[m], q);
                } else {
                    for (int m = 0; m < M; m++) o[m] = requant(flavor, mode, mul, shift, g, (int64_t)s32[m] - zp * c[m]);
                }
            }
        }
        return;
    }
    for (int n = 0; n < N; n++) {
        const int16_t *w = W + (int64_t)n * K;
        const int g = gate0 + n / M;
        const int64_t zc = a->zp_in ? (int64_t)a->zp_in * cs[n] : 0;
        for (int b = 0; b < B; b++) {
            int64_t s = acc64 ? dot64(hk + (int64_t)b * Kp, w, K) : (int64_t)dot32(hk + (int64_t)b * Kp, w, K);
            s -= zc;
            if (wrap) s = wrap32(s);
            int64_t r = requant(flavor, mode, mul, shift, g, s);
            acc[(int64_t)b * N + n] = r;
        }
    }
}

AI int64_t ir_of(const mli2_args *a, int64_t r0, int64_t r1, const int flavor) {
    if (flavor == FL_FX16) return sat_w(add_sat_w(r0, r1, 64), 16);
    int64_t v = r0 + r1;
    return v < a->io_lo ? a->io_lo : (v > a->io_hi ? a->io_hi : v);
}

/* sa8: out[i] = act(clamp(r0[i] + r1[i], lo, hi)) (ir_of + act), 8 lanes at a time with AVX-512 gathers */
static inline void act_pass_sa8(const act_t *t, const int32_t *r0, const int64_t *r1, int64_t *out, int n,
                                int64_t lo, int64_t hi) {
    int i = 0;
#if defined(__AVX512F__)
    if (t->tab32) {
        const __m512i vlo = _mm512_set1_epi64(lo), vhi = _mm512_set1_epi64(hi), voff = _mm512_set1_epi64(t->off);
        for (; i + 8 <= n; i += 8) {
            __m512i v = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)(r0 + i))),
                                         _mm512_loadu_si512((const void *)(r1 + i)));
            v = _mm512_add_epi64(_mm512_min_epi64(_mm512_max_epi64(v, vlo), vhi), voff);
            const __m256i g = _mm512_i64gather_epi32(v, (const void *)t->tab32, 4);
            _mm512_storeu_si512((void *)(out + i), _mm512_cvtepi32_epi64(g));
        }
    }
#endif
    for (; i < n; i++) {
        int64_t v = (int64_t)r0[i] + r1[i];
        v = v < lo ? lo : (v > hi ? hi : v);
        out[i] = t->tab[v + t->off];
    }
}

static inline void load_hk(const mli2_args *a, const int64_t *src) {
    const int K = a->K, Kp = a->Kp;
    for (int b = 0; b < a->B; b++)
        for (int k = 0; k < K; k++) a->hk[(int64_t)b * Kp + k] = (int16_t)src[(int64_t)b * K + k];
}

AI int lstm_impl(const mli2_args *a, const int flavor, const int mode) {
    const int B = a->B, M = a->M, GM = 4 * M, T = a->T, sa8 = flavor == FL_SA8;
    const act_t sig = a->sig, tnh = a->tnh, actc = a->actc;
    binop ops[5];
    memcpy(ops, a->op, sizeof ops);
    for (int s = a->s0; s < a->s1; s++) {
        const int t = a->reverse ? T - 1 - s : s;
        load_hk(a, a->h);
        rec(a, a->W, a->W2, a->W8, a->off_w, a->np_w, a->cs, GM, 0, a->acc, flavor, mode);
        for (int b = 0; b < B; b++) {
            if (a->valid && !a->valid[(int64_t)s * B + b]) {
                y_row(a, s, t, b, a->h + (int64_t)b * M);
                continue;
            }
            const int64_t base = ((int64_t)t * B + b) * GM;
            const int64_t *r1 = a->acc + (int64_t)b * GM;
            int64_t *h = a->h + (int64_t)b * M, *c = a->c + (int64_t)b * M;
            /* one pass per operation: the table look-ups of a pass are independent (memory-level parallelism) */
            int64_t *restrict I = a->tmp, *restrict G = I + M, *restrict F = G + M, *restrict O = F + M;
            if (sa8) {
                const int32_t *r0p = (const int32_t *)a->r0 + base;
                act_pass_sa8(&sig, r0p, r1, I, M, a->io_lo, a->io_hi);
                act_pass_sa8(&tnh, r0p + M, r1 + M, G, M, a->io_lo, a->io_hi);
                act_pass_sa8(&sig, r0p + 2 * M, r1 + 2 * M, F, M, a->io_lo, a->io_hi);
                act_pass_sa8(&sig, r0p + 3 * M, r1 + 3 * M, O, M, a->io_lo, a->io_hi);
            } else {
                for (int m = 0; m < M; m++) {
                    I[m] = act(&sig, ir_of(a, R0(a->r0, base + m), r1[m], flavor));
                    G[m] = act(&tnh, ir_of(a, R0(a->r0, base + M + m), r1[M + m], flavor));
                    F[m] = act(&sig, ir_of(a, R0(a->r0, base + 2 * M + m), r1[2 * M + m], flavor));
                    O[m] = act(&sig, ir_of(a, R0(a->r0, base + 3 * M + m), r1[3 * M + m], flavor));
                }
            }
            ew_pass(&ops[0], &a->ew[0], c, F, F, M, mode, sa8);
            ew_pass(&ops[1], &a->ew[1], G, I, G, M, mode, sa8);
            ew_pass(&ops[2], &a->ew[2], F, G, c, M, mode, sa8);
            if (a->has_out_act)
                for (int m = 0; m < M; m++) I[m] = act(&actc, c[m]);
            ew_pass(&ops[3], &a->ew[3], a->has_out_act ? I : c, O, h, M, mode, sa8);
            y_row(a, s, t, b, h);
        }
    }
    return 0;
}

AI int gru_impl(const mli2_args *a, const int flavor, const int mode) {
    const int B = a->B, M = a->M, T = a->T, sa8 = flavor == FL_SA8;
    const act_t sig = a->sig, tnh = a->tnh;
    binop ops[5];
    memcpy(ops, a->op, sizeof ops);
    const int64_t BM = (int64_t)B * M;
    int64_t *z = a->tmp, *hz = a->tmp + BM, *omz = a->tmp + 2 * BM, *hr = a->tmp + 3 * BM, *rr = a->tmp + 4 * BM;
    int64_t *ones = a->tmp + 5 * BM, *nn = a->tmp + 6 * BM, *t2 = a->tmp + 7 * BM;
    for (int64_t k = 0; k < BM; k++) ones[k] = a->one;
    int64_t *accn = a->acc + 2 * (int64_t)B * M;
    for (int s = a->s0; s < a->s1; s++) {
        const int t = a->reverse ? T - 1 - s : s;
        load_hk(a, a->h);
        rec(a, a->W, a->W2, a->W8, a->off_w, a->np_w, a->cs, 2 * M, 0, a->acc, flavor, mode);
        for (int b = 0; b < B; b++) {
            const int64_t base = ((int64_t)t * B + b) * 2 * M;
            const int64_t *r1 = a->acc + (int64_t)b * 2 * M, *h = a->h + (int64_t)b * M;
            int64_t *zb = z + (int64_t)b * M, *rb = rr + (int64_t)b * M;
            if (sa8) {
                const int32_t *r0p = (const int32_t *)a->r0 + base;
                act_pass_sa8(&sig, r0p, r1, zb, M, a->io_lo, a->io_hi);
                act_pass_sa8(&sig, r0p + M, r1 + M, rb, M, a->io_lo, a->io_hi);
            } else {
                for (int m = 0; m < M; m++) {
                    zb[m] = act(&sig, ir_of(a, R0(a->r0, base + m), r1[m], flavor));
                    rb[m] = act(&sig, ir_of(a, R0(a->r0, base + M + m), r1[M + m], flavor));
                }
            }
            ew_pass(&ops[0], &a->ew[0], rb, h, hr + (int64_t)b * M, M, mode, sa8);
        }
        ew_pass(&ops[1], &a->ew[1], a->h, z, hz, (int)BM, mode, sa8);
        ew_pass(&ops[2], &a->ew[2], ones, z, omz, (int)BM, mode, sa8);
        load_hk(a, hr);
        rec(a, a->Wn, a->Wn2, a->Wn8, a->off_n, a->np_n, a->csn, M, 2, accn, flavor, mode);
        if (sa8)
            act_pass_sa8(&tnh, (const int32_t *)a->r0n + (int64_t)t * BM, accn, nn, (int)BM, a->io_lo, a->io_hi);
        else
            for (int64_t k = 0; k < BM; k++)
                nn[k] = act(&tnh, ir_of(a, R0(a->r0n, (int64_t)t * BM + k), accn[k], flavor));
        ew_pass(&ops[3], &a->ew[3], nn, omz, t2, (int)BM, mode, sa8);
        ew_pass(&ops[4], &a->ew[4], t2, hz, nn, (int)BM, mode, sa8);
        for (int b = 0; b < B; b++) {
            int64_t *h = a->h + (int64_t)b * M;
            if (!a->valid || a->valid[(int64_t)s * B + b]) memcpy(h, nn + (int64_t)b * M, sizeof(int64_t) * M);
            y_row(a, s, t, b, h);
        }
    }
    return 0;
}

#define DISPATCH(name, impl, T_)                                                   \
    int name(const T_ *a) {                                                       \
        switch (a->flavor * 2 + a->mode) {                                        \
        case 0: return impl(a, FL_SA8, 0);                                        \
        case 1: return impl(a, FL_SA8, 1);                                        \
        case 2: return impl(a, FL_FX16, 0);                                       \
        case 3: return impl(a, FL_FX16, 1);                                       \
        case 4: return impl(a, FL_FX16_8_8, 0);                                   \
        default: return impl(a, FL_FX16_8_8, 1);                                  \
        }                                                                         \
    }
DISPATCH(mli2_partials, partials_impl, part_args)
DISPATCH(mli2_lstm, lstm_impl, mli2_args)
DISPATCH(mli2_gru, gru_impl, mli2_args)

/* out[r, n] = sum_k x[r, k] W[k, n] (mod 2^32) for int8 x [R, K] and int8 weights: the input products of the sa8
 * partials (mli2_partials with f64 = 2), with vpdpbusd (W8 quads, off) where the build has AVX-512 VNNI, else with
 * gemm32 on int16 copies of the rows (W2 pairs); out has row stride np (np a multiple of 16, Kp = K rounded up
 * to even, K4 to a multiple of 4) */
typedef struct {
    int32_t R, K, Kp, np;
    const int8_t *x, *W8;
    const int16_t *W2;
    const int32_t *off;
    int32_t *out;
    void *scratch;                     /* uint8 [R, K4] (VNNI) or int16 [R, Kp] */
} i8p_args;

int mli_i8_products(const i8p_args *a) {
#if I8DOT_VNNI
    const int K4 = (a->K + 3) & ~3;
    i8dot_offset_rows8(a->x, a->K, a->K, (uint8_t *)a->scratch, K4, a->R);
    i8dot_gemm((const uint8_t *)a->scratch, K4, a->W8, a->off, a->out, a->np, a->R, a->np);
#else
    int16_t *hk = (int16_t *)a->scratch;
    for (int64_t r = 0; r < a->R; r++) {
        for (int k = 0; k < a->K; k++) hk[r * a->Kp + k] = a->x[r * a->K + k];
        for (int k = a->K; k < a->Kp; k++) hk[r * a->Kp + k] = 0;
    }
    gemm32(hk, a->W2, a->R, a->Kp, a->np, a->out);
#endif
    return 0;
}

/* 1 when mli_i8_products uses vpdpbusd (its scratch is uint8 [R, K4]), else 0 (int16 [R, Kp]) */
int mli_i8_vnni(void) { return I8DOT_VNNI; }

/* ---- the MLI test harness's quantizer (numerics.affine.mli_quantize), per tensor ---------------------------
 * q = sat_bits(wrap32((int32)(sv·x ± 0.5f) + zp)): float32 product (exact in double, rounded once to float, so
 * no FMA contraction can change it), float32 add of +0.5f for x > 0 else -0.5f, truncation, an out-of-range or
 * NaN cast gives INT32_MIN (x86 cvttss2si). */
typedef struct {
    int64_t n;
    float sv;
    int32_t zp, lo, hi;
    const float *x;
    int64_t *out;
} quant_args;

int mli_quantize_f32(const quant_args *a) {
    /* in int32 lanes (16 per vector with AVX-512; the int64 form did not vectorise): the cast is int32 (in range,
     * or INT32_MIN), the wrapped add of a 16-bit zero point is two's-complement uint32 addition, and the bounds are
     * 8- or 16-bit */
    const float sv = a->sv;
    const int32_t zp = a->zp, lo = a->lo, hi = a->hi;
    const float *restrict x = a->x;
    int64_t *restrict out = a->out;
    const int64_t n = a->n;  /* read once: a store to out could be a->n for all the compiler knows */
    for (int64_t i = 0; i < n; i++) {
        const float xv = x[i];
        float v = (float)((double)sv * (double)xv);
        v = v + (xv > 0.0f ? 0.5f : -0.5f);
        /* the cast truncates (truncf then a cast did not vectorise); floats of magnitude 2^31 are integers, so
         * v is in [-2^31, 2^31) exactly when its truncation is */
        int32_t r = (v >= -2147483648.0f && v < 2147483648.0f) ? (int32_t)v : INT32_MIN;
        r = (int32_t)((uint32_t)r + (uint32_t)zp);
        out[i] = r < lo ? lo : (r > hi ? hi : r);
    }
    return 0;
}

/* ---- MLI 1.x LSTM (mli1.py lstm1x_sequence; FXAPI arithmetic, convergent rounding) ------------------------- */
typedef struct {
    int32_t fx16, T, B, M, K, bits;
    int32_t d, osh;             /* intermediate shift f_in - f_prev; output shift f_prev + f_w - f_ir */
    int32_t one, f_cell, f_out, has_out_act;
    int32_t wrap, pad;
    const int64_t *pre;         /* [T, B, 4M]: the bias and input part of the accumulator after the shift by d */
    const int16_t *W;           /* [4M, K] recurrent weights */
    act_t sig, tnh, actc;
    const uint8_t *valid;       /* [T, B] or NULL */
    int64_t *h, *c, *Y;
    int16_t *hk;
    int64_t *acc;               /* scratch [B, 4M] */
} mli1_args;

int mli1_lstm(const mli1_args *a) {
    const int B = a->B, M = a->M, K = a->K, GM = 4 * M, T = a->T, bits = a->bits, one = a->one;
    const int md = 1; /* convergent */
    const act_t sig = a->sig, tnh = a->tnh, actc = a->actc;
    for (int t = 0; t < T; t++) {
        for (int64_t i = 0; i < (int64_t)B * K; i++) a->hk[i] = (int16_t)a->h[i];
        for (int n = 0; n < GM; n++) {
            const int16_t *w = a->W + (int64_t)n * K;
            for (int b = 0; b < B; b++) {
                const int16_t *x = a->hk + (int64_t)b * K;
                const int64_t p = a->pre[((int64_t)t * B + b) * GM + n];
                int64_t r;
                if (a->fx16) {
                    r = sat_w(rnd_w(p + 2 * dot64(x, w, K), a->osh + 1, 64, md), 16);
                } else {
                    int64_t sh = a->wrap ? dot64(x, w, K) : (int64_t)dot32(x, w, K);
                    r = sat_w(rnd_w(wrap32(p + sh), a->osh, 32, md), bits);
                }
                a->acc[(int64_t)b * GM + n] = r;
            }
        }
        for (int b = 0; b < B; b++) {
            int64_t *h = a->h + (int64_t)b * M, *c = a->c + (int64_t)b * M, *y = a->Y + ((int64_t)t * B + b) * M;
            const int ok = !a->valid || a->valid[(int64_t)t * B + b];
            const int64_t *ir = a->acc + (int64_t)b * GM;
            for (int m = 0; m < M; m++) {
                if (ok) {
                    int64_t i = act(&sig, ir[m]), g = act(&tnh, ir[M + m]);
                    int64_t f = act(&sig, ir[2 * M + m]), o = act(&sig, ir[3 * M + m]);
                    int64_t v = rnd_w(i * g, one - a->f_cell, 32, md) + f * c[m];
                    int64_t cn = sat_w(rnd_w(v, one, 32, md), bits);
                    int64_t hn = a->has_out_act ? sat_w(rnd_w(act(&actc, cn) * o, one, 32, md), bits)
                                                : sat_w(rnd_w(cn * o, a->f_cell + one - a->f_out, 32, md), bits);
                    c[m] = cn;
                    h[m] = hn;
                }
                y[m] = h[m];
            }
        }
    }
    return 0;
}

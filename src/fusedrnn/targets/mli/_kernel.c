/* fusedrnn MLI compiled recurrence: the time loops of the MLI 2.0 LSTM / GRU cells (cells.py) and the MLI 1.x
 * LSTM cell (mli1.py), bit-exact with those NumPy paths, which stay the reference.
 *
 * Built at first use by fusedrnn.targets.mli._compiled (cc -O3 -march=native, ctypes, no Python C-API). The
 * Python side precomputes the input partials of every step (one exact GEMM) and every table: activations (all
 * possible inputs) and, for sa8, the element-wise MUL / ADD / SUB of every int8 operand pair. This file does per
 * step the recurrent dot products (exact integer arithmetic), their requantization, the saturating sum with the
 * input partial, and the element-wise cell update. Integer helpers mirror _arith.py (mli_math.h semantics).
 */
#include <stdint.h>
#include <string.h>

#define MLI_ABI 1
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

/* ---- element-wise ops and activations -------------------------------------------------------------------- */
typedef struct {
    const int16_t *tab; /* sa8: [65536] indexed ((a + 128) << 8) + (b + 128); NULL: the fx16 formula */
    int32_t kind;       /* fx16: 0 MUL, 1 ADD, 2 SUB */
    int32_t sa, sb, so; /* MUL: so = min(f1 + f2 - fo, 31); ADD/SUB: sa, sb <= 0 alignments, so output shift */
} binop;

typedef struct {
    const int16_t *tab; /* y = tab[x + off] for every possible input x */
    int32_t off, pad;
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

enum { FL_SA8, FL_FX16, FL_FX16_8_8 };

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
} mli2_args;

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

/* first_partial (dense.py) from exact float products: r_0 = requant(wrap(acc - zp·colsum + bias)) */
typedef struct {
    int32_t flavor, mode, R, N, G, ld; /* rows, columns, gate blocks (N / G columns each), row stride of accf */
    int32_t f64, out64, zp_in, pad;
    int64_t mul[4], shift[4];
    const void *accf;                  /* [R, ld] float32 or float64 holding exact integers */
    const int64_t *cs, *bias;          /* [N] */
    void *out;                         /* [R, N] int32 or int64 */
} part_args;

AI int partials_impl(const part_args *a, const int flavor, const int mode) {
    const int N = a->N, w = N / a->G;
    for (int64_t r = 0; r < a->R; r++) {
        for (int n = 0; n < N; n++) {
            const int64_t i = r * a->ld + n;
            int64_t v = a->f64 ? (int64_t)((const double *)a->accf)[i] : (int64_t)((const float *)a->accf)[i];
            v = v - (int64_t)a->zp_in * a->cs[n] + a->bias[n];
            if (flavor != FL_FX16) v = wrap32(v);
            v = requant(flavor, mode, a->mul, a->shift, n / w, v);
            if (a->out64) ((int64_t *)a->out)[r * N + n] = v;
            else ((int32_t *)a->out)[r * N + n] = (int32_t)v;
        }
    }
    return 0;
}

/* acc[b, n] = requantized recurrent partial r_1 of outputs n in [0, N) (gate block of n: n / M) */
AI void rec(const mli2_args *a, const int16_t *W, const int64_t *cs, int N, int gate0, int64_t *restrict acc,
                 const int flavor, const int mode) {
    const int B = a->B, K = a->K, M = a->M, acc64 = a->acc64, wrap = a->wrap;
    const int16_t *hk = a->hk;
    int64_t mul[4], shift[4];
    memcpy(mul, a->mul, sizeof mul);
    memcpy(shift, a->shift, sizeof shift);
    for (int n = 0; n < N; n++) {
        const int16_t *w = W + (int64_t)n * K;
        const int g = gate0 + n / M;
        const int64_t zc = a->zp_in ? (int64_t)a->zp_in * cs[n] : 0;
        for (int b = 0; b < B; b++) {
            int64_t s = acc64 ? dot64(hk + (int64_t)b * K, w, K) : (int64_t)dot32(hk + (int64_t)b * K, w, K);
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

static inline void load_hk(const mli2_args *a, const int64_t *src) {
    const int64_t n = (int64_t)a->B * a->K;
    for (int64_t i = 0; i < n; i++) a->hk[i] = (int16_t)src[i];
}

AI int lstm_impl(const mli2_args *a, const int flavor, const int mode) {
    const int B = a->B, M = a->M, GM = 4 * M, T = a->T, sa8 = flavor == FL_SA8;
    const act_t sig = a->sig, tnh = a->tnh, actc = a->actc;
    binop ops[5];
    memcpy(ops, a->op, sizeof ops);
    for (int s = a->s0; s < a->s1; s++) {
        const int t = a->reverse ? T - 1 - s : s;
        load_hk(a, a->h);
        rec(a, a->W, a->cs, GM, 0, a->acc, flavor, mode);
        for (int b = 0; b < B; b++) {
            if (a->valid && !a->valid[(int64_t)s * B + b]) {
                memcpy(a->Y + ((int64_t)s * B + b) * M, a->h + (int64_t)b * M, sizeof(int64_t) * M);
                continue;
            }
            const int64_t base = ((int64_t)t * B + b) * GM;
            const int64_t *r1 = a->acc + (int64_t)b * GM;
            int64_t *h = a->h + (int64_t)b * M, *c = a->c + (int64_t)b * M, *y = a->Y + ((int64_t)s * B + b) * M;
            for (int m = 0; m < M; m++) {
                int64_t i = act(&sig, ir_of(a, R0(a->r0, base + m), r1[m], flavor));
                int64_t g = act(&tnh, ir_of(a, R0(a->r0, base + M + m), r1[M + m], flavor));
                int64_t f = act(&sig, ir_of(a, R0(a->r0, base + 2 * M + m), r1[2 * M + m], flavor));
                int64_t o = act(&sig, ir_of(a, R0(a->r0, base + 3 * M + m), r1[3 * M + m], flavor));
                int64_t cn = bin(&ops[0], c[m], f, mode, sa8);
                g = bin(&ops[1], g, i, mode, sa8);
                cn = bin(&ops[2], cn, g, mode, sa8);
                int64_t hn = bin(&ops[3], a->has_out_act ? act(&actc, cn) : cn, o, mode, sa8);
                c[m] = cn;
                h[m] = hn;
                y[m] = hn;
            }
        }
    }
    return 0;
}

AI int gru_impl(const mli2_args *a, const int flavor, const int mode) {
    const int B = a->B, M = a->M, T = a->T, sa8 = flavor == FL_SA8;
    const act_t sig = a->sig, tnh = a->tnh;
    binop ops[5];
    memcpy(ops, a->op, sizeof ops);
    int64_t *z = a->tmp, *hz = a->tmp + (int64_t)B * M, *omz = a->tmp + 2 * (int64_t)B * M;
    int64_t *hr = a->tmp + 3 * (int64_t)B * M;
    int64_t *accn = a->acc + 2 * (int64_t)B * M;
    for (int s = a->s0; s < a->s1; s++) {
        const int t = a->reverse ? T - 1 - s : s;
        load_hk(a, a->h);
        rec(a, a->W, a->cs, 2 * M, 0, a->acc, flavor, mode);
        for (int b = 0; b < B; b++) {
            const int64_t base = ((int64_t)t * B + b) * 2 * M;
            const int64_t *r1 = a->acc + (int64_t)b * 2 * M, *h = a->h + (int64_t)b * M;
            for (int m = 0; m < M; m++) {
                const int64_t k = (int64_t)b * M + m;
                int64_t zz = act(&sig, ir_of(a, R0(a->r0, base + m), r1[m], flavor));
                int64_t rr = act(&sig, ir_of(a, R0(a->r0, base + M + m), r1[M + m], flavor));
                hr[k] = bin(&ops[0], rr, h[m], mode, sa8);
                hz[k] = bin(&ops[1], h[m], zz, mode, sa8);
                omz[k] = bin(&ops[2], a->one, zz, mode, sa8);
                z[k] = zz;
            }
        }
        load_hk(a, hr);
        rec(a, a->Wn, a->csn, M, 2, accn, flavor, mode);
        for (int b = 0; b < B; b++) {
            int64_t *h = a->h + (int64_t)b * M, *y = a->Y + ((int64_t)s * B + b) * M;
            const int ok = !a->valid || a->valid[(int64_t)s * B + b];
            for (int m = 0; m < M; m++) {
                const int64_t k = (int64_t)b * M + m;
                int64_t nn = act(&tnh, ir_of(a, R0(a->r0n, ((int64_t)t * B + b) * M + m), accn[k], flavor));
                int64_t tmp = bin(&ops[3], nn, omz[k], mode, sa8);
                int64_t hn = bin(&ops[4], tmp, hz[k], mode, sa8);
                if (ok) h[m] = hn;
                y[m] = h[m];
            }
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

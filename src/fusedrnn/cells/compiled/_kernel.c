/* fusedrnn compiled recurrence: the time loop of the float LSTM / GRU / RNN engines.
 *
 * Built at first use by fusedrnn.cells.compiled._build (cc -O3 -march=native, loaded with ctypes); no Python
 * C-API. run_f32 / run_f64 take a struct rnn_args and run steps [s0, s1) of every direction:
 *  - float32, common LSTM / GRU options, B >= batch_min, H a multiple of the vector width: _batched.h (packed
 *    GEMM of [x_t | h] per step);
 *  - the same options at B <= 2 where _batched.h declines: _rows.h (per-row dot products, input projection
 *    computed here);
 *  - otherwise run_dir below: the Python side hoists the input projection (x·Wᵀ, one BLAS GEMM per direction and
 *    chunk of steps; the folded bias is added here); per step and batch row this file does the recurrent GEMV,
 *    the gate math and the state update.
 * Second threads come from _pool.h (persistent helpers that claim chunks of each step).
 *
 * Semantics are those of the NumPy engines (lstm.py, gru.py, rnn.py); processing step s of a reverse
 * direction reads and writes time index len_b - 1 - s; rows with s >= len_b are left alone.
 * float32 Sigmoid / Tanh use the vectorised approximations below (<= ~3 ulp, no division); everything else uses
 * libm.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE  /* sched_getcpu, pthread_attr_setaffinity_np */
#endif
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

enum { ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKY_RELU, ACT_THRESHOLDED_RELU, ACT_SCALED_TANH,
       ACT_HARD_SIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS };
enum { KIND_LSTM, KIND_GRU, KIND_RNN };
enum { COUPLE_NONE, COUPLE_INPUT_FORGET, COUPLE_CIFG };

typedef struct {
    int32_t kind, D, B, H, Hp, G;   /* G: gate blocks (4, 3, 1); Hp: LSTM projection size (else H) */
    int32_t s0, s1, T, K;           /* steps [s0, s1) of this chunk; K: steps held in the projection buffer */
    int32_t reverse[2];             /* per direction (D <= 2) */
    int32_t act[6];                 /* [D, 3] activation codes (LSTM f, g, h; GRU f, g; RNN f) */
    double alpha[6], beta[6];       /* [D, 3] */
    int32_t diagonal, lbr, coupling, ln_on;
    double clip, cell_clip, proj_clip;  /* < 0: off */
    const int64_t *lens;            /* [B] or NULL (all rows run T steps) */
    const void *xp;                 /* [D, K, B, G*H] projected input of steps s0.. (processing order) */
    const void *R;                  /* [D, G*H, Hp], or [D, G*H] when diagonal */
    const void *bh;                 /* GRU lbr: b_hn [D, H]; LSTM with layer norm: bias [D, 4H]; or NULL */
    const void *P;                  /* [D, 3, H] peepholes (i, f, o) or NULL */
    const void *projW;              /* [D, Hp, H] or NULL */
    const void *projb;              /* [D, Hp] or NULL */
    const void *ln;                 /* [D, 4, H] layer-norm coefficients or NULL */
    void *h;                        /* [D, B, Hp] hidden state, updated */
    void *c;                        /* [D, B, H] LSTM cell state, updated */
    void *Y;                        /* [T, D, B, Hp] output */
    int32_t threads;                /* threads the call may use (the caller and threads - 1 pool helpers) */
    int32_t gperm[4];               /* gate q of the kernel's order is block gperm[q] of xp, xb, R and bh */
    const void *xb;                 /* [D, G*H] bias added to xp (source gate order) or NULL */
    void *Rpk;                      /* float32 batched path: [D, G*H*(I+H)] room for the packed [W | R] */
    const void *x;                  /* float32 batched path: [T, B, I] input (no hoisted projection), or NULL */
    const void *W;                  /* float32 batched path: [D, G*H, I] */
    int32_t I;
    int32_t batch_min;              /* least B for the batched path */
    int32_t prepacked;              /* float32 batched path: Rpk already holds this call's packed [W | R] */
} rnn_args;

int f32_batched_ok(const rnn_args *a);

#include "_pool.h"

int f32_rows_ok(const rnn_args *a);
static int f32_run_rows(const rnn_args *a);
static int f32_run_batched(const rnn_args *a);

#define PAD(n, v) (((n) + (v) - 1) / (v) * (v))

/* ---- float32 vector math: GCC/Clang vector extensions (AVX2/AVX-512 with -march=native) -------------- */
typedef float vf __attribute__((vector_size(32)));
typedef int32_t vi __attribute__((vector_size(32)));
typedef float vfu __attribute__((vector_size(32), aligned(4)));
typedef double vd __attribute__((vector_size(32)));
typedef double vdu __attribute__((vector_size(32), aligned(8)));
#define VF 8
#define VD 4

/* The float32 activations for a vector type T (lanes of float) with integer twin IT: T##_sigmoid, T##_tanh and
 * their helpers. Every lane computes the same operations whatever the width: with AVX-512VL (every AVX-512 build
 * level has it) the 16-wide instantiation gives the 8-wide one's bits lane for lane, rcp14 and one Newton step in
 * both (an AVX-512F CPU without VL would refine the 8-wide estimate twice). */
#define VACT(T, IT, RCP)                                                                                         \
static inline T T##_splat(float a) { T v = {0}; return v + a; }                                                  \
static inline T T##_select(IT m, T a, T b) {                                                                     \
    IT ia, ib; T r;                                                                                              \
    memcpy(&ia, &a, sizeof ia); memcpy(&ib, &b, sizeof ib);                                                      \
    ia = (ia & m) | (ib & ~m);                                                                                   \
    memcpy(&r, &ia, sizeof r);                                                                                   \
    return r;                                                                                                    \
}                                                                                                                \
/* e^x = 2^n·(1 + q): x clamped to [-87, 88] (no overflow, no subnormal results; NaN propagates), x = n·ln2 + r   \
 * with |r| <= ln2/2 (Cody-Waite split of ln2), q = r + r²·P(r) = e^r - 1 with P a degree-4 near-minimax fit     \
 * (relative error of 1 + q < 4e-9); returns q and puts 2^n in *s. */                                            \
static inline T T##_exp_core(T x, T *s) {                                                                        \
    x = T##_select(x < -87.0f, T##_splat(-87.0f), x);                                                            \
    x = T##_select(x > 88.0f, T##_splat(88.0f), x);                                                              \
    T n = x * 1.44269504f + 12582912.0f;                                                                         \
    n = n - 12582912.0f;                      /* round to nearest integer (|n| < 2^22) */                        \
    T r = x - n * 0.693359375f;                                                                                  \
    r = r - n * -2.12194440e-4f;                                                                                 \
    T p = 0.0013751407386735082f * r + 0.008368915878236294f;                                                    \
    p = p * r + 0.04166953265666962f;                                                                            \
    p = p * r + 0.166665181517601f;                                                                              \
    p = p * r + 0.49999988079071045f;                                                                            \
    IT e = __builtin_convertvector(n, IT);                                                                       \
    e = (e + 127) << 23;                                                                                         \
    memcpy(s, &e, sizeof *s);                                                                                    \
    return (r * r) * p + r;                                                                                      \
}                                                                                                                \
static inline T T##_recip(T d) { return RCP(d); }                                                                \
/* 1 / (1 + e^-x): <= 2.5 ulp where the result is normal (measured over [-80, 100]); 0 below (x < -87.34). */     \
static inline T T##_sigmoid(T x) {                                                                               \
    T s;                                                                                                         \
    T q = T##_exp_core(-x, &s);                                                                                  \
    return T##_select(x < -87.3365479f, T##_splat(0.0f), T##_recip(q * s + s + 1.0f));                           \
}                                                                                                                \
/* tanh|x| = (1 - e) / (1 + e), e = e^{-2|x|} = s·(1 + q), numerator s·q + (s - 1) and denominator s·q + (s + 1) \
 * each rounded once (accurate near 0 too); sign of x restored. <= 2.7 ulp (measured over [-20, 20]). */          \
static inline T T##_tanh(T x) {                                                                                  \
    IT sign = (IT){0} + (int32_t)0x80000000;                                                                     \
    IT ix;                                                                                                       \
    memcpy(&ix, &x, sizeof ix);                                                                                  \
    IT sx = ix & sign;                                                                                           \
    IT iax = ix & ~sign;                                                                                         \
    T ax;                                                                                                        \
    memcpy(&ax, &iax, sizeof ax);                                                                                \
    T s;                                                                                                         \
    T q = T##_exp_core(-2.0f * ax, &s);                                                                          \
    T t = (q * s + (s - 1.0f)) * T##_recip(q * s + (s + 1.0f));                                                  \
    IT it;                                                                                                       \
    memcpy(&it, &t, sizeof it);                                                                                  \
    it = (it & ~sign) | sx;                                                                                      \
    memcpy(&t, &it, sizeof t);                                                                                   \
    return t;                                                                                                    \
}

/* The fused cells' state updates on one vector of units, for every vector width T (the same operations lane for
 * lane, in the order of the NumPy engines):
 *   T##_lstm_update: i, f, o = σ(pre-activations), g = tanh(·); c' = f ⊙ c + i ⊙ g (c updated); returns
 *                    h = o ⊙ tanh(c')                                                         (ONNX LSTM)
 *   T##_gru_update:  returns h' = (h - n) ⊙ z + n, which is (1 - z) ⊙ n + z ⊙ h               (ONNX GRU) */
#define VCELLS(T)                                                                                                \
static inline T T##_lstm_update(T pi, T pf, T pg, T po, T *c) {                                                 \
    T i = T##_sigmoid(pi), f = T##_sigmoid(pf), g = T##_tanh(pg), o = T##_sigmoid(po);                          \
    T ig = i * g;                                                                                                \
    T fc = *c * f;                                                                                               \
    T cn = fc + ig;                                                                                              \
    *c = cn;                                                                                                     \
    return T##_tanh(cn) * o;                                                                                     \
}                                                                                                                \
static inline T T##_gru_update(T h, T z, T n) {                                                                  \
    T dl = h - n;                                                                                                \
    dl *= z;                                                                                                     \
    return dl + n;                                                                                               \
}

/* 1 / d for normal d: the hardware estimate refined by Newton steps r + r·(1 - d·r) (one from AVX-512's 14-bit
 * estimate, two from AVX's 12-bit one; <= 1 ulp), no division. */
static inline vf rcp_vf(vf d) {
#if defined(__AVX512VL__)
    vf r = (vf)_mm256_rcp14_ps((__m256)d);
    return r + r * (1.0f - d * r);
#elif defined(__AVX__)
    vf r = (vf)_mm256_rcp_ps((__m256)d);
    r = r + r * (1.0f - d * r);
    return r + r * (1.0f - d * r);
#else
    return 1.0f / d;
#endif
}
VACT(vf, vi, rcp_vf)
VCELLS(vf)

#if defined(__AVX512F__)
typedef float vz __attribute__((vector_size(64)));
typedef int32_t vzi __attribute__((vector_size(64)));
typedef float vzu __attribute__((vector_size(64), aligned(4)));
static inline vz rcp_vz(vz d) {
    vz r = (vz)_mm512_rcp14_ps((__m512)d);
    return r + r * (1.0f - d * r);
}
VACT(vz, vzi, rcp_vz)
VCELLS(vz)
#endif

static void f32_sigmoid(float *v, int n) {
    for (int j = 0; j < n; j += VF) { vf x; memcpy(&x, v + j, sizeof x); x = vf_sigmoid(x); memcpy(v + j, &x, sizeof x); }
}
static void f32_tanh(float *v, int n) {
    for (int j = 0; j < n; j += VF) { vf x; memcpy(&x, v + j, sizeof x); x = vf_tanh(x); memcpy(v + j, &x, sizeof x); }
}
static void f64_sigmoid(double *v, int n) { for (int j = 0; j < n; j++) v[j] = 1.0 / (1.0 + exp(-v[j])); }
static void f64_tanh(double *v, int n) { for (int j = 0; j < n; j++) v[j] = tanh(v[j]); }

static inline float f32_hsum(vf a) { float s = 0; for (int l = 0; l < VF; l++) s += a[l]; return s; }
static inline double f64_hsum(vd a) { double s = 0; for (int l = 0; l < VD; l++) s += a[l]; return s; }

/* Eight rows of a row-major matrix times h: out[q] = Σ_k r[q·K + k]·h[k], q < 8, K % 8 == 0. Reads R where it
 * is (no packed copy per call); one FMA chain per row over k in steps of 8, the eight sums transposed and
 * reduced with horizontal adds at the end. */
#if defined(__AVX__)
#define HAVE_GEMV8 1
/* The eight horizontal sums of a0 .. a7, as one vector (lane q: the sum of aq). */
static inline __m256 red8(vf a0, vf a1, vf a2, vf a3, vf a4, vf a5, vf a6, vf a7) {
    __m256 t0 = _mm256_hadd_ps((__m256)a0, (__m256)a1), t1 = _mm256_hadd_ps((__m256)a2, (__m256)a3);
    __m256 t2 = _mm256_hadd_ps((__m256)a4, (__m256)a5), t3 = _mm256_hadd_ps((__m256)a6, (__m256)a7);
    t0 = _mm256_hadd_ps(t0, t1);
    t2 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(t0, t2, 0x20), _mm256_permute2f128_ps(t0, t2, 0x31));
}

static inline void f32_gemv8(const float *r, long K, const float *h, float *out) {
    vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    for (long k = 0; k < K; k += 8) {
        vf hv = *(const vfu *)(h + k);
        a0 += *(const vfu *)(r + k) * hv; a1 += *(const vfu *)(r + K + k) * hv;
        a2 += *(const vfu *)(r + 2 * K + k) * hv; a3 += *(const vfu *)(r + 3 * K + k) * hv;
        a4 += *(const vfu *)(r + 4 * K + k) * hv; a5 += *(const vfu *)(r + 5 * K + k) * hv;
        a6 += *(const vfu *)(r + 6 * K + k) * hv; a7 += *(const vfu *)(r + 7 * K + k) * hv;
    }
    _mm256_storeu_ps(out, red8(a0, a1, a2, a3, a4, a5, a6, a7));
}
/* rows [G blocks of H] of R (block q is source block perm[q]; row stride K) times h into out [G·H]; H % 8 == 0 */
static void f32_gemv_rows(const float *R, int G, int H, long K, const int32_t *perm, const float *h, float *out) {
    for (int q = 0; q < G; q++) {
        const float *r = R + (long)perm[q] * H * K;
        for (int u = 0; u < H; u += 8) f32_gemv8(r + (long)u * K, K, h, out + (long)q * H + u);
    }
}
#else
#define HAVE_GEMV8 0
static void f32_gemv_rows(const float *R, int G, int H, long K, const int32_t *perm, const float *h, float *out) {
    (void)R; (void)G; (void)H; (void)K; (void)perm; (void)h; (void)out;  /* never called without AVX */
}
#endif

/* ---- the two instantiations ------------------------------------------------------------------------- */
#define REAL float
#define SFX(name) f32_##name
#define VEC vf
#define VECU vfu
#define VL VF
#define EXPM1 expm1f
#define LOG1P log1pf
#define EXP expf
#define FAST 1  /* fused gate math for the common LSTM / GRU options (float32 vector activations) */
#include "_kernel_body.h"
#undef FAST
#undef REAL
#undef SFX
#undef VEC
#undef VECU
#undef VL
#undef EXPM1
#undef LOG1P
#undef EXP
#include "_batched.h"
#include "_rows.h"

#define REAL double
#define SFX(name) f64_##name
#define VEC vd
#define VECU vdu
#define VL VD
#define EXPM1 expm1
#define LOG1P log1p
#define EXP exp
#define FAST 0
#include "_kernel_body.h"
#undef FAST

int fusedrnn_abi_version(void) { return 10; }

#include "_ort_bridge.h"

/* Compiled time loop of the float32 LSTM / GRU engines under a storage-rounding policy (fp16, bf16, DLFLOAT16),
 * for small batches. Mirrors the per-step operation order of fusedrnn/cells/lstm.py and gru.py element for
 * element (every product and sum rounded to float32 on its own: build with -ffp-contract=off), rounding at the
 * policy's points with bit-exact C versions of the NumPy rounders. The recurrent GEMV sums in its own order
 * (BLAS's order is not reproducible), and expf/tanhf come from libm, not NumPy's SIMD routines.
 *
 * Layouts (float32, C order; gate order canonical: LSTM i, f, g, o; GRU z, r, n):
 *   xp [D, T, B, GH]  x·Wᵀ + folded biases (rounded at xproj by the caller), in original time order
 *   RT [D, H, GH]     Rᵀ;  hb [D, GH] recurrent bias kept apart (split points), or GRU b_hn [D, H]
 *   P  [D, 3, H]      peepholes i, f, o;  h, c [D, B, H] in/out;  Y [T, D, B, H] (zero at padded steps)
 *   lens [B] int64 or NULL.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ABI_VERSION 1

enum { R_NONE = 0, R_FP16 = 1, R_BF16 = 2, R_DLF16 = 3 };
enum { P_PRE = 0, P_GATE = 1, P_CELL = 2, P_HID = 3, P_HPROJ = 4 };

typedef struct {
    int32_t kind, D, B, H, T, lbr, coupling, split, split_bias, peep;
    int32_t mode[5];
    int32_t reverse[2];
    double clip, cell_clip;
    const int64_t *lens;
    const float *xp, *RT, *hb, *P;
    float *h, *c, *Y;
} rr_args;

int fusedrnn_rounded_abi(void) { return ABI_VERSION; }

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* float32 -> float16 -> float32, round to nearest even (NumPy's astype(float16)); overflow -> ±inf; NaN keeps
 * its top 10 fraction bits (1 when they are all zero), as NumPy's conversion does. */
static inline float r_fp16(float x) {
    uint32_t u = f2u(x), s = u & 0x80000000u, a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        if (a == 0x7f800000u) return x;
        uint32_t m = (a & 0x007fffffu) >> 13;
        return u2f(s | 0x7f800000u | ((m ? m : 1u) << 13));
    }
    if (a >= 0x38800000u) { /* normal float16 range (|x| >= 2^-14) */
        uint32_t r = (a + 0x0fffu + ((a >> 13) & 1u)) & ~0x1fffu;
        if (r >= 0x47800000u) r = 0x7f800000u;
        return u2f(s | r);
    }
    /* subnormal float16: multiples of 2^-24; (|x| + 0.5) - 0.5 rounds to them, ties to even */
    volatile float t = u2f(a) + 0.5f;
    float r = t - 0.5f;
    return u2f(s | f2u(r));
}

/* float32 -> bfloat16 -> float32, round to nearest even (ml_dtypes); NaN becomes the default quiet NaN, sign kept. */
static inline float r_bf16(float x) {
    uint32_t u = f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return u2f((u & 0x80000000u) | 0x7fc00000u);
    return u2f((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}

/* float32 -> DLFLOAT16 -> float32 (fusedrnn.numerics.dlfloat16): 9 fraction bits, ties away from zero; magnitudes
 * rounding to <= 2^-31 flush to ±0; from DLF16_MAX + half an ULP up (Inf, NaN included) the NINF code, i.e. NaN. */
static inline float r_dlf16(float x) {
    uint32_t u = f2u(x), s = u & 0x80000000u, a = u & 0x7fffffffu;
    uint32_t r = (a + 0x2000u) & ~0x3fffu;
    if (r <= 0x30000000u) r = 0;
    if (a >= ((159u << 23) | (1021u << 13))) r = 0x7fc00000u;
    return u2f(r | s);
}

static inline float rnd(int mode, float x) {
    switch (mode) {
    case R_FP16: return r_fp16(x);
    case R_BF16: return r_bf16(x);
    case R_DLF16: return r_dlf16(x);
    default: return x;
    }
}

/* Round n floats in place (the C rounders, exposed for tests). */
void fusedrnn_rounded_round(int mode, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = rnd(mode, x[i]);
}

static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }
/* NumPy's sigmoid: reciprocal(exp(x * -1) + 1) */
static inline float sigm(float v) { return 1.0f / (expf(v * -1.0f) + 1.0f); }

static void gemv(const float *hp, const float *RT, int H, int GH, int j0, int n, float *a) {
    /* a[0:n] = Σ_k hp[k] · RT[k][j0 + j] */
    for (int j = 0; j < n; j++) a[j] = 0.0f;
    for (int k = 0; k < H; k++) {
        const float hk = hp[k];
        const float *row = RT + (size_t)k * GH + j0;
        for (int j = 0; j < n; j++) a[j] += hk * row[j];
    }
}

static void lstm_row(const rr_args *A, int d, int b, float *a) {
    const int H = A->H, GH = 4 * H, B = A->B, D = A->D;
    const int rev = A->reverse[d];
    const int L = A->lens ? (int)A->lens[b] : A->T;
    const float *RT = A->RT + (size_t)d * H * GH;
    const float *hb = A->hb ? A->hb + (size_t)d * GH : NULL;
    const float *P = A->P ? A->P + (size_t)d * 3 * H : NULL;
    float *h = A->h + ((size_t)d * B + b) * H, *c = A->c + ((size_t)d * B + b) * H;
    const int use_clip = A->clip >= 0, use_cc = A->cell_clip >= 0;
    const float cl = (float)A->clip, ccl = (float)A->cell_clip;
    const int mp = A->mode[P_PRE], mg = A->mode[P_GATE], mc = A->mode[P_CELL], mh = A->mode[P_HID];
    for (int s = 0; s < L; s++) {
        const int t = rev ? L - 1 - s : s;
        const float *g = A->xp + (((size_t)d * A->T + t) * B + b) * GH;
        gemv(h, RT, H, GH, 0, GH, a);
        if (A->split) {
            if (hb) for (int j = 0; j < GH; j++) a[j] += hb[j];
            if (A->mode[P_HPROJ]) for (int j = 0; j < GH; j++) a[j] = rnd(A->mode[P_HPROJ], a[j]);
        }
        for (int j = 0; j < GH; j++) a[j] += g[j];
        float *y = A->Y + (((size_t)t * D + d) * B + b) * H;
        for (int u = 0; u < H; u++) {
            float vi = a[u], vf = a[H + u], vg = a[2 * H + u], vo = a[3 * H + u], cu = c[u];
            if (P) { vi += P[u] * cu; vf += P[H + u] * cu; }
            if (use_clip) {
                vi = clampf(vi, -cl, cl); vf = clampf(vf, -cl, cl); vg = clampf(vg, -cl, cl);
                if (!P) vo = clampf(vo, -cl, cl);
            }
            vi = rnd(mp, vi); vf = rnd(mp, vf); vg = rnd(mp, vg);
            vi = sigm(vi); vf = sigm(vf); vg = tanhf(vg);
            if (!P) { vo = rnd(mp, vo); vo = sigm(vo); }
            if (A->coupling == 1) vf = 1.0f - vi;
            else if (A->coupling == 2) vi = 1.0f - vf;
            vi = rnd(mg, vi); vf = rnd(mg, vf); vg = rnd(mg, vg);
            if (!P) vo = rnd(mg, vo);
            float cf = cu * vf, ig = vi * vg;
            cu = cf + ig;
            if (use_cc) cu = clampf(cu, -ccl, ccl);
            cu = rnd(mc, cu);
            c[u] = cu;
            if (P) {
                float pc = P[2 * H + u] * cu;
                vo += pc;
                if (use_clip) vo = clampf(vo, -cl, cl);
                vo = rnd(mp, vo); vo = sigm(vo); vo = rnd(mg, vo);
            }
            float m = tanhf(cu) * vo;
            m = rnd(mh, m);
            y[u] = m;
            h[u] = m;
        }
    }
}

static void gru_row(const rr_args *A, int d, int b, float *a) {
    const int H = A->H, GH = 3 * H, B = A->B, D = A->D;
    const int rev = A->reverse[d];
    const int L = A->lens ? (int)A->lens[b] : A->T;
    const float *RT = A->RT + (size_t)d * H * GH;
    const float *hb = A->hb ? A->hb + (size_t)d * (A->split ? GH : H) : NULL;
    float *h = A->h + ((size_t)d * B + b) * H;
    float *t3 = a + GH; /* r ⊙ h (linear_before_reset = 0) */
    float *hn = a + GH + H;
    const int use_clip = A->clip >= 0;
    const float cl = (float)A->clip;
    const int mp = A->mode[P_PRE], mg = A->mode[P_GATE], mh = A->mode[P_HID];
    for (int s = 0; s < L; s++) {
        const int t = rev ? L - 1 - s : s;
        const float *g = A->xp + (((size_t)d * A->T + t) * B + b) * GH;
        gemv(h, RT, H, GH, 0, A->lbr ? GH : 2 * H, a);
        if (A->lbr && A->split) {
            if (hb) for (int j = 0; j < GH; j++) a[j] += hb[j];
            if (A->mode[P_HPROJ]) for (int j = 0; j < GH; j++) a[j] = rnd(A->mode[P_HPROJ], a[j]);
        }
        for (int j = 0; j < 2 * H; j++) {
            float v = a[j] + g[j];
            if (use_clip) v = clampf(v, -cl, cl);
            v = rnd(mp, v);
            v = sigm(v);
            a[j] = rnd(mg, v);
        }
        float *n = a + 2 * H;
        if (A->lbr) {
            for (int u = 0; u < H; u++) {
                float v = n[u];
                if (hb && !A->split) v += hb[u];
                n[u] = v * a[H + u];
            }
        } else {
            for (int k = 0; k < H; k++) t3[k] = a[H + k] * h[k];
            gemv(t3, RT, H, GH, 2 * H, H, n);
        }
        for (int u = 0; u < H; u++) {
            float v = n[u] + g[2 * H + u];
            if (use_clip) v = clampf(v, -cl, cl);
            v = rnd(mp, v);
            v = tanhf(v);
            v = rnd(mg, v);
            float diff = h[u] - v;
            diff *= a[u];
            hn[u] = rnd(mh, diff + v);
        }
        float *y = A->Y + (((size_t)t * D + d) * B + b) * H;
        memcpy(h, hn, sizeof(float) * H);
        memcpy(y, hn, sizeof(float) * H);
    }
}

/* Run every direction and row; returns 0, or 1 when the work buffer cannot be allocated. */
int fusedrnn_rounded_run(const rr_args *A) {
    const int GH = (A->kind == 0 ? 4 : 3) * A->H;
    float *a = (float *)malloc(sizeof(float) * ((size_t)GH + 2 * (size_t)A->H + 16));
    if (!a) return 1;
    for (int d = 0; d < A->D; d++)
        for (int b = 0; b < A->B; b++) {
            if (A->kind == 0) lstm_row(A, d, b, a);
            else gru_row(A, d, b, a);
        }
    free(a);
    return 0;
}

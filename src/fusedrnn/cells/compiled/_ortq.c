/* onnxruntime's com.microsoft::DynamicQuantizeLSTM as its CPU kernel computes it (fusedrnn.cells.ort_qlstm says
 * what and why): uint8 dynamic quantization of X and of every step's hidden state, exact int32 products with the
 * int8/uint8 weights, float32 gate arithmetic with each operation rounded on its own (built with
 * -ffp-contract=off), MLAS's logistic and tanh approximations with their FMAs (fmaf).
 *
 * The integer products use AVX-512 VNNI (vpdpbusd: uint8 x int8 -> int32, exact) when the build level has it,
 * otherwise a plain int32 loop; both give the same integers. The directions of a bidirectional node run as two
 * pipes of the compiled loops' thread pool (_pool.h): a thread per direction without a barrier per step, the
 * steps of a late thread's direction taken over by the other (bit-identical whichever thread runs a step).
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE  /* sched_getcpu, pthread_attr_setaffinity_np (_pool.h) */
#endif
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __AVX512VNNI__
#include <immintrin.h>
#endif

#define ORTQ_ABI 3

int ortq_abi_version(void) { return ORTQ_ABI; }

typedef struct {
    int T, B, I, H, D;
    const float *x;          /* [T, B, I] */
    const int32_t *lens;     /* [B] */
    const void *w;           /* packed by ortq_pack: [D][ortq_packed_size(I, 4H)] bytes */
    const int32_t *w_colsum; /* [D][ortq_colsum_size(4H)] */
    int w_signed;
    const float *w_scale;    /* [D, w_scale_cols] */
    int w_scale_cols;
    const int32_t *w_zp;     /* [D] */
    const void *r;           /* packed: [D][ortq_packed_size(H, 4H)] */
    const int32_t *r_colsum;
    int r_signed;
    const float *r_scale;
    int r_scale_cols;
    const int32_t *r_zp;
    const float *bias;       /* [D, 4H] (Wb + Rb) or NULL */
    const float *h0, *c0;    /* [D, B, H] */
    const float *P;          /* [D, 3, H] (i, o, f) or NULL */
    const int32_t *reverse;  /* [D] */
    const int32_t *acts;     /* [D, 3] activation codes (f, g, h) */
    const float *alphas, *betas;
    float clip;
    int input_forget, want_y, block_rows, threads;
    float *Y, *Yh, *Yc;      /* [T, D, B, H], [D, B, H], [D, B, H] */
} OrtqArgs;

/* ---- MLAS's activations (FMA3 kernels) and onnxruntime's other LSTM activations -------------------------- */

static inline float mlas_logistic(float v) {
    v = -18.0f > v ? -18.0f : v;  /* vmaxps(lower, v), vminps(upper, v): a NaN passes through */
    v = 18.0f < v ? 18.0f : v;
    float x2 = v * v;
    float p = fmaf(x2, 4.37031012579801e-11f, 1.15627324459942e-07f);
    p = fmaf(p, x2, 6.08574864600143e-05f);
    p = fmaf(p, x2, 8.51377133304701e-03f);
    p = fmaf(p, x2, 2.48287947061529e-01f);
    float q = fmaf(x2, 6.10247389755681e-13f, 5.76102136993427e-09f);
    q = fmaf(q, x2, 6.29106785017040e-06f);
    q = fmaf(q, x2, 1.70198817374094e-03f);
    q = fmaf(q, x2, 1.16817656904453e-01f);
    q = fmaf(q, x2, 9.93151921023180e-01f);
    p = v * p;
    float r = p / q + 0.5f;
    return 0.0f > r ? 0.0f : r;
}

static inline float mlas_tanh(float v) {
    v = -9.0f > v ? -9.0f : v;
    v = 9.0f < v ? 9.0f : v;
    float x2 = v * v;
    float p = fmaf(x2, -2.76076847742355e-16f, 2.00018790482477e-13f);
    p = fmaf(p, x2, -8.60467152213735e-11f);
    p = fmaf(p, x2, 5.12229709037114e-08f);
    p = fmaf(p, x2, 1.48572235717979e-05f);
    p = fmaf(p, x2, 6.37261928875436e-04f);
    p = fmaf(p, x2, 4.89352455891786e-03f);
    p = p * v;
    float q = fmaf(x2, 1.19825839466702e-06f, 1.18534705686654e-04f);
    q = fmaf(q, x2, 2.26843463243900e-03f);
    q = fmaf(q, x2, 4.89352518554385e-03f);
    return p / q;
}

static inline float ort_sigmoid(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    return expf(x) / (1.0f + expf(x));
}

/* in place over n values: activation `code` with alpha a, beta b */
static void activate(float *v, int n, int code, float a, float b) {
    int k;
    switch (code) {
    case 0: for (k = 0; k < n; k++) v[k] = mlas_logistic(v[k]); break;
    case 1: for (k = 0; k < n; k++) v[k] = mlas_tanh(v[k]); break;
    case 2: for (k = 0; k < n; k++) v[k] = v[k] > 0.0f ? v[k] : 0.0f; break;
    case 3: for (k = 0; k < n; k++) v[k] = a * v[k] + b; break;
    case 4: for (k = 0; k < n; k++) v[k] = v[k] >= 0 ? v[k] : a * v[k]; break;
    case 5: for (k = 0; k < n; k++) v[k] = v[k] > a ? v[k] : 0.0f; break;
    case 6: for (k = 0; k < n; k++) v[k] = a * (2.0f * ort_sigmoid(2.0f * (b * v[k])) - 1.0f); break;
    case 7: for (k = 0; k < n; k++) { float t = a * v[k] + b; t = t > 0.0f ? t : 0.0f; v[k] = t < 1.0f ? t : 1.0f; } break;
    case 8: for (k = 0; k < n; k++) v[k] = v[k] >= 0 ? v[k] : a * (expf(v[k]) - 1.0f); break;
    case 9: for (k = 0; k < n; k++) v[k] = v[k] / (1.0f + fabsf(v[k])); break;
    default: for (k = 0; k < n; k++) v[k] = logf(1.0f + expf(v[k])); break;
    }
}

/* ---- dynamic uint8 quantization ------------------------------------------------------------------------- */

/* q[i] = clamp(round_half_even(v[i] / s) + z, 0, 255) over n values; returns s, sets *zp */
static float quantize(const float *v, size_t n, uint8_t *q, int *zp) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    size_t i;
    for (i = 0; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    lo = lo < 0.0f ? lo : 0.0f;
    hi = hi > 0.0f ? hi : 0.0f;
    float s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float z0 = 0.0f - lo / s;
    z0 = z0 < 0.0f ? 0.0f : (z0 > 255.0f ? 255.0f : z0);
    int z = (int)nearbyintf(z0);
    for (i = 0; i < n; i++) {
        float t = nearbyintf(v[i] / s) + (float)z;
        t = t < 0.0f ? 0.0f : (t > 255.0f ? 255.0f : t);
        q[i] = (uint8_t)t;
    }
    *zp = z;
    return s;
}

/* ---- exact integer products: acc[m][n] = sum_k (a[m][k] - za) * (w[k][n] - zw) ---------------------------- */

typedef struct {
    int K, N, Kp;            /* Kp: K rounded up to 4 */
    const int8_t *packed;    /* VNNI: [N/16][Kp/4][16][4] int8 (uint8 weights as w - 128); else [K][N] int16 w - zw */
    const int32_t *colsum;   /* VNNI: sum over k of each packed column */
    int shift;               /* VNNI: w - zw = packed + shift (128 - zw for uint8 weights, -zw for int8) */
} QMatrix;

/* bytes of one packed [K, N] matrix, and int32 column sums, as ortq_pack writes them */
long ortq_packed_size(int K, int N) {
#ifdef __AVX512VNNI__
    return (long)((N + 15) / 16 * 16) * ((K + 3) / 4 * 4);
#else
    return (long)K * N * 2;
#endif
}

long ortq_colsum_size(int N) { return (long)((N + 15) / 16 * 16); }

/* pack one direction's [K, N] int8/uint8 weights (zero point zw) for qgemm; `packed` and `colsum` zeroed */
void ortq_pack(const void *w, int K, int N, int is_signed, int zw, int8_t *packed, int32_t *colsum) {
    const int8_t *ws = (const int8_t *)w;
    const uint8_t *wu = (const uint8_t *)w;
#ifdef __AVX512VNNI__
    const int Kp = (K + 3) / 4 * 4;
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int v = is_signed ? ws[(size_t)k * N + n] : (int)wu[(size_t)k * N + n] - 128;
            size_t at = ((size_t)(n / 16) * (Kp / 4) + k / 4) * 64 + (n % 16) * 4 + k % 4;
            packed[at] = (int8_t)v;
            colsum[n] += v;
        }
#else
    int16_t *p = (int16_t *)packed;
    (void)colsum;
    for (size_t i = 0; i < (size_t)K * N; i++) p[i] = (int16_t)((is_signed ? ws[i] : (int)wu[i]) - zw);
#endif
}

static void qmatrix_view(QMatrix *m, const void *packed, const int32_t *colsum, int d, int K, int N, int is_signed,
                         int zw) {
    m->K = K; m->N = N; m->Kp = (K + 3) / 4 * 4;
    m->packed = (const int8_t *)packed + (size_t)d * ortq_packed_size(K, N);
    m->colsum = colsum + (size_t)d * ortq_colsum_size(N);
    m->shift = is_signed ? -zw : 128 - zw;
}

#ifdef __AVX512VNNI__
/* R rows (a compile-time constant once inlined) x 32 columns (two packed column blocks nb, nb + 1 when `two`):
 * the accumulators stay in registers */
static inline __attribute__((always_inline)) void vnni_rows(const QMatrix *m, const uint8_t *a, int lda, int R,
                                                            int nb, int two, const int32_t *rowsum, int za,
                                                            int32_t *acc) {
    const int Kb = m->Kp / 4, N = m->N, K = m->K;
    __m512i c0[8], c1[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) { c0[r] = _mm512_setzero_si512(); c1[r] = _mm512_setzero_si512(); }
    const int8_t *w0 = m->packed + (size_t)nb * Kb * 64;
    const int8_t *w1 = w0 + (size_t)Kb * 64;
    for (int kb = 0; kb < Kb; kb++) {
        __m512i v0 = _mm512_loadu_si512((const void *)(w0 + (size_t)kb * 64));
        __m512i v1 = two ? _mm512_loadu_si512((const void *)(w1 + (size_t)kb * 64)) : v0;
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            int32_t a4;
            memcpy(&a4, a + (size_t)r * lda + kb * 4, 4);
            __m512i av = _mm512_set1_epi32(a4);
            c0[r] = _mm512_dpbusd_epi32(c0[r], av, v0);
            c1[r] = _mm512_dpbusd_epi32(c1[r], av, v1);
        }
    }
    for (int h = 0; h < 1 + two; h++) {
        int n0 = (nb + h) * 16, nc = N - n0 < 16 ? N - n0 : 16;
        __mmask16 mask = (__mmask16)((1u << nc) - 1u);
        __m512i cs = _mm512_maskz_loadu_epi32(mask, m->colsum + n0);
        /* sum_k (a - za)(w - zw) = sum a*p + shift*sum a - za*(colsum + K*shift) */
        __m512i corr = _mm512_mullo_epi32(_mm512_set1_epi32(za), _mm512_add_epi32(cs, _mm512_set1_epi32(K * m->shift)));
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512i v = _mm512_add_epi32(h ? c1[r] : c0[r], _mm512_set1_epi32(m->shift * rowsum[r]));
            _mm512_mask_storeu_epi32(acc + (size_t)r * N + n0, mask, _mm512_sub_epi32(v, corr));
        }
    }
}

#define VNNI_ROWS_CASE(R) case R: vnni_rows(m, a + (size_t)m0 * lda, lda, R, nb, two, rowsum, za, acc + (size_t)m0 * N); break;
#endif

/* acc [M][N] for uint8 rows a (stride lda, zero point za; rows padded with zeros to Kp) */
static void qgemm(const QMatrix *m, const uint8_t *a, int lda, int M, int za, int32_t *acc) {
    const int K = m->K, N = m->N;
#ifdef __AVX512VNNI__
    const int NB = (N + 15) / 16;
    int32_t rowsum[8];
    for (int m0 = 0; m0 < M; m0 += 8) {
        int mc = M - m0 < 8 ? M - m0 : 8;
        for (int r = 0; r < mc; r++) {
            int32_t s = 0;
            for (int k = 0; k < K; k++) s += a[(size_t)(m0 + r) * lda + k];
            rowsum[r] = s;
        }
        for (int nb = 0; nb < NB; nb += 2) {
            int two = nb + 1 < NB;
            switch (mc) {
                VNNI_ROWS_CASE(1) VNNI_ROWS_CASE(2) VNNI_ROWS_CASE(3) VNNI_ROWS_CASE(4)
                VNNI_ROWS_CASE(5) VNNI_ROWS_CASE(6) VNNI_ROWS_CASE(7) default: VNNI_ROWS_CASE(8)
            }
        }
    }
#else
    const int16_t *w = (const int16_t *)m->packed;
    for (int r = 0; r < M; r++) {
        int32_t *c = acc + (size_t)r * N;
        for (int n = 0; n < N; n++) c[n] = 0;
        for (int k = 0; k < K; k++) {
            int32_t av = (int32_t)a[(size_t)r * lda + k] - za;
            const int16_t *wk = w + (size_t)k * N;
            for (int n = 0; n < N; n++) c[n] += av * (int32_t)wk[n];
        }
    }
#endif
}

/* onnxruntime's clip_add_bias (min(clip, v + b), then max(-clip, .): NaN becomes clip) or, without a bias,
 * clip_ignore_bias (NaN passes) */
static inline void bias_clip(float *v, const float *bias, int n, float clip) {
    int k;
    if (bias) {
        for (k = 0; k < n; k++) {
            float x = v[k] + bias[k];
            x = x < clip ? x : clip;
            v[k] = -clip < x ? x : -clip;
        }
    } else {
        for (k = 0; k < n; k++) {
            float x = v[k];
            v[k] = x > clip ? clip : (x < -clip ? -clip : x);
        }
    }
}

/* ---- scratch memory: kept per thread and slot and only grown, so that repeated calls neither map nor fault in
 * fresh pages (a page fault is a chance for a busy machine's scheduler to take the core away) ---------------- */

static __thread void *scratch_mem[3];
static __thread size_t scratch_len[3];

static void *scratch(int slot, size_t bytes) {
    if (scratch_len[slot] < bytes) {
        free(scratch_mem[slot]);
        scratch_mem[slot] = malloc(bytes);
        scratch_len[slot] = scratch_mem[slot] ? bytes : 0;
    }
    return scratch_mem[slot];
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

#include "_pool.h"

/* ---- one direction ---------------------------------------------------------------------------------------- */

typedef struct {
    const OrtqArgs *a;
    int d, status;
    const uint8_t *xq;       /* [maxlen * B][Kp_x] */
    int ldx, zx, maxlen;
    float sx;
    char *mem;               /* direction_bytes() of scratch memory, allocated by the calling thread */
    /* set by direction_begin, read by every step (whichever thread runs it) */
    QMatrix Wm, Rm;
    float *gx, *g, *hprev, *c;
    int32_t *acc, *accx;
    uint8_t *hq;
} Direction;

static size_t direction_bytes(int B, int H, int maxlen) {
    const size_t steps = (size_t)(maxlen > 0 ? maxlen : 1), H4 = 4 * (size_t)H, Kph = (H + 3) / 4 * 4;
    return 2 * align64(steps * B * H4 * 4) + 2 * align64((size_t)B * H4 * 4) + 2 * align64((size_t)B * H * 4) +
           align64((size_t)B * Kph);
}

/* The direction's set-up: its scratch memory laid out, the input projection of the first maxlen steps (in time
 * order) and the initial state; 0, or -1 without memory. */
static int direction_begin(Direction *job) {
    const OrtqArgs *a = job->a;
    const int d = job->d, B = a->B, H = a->H, I = a->I, H4 = 4 * a->H, maxlen = job->maxlen;
    const int Kph = (H + 3) / 4 * 4;
    const size_t steps = (size_t)(maxlen > 0 ? maxlen : 1);
    const size_t n_gx = align64(steps * B * H4 * sizeof(float)), n_acc = align64((size_t)B * H4 * sizeof(int32_t));
    const size_t n_g = align64((size_t)B * H4 * sizeof(float)), n_h = align64((size_t)B * H * sizeof(float));
    const size_t n_hq = align64((size_t)B * Kph);
    char *mem = job->mem;
    if (!mem) return -1;
    job->gx = (float *)mem;
    job->accx = (int32_t *)(mem + n_gx);
    job->acc = (int32_t *)(mem + 2 * n_gx);
    job->g = (float *)((char *)job->acc + n_acc);
    job->hprev = (float *)((char *)job->g + n_g);
    job->c = (float *)((char *)job->hprev + n_h);
    job->hq = (uint8_t *)((char *)job->c + n_h);
    memset(job->hq, 0, n_hq);
    qmatrix_view(&job->Wm, a->w, a->w_colsum, d, I, H4, a->w_signed, a->w_zp[d]);
    qmatrix_view(&job->Rm, a->r, a->r_colsum, d, H, H4, a->r_signed, a->r_zp[d]);
    if (maxlen > 0) {
        qgemm(&job->Wm, job->xq, job->ldx, maxlen * B, job->zx, job->accx);
        const float *ws = a->w_scale + (size_t)d * a->w_scale_cols;
        for (size_t row = 0; row < (size_t)maxlen * B; row++)
            for (int n = 0; n < H4; n++)
                job->gx[row * H4 + n] = (float)job->accx[row * H4 + n] * (job->sx * ws[a->w_scale_cols == 1 ? 0 : n]);
    }
    memcpy(job->hprev, a->h0 + (size_t)d * B * H, (size_t)B * H * sizeof(float));
    memcpy(job->c, a->c0 + (size_t)d * B * H, (size_t)B * H * sizeof(float));
    return 0;
}

/* Step s of the direction: the gates (the x part of the row's own time step plus the recurrent product of each
 * row block, its h quantized on its own), the activations and the state update. */
static void direction_step(Direction *job, int s) {
    const OrtqArgs *a = job->a;
    const int d = job->d, B = a->B, H = a->H, D = a->D, H4 = 4 * a->H, rev = a->reverse[d];
    const int Kph = (H + 3) / 4 * 4;
    const int *act = a->acts + 3 * d;
    const float *al = a->alphas + 3 * d, *be = a->betas + 3 * d;
    float *gx = job->gx, *g = job->g, *hprev = job->hprev, *c = job->c;
    int32_t *acc = job->acc;
    uint8_t *hq = job->hq;
    const float *rs = a->r_scale + (size_t)d * a->r_scale_cols;
    const float clip = a->clip;
    const float *bias = a->bias ? a->bias + (size_t)d * H4 : NULL;
    const float *Pi = a->P ? a->P + (size_t)d * 3 * H : NULL;
    const float *Po = Pi ? Pi + H : NULL, *Pf = Pi ? Pi + 2 * H : NULL;
    const int block = a->block_rows > 0 ? a->block_rows : B;
    for (int b = 0; b < B; b++) {
        int len = a->lens[b];
        int t = rev && s < len ? len - 1 - s : s;
        memcpy(g + (size_t)b * H4, gx + ((size_t)t * B + b) * H4, (size_t)H4 * sizeof(float));
    }
    for (int b0 = 0; b0 < B; b0 += block) {
        int nb = B - b0 < block ? B - b0 : block;
        int zh;
        /* quantize the block's hidden state (rows of H, padded to Kph with zeros) */
        uint8_t *tmp = hq;
        float sh = quantize(hprev + (size_t)b0 * H, (size_t)nb * H, tmp, &zh);
        if (Kph != H)  /* spread rows to stride Kph, back to front */
            for (int r = nb - 1; r >= 0; r--) {
                memmove(hq + (size_t)r * Kph, hq + (size_t)r * H, (size_t)H);
                memset(hq + (size_t)r * Kph + H, 0, (size_t)(Kph - H));
            }
        qgemm(&job->Rm, hq, Kph, nb, zh, acc);
        for (int r = 0; r < nb; r++) {
            float *gr = g + (size_t)(b0 + r) * H4;
            const int32_t *ar = acc + (size_t)r * H4;
            if (a->r_scale_cols == 1) {
                float m = sh * rs[0];
                for (int n = 0; n < H4; n++) gr[n] = gr[n] + (float)ar[n] * m;
            } else {
                for (int n = 0; n < H4; n++) gr[n] = gr[n] + (float)ar[n] * (sh * rs[n]);
            }
        }
    }
    for (int b = 0; b < B; b++) {
        int len = a->lens[b];
        float *hp = hprev + (size_t)b * H;
        if (s >= len) {
            if (a->want_y) memset(hp, 0, (size_t)H * sizeof(float));
            continue;
        }
        float *gi = g + (size_t)b * H4, *go = gi + H, *gf = go + H, *gc = gf + H;
        float *cb = c + (size_t)b * H;
        int k;
        if (Pi) for (k = 0; k < H; k++) gi[k] = gi[k] + Pi[k] * cb[k];
        bias_clip(gi, bias, H, clip);
        activate(gi, H, act[0], al[0], be[0]);
        if (a->input_forget) {
            for (k = 0; k < H; k++) gf[k] = 1.0f - gi[k];
        } else {
            if (Pf) for (k = 0; k < H; k++) gf[k] = gf[k] + Pf[k] * cb[k];
            bias_clip(gf, bias ? bias + 2 * H : NULL, H, clip);
            activate(gf, H, act[0], al[0], be[0]);
        }
        bias_clip(gc, bias ? bias + 3 * H : NULL, H, clip);
        activate(gc, H, act[1], al[1], be[1]);
        for (k = 0; k < H; k++) cb[k] = cb[k] * gf[k] + gi[k] * gc[k];
        if (Po) for (k = 0; k < H; k++) go[k] = go[k] + Po[k] * cb[k];
        bias_clip(go, bias ? bias + H : NULL, H, clip);
        activate(go, H, act[0], al[0], be[0]);
        memcpy(hp, cb, (size_t)H * sizeof(float));
        activate(hp, H, act[2], al[2], be[2]);
        for (k = 0; k < H; k++) hp[k] = hp[k] * go[k];
        if (a->want_y) {
            int t = rev ? len - 1 - s : s;
            memcpy(a->Y + (((size_t)t * D + d) * B + b) * H, hp, (size_t)H * sizeof(float));
        }
        if (s + 1 == len) {
            memcpy(a->Yh + ((size_t)d * B + b) * H, hp, (size_t)H * sizeof(float));
            memcpy(a->Yc + ((size_t)d * B + b) * H, cb, (size_t)H * sizeof(float));
        }
    }
}

/* Pipe d (a direction), step k: the set-up with step 0, then step k (team_pipes: the steps of a direction in
 * order, on whichever thread is running; a late thread's direction taken over step by step). */
static void direction_pipe_step(void *ctx, int d, int k, int tid) {
    (void)tid;
    Direction *job = (Direction *)ctx + d;
    if (k == 0) job->status = direction_begin(job);
    if (job->status == 0 && k < job->maxlen) direction_step(job, k);
}

int ortq_run(const OrtqArgs *a) {
    const int B = a->B, I = a->I, T = a->T;
    int maxlen = 0;
    for (int b = 0; b < B; b++) maxlen = a->lens[b] > maxlen ? a->lens[b] : maxlen;
    if (maxlen > T) maxlen = T;
    const int Kpx = (I + 3) / 4 * 4;
    size_t rows = (size_t)maxlen * B;
    size_t n_xq = align64(rows * Kpx + 4);
    uint8_t *xq = (uint8_t *)scratch(2, n_xq + rows * I + 4);
    if (!xq) return -1;
    uint8_t *tmp = xq + n_xq;
    memset(xq, 0, n_xq);
    int zx = 0;
    float sx = quantize(a->x, rows * I, tmp, &zx);
    for (size_t r = 0; r < rows; r++) memcpy(xq + r * Kpx, tmp + r * I, (size_t)I);
    Direction jobs[2];
    for (int d = 0; d < a->D; d++) {
        jobs[d].a = a; jobs[d].d = d; jobs[d].status = -1; jobs[d].xq = xq; jobs[d].ldx = Kpx;
        jobs[d].zx = zx; jobs[d].maxlen = maxlen; jobs[d].sx = sx;
        jobs[d].mem = (char *)scratch(d, direction_bytes(B, a->H, maxlen));
        if (!jobs[d].mem) return -1;
    }
    team_t team;
    team_begin(&team, a->D == 2 ? a->threads : 1);
    team_pipes(&team, direction_pipe_step, jobs, a->D, maxlen > 0 ? maxlen : 1);
    team_end(&team);
    for (int d = 0; d < a->D; d++)
        if (jobs[d].status != 0) return -1;
    return 0;
}

/* ---- the onnxruntime custom operator (fusedrnn.frontends.onnx_native) ------------------------------------------
 *   Domain ai.fusedrnn.native.ortq, opset 1:
 *   DynamicQuantizeLSTM(X [T, B, I] f32, sequence_lens [B] i32?, initial_h [D, B, H] f32?, initial_c f32?)
 *        -> Y [T, D, B, H], Y_h [D, B, H], Y_c [D, B, H]      attribute plan: the id ortq_bridge_add gave
 * One ortq_run per call with the node's quantized weights, packed by Python and copied into the plan, in native
 * precision's semantics (fusedrnn.ops.dynamic_quantize_lstm with intra_op_threads = 1: h quantized as one block). */
#include "_ort_api.h"

typedef struct {
    bridge_head head;
    OrtqArgs tmpl;  /* the weight and attribute fields, pointing into mem */
    void *mem;
} ortq_plan;

static int ortq_threads = 1;  /* threads a call may use (directions as pipes) */

static void ortq_plan_release(bridge_head *head) {
    ortq_plan *p = (ortq_plan *)head;
    free(p->mem);
    free(p);
}

/* Copies n bytes from src to the next 64-byte aligned place of *at (NULL stays NULL). */
static const void *ortq_keep(char **at, const void *src, size_t n) {
    if (!src) return NULL;
    char *dst = *at;
    memcpy(dst, src, n);
    *at += align64(n);
    return dst;
}

/* A plan from the OrtqArgs Python made for a probe call of the node (fusedrnn.cells.ort_qlstm.recording): its
 * weight and attribute fields are copied; its id (>= 0), or -1 for a template this operator cannot hold, -2 without
 * memory or a free slot. */
long ortq_bridge_add(const OrtqArgs *t) {
    if (t->D < 1 || t->D > 2 || t->H < 1 || t->I < 1 || t->H > (1 << 16) || t->I > (1 << 20) || !t->w || !t->r
        || !t->w_colsum || !t->r_colsum || !t->w_scale || !t->r_scale || !t->w_zp || !t->r_zp || !t->reverse
        || !t->acts || !t->alphas || !t->betas || (t->w_scale_cols != 1 && t->w_scale_cols != 4 * t->H)
        || (t->r_scale_cols != 1 && t->r_scale_cols != 4 * t->H))
        return -1;
    const size_t D = (size_t)t->D, N = 4 * (size_t)t->H;
    const size_t sizes[14] = {
        D * (size_t)ortq_packed_size(t->I, (int)N), D * (size_t)ortq_colsum_size((int)N) * 4,
        D * (size_t)t->w_scale_cols * 4, D * 4,
        D * (size_t)ortq_packed_size(t->H, (int)N), D * (size_t)ortq_colsum_size((int)N) * 4,
        D * (size_t)t->r_scale_cols * 4, D * 4,
        t->bias ? D * N * 4 : 0, t->P ? D * 3 * (size_t)t->H * 4 : 0, D * 4, D * 3 * 4, D * 3 * 4, D * 3 * 4};
    size_t total = 0;
    for (int i = 0; i < 14; i++) total += align64(sizes[i]);
    ortq_plan *p = calloc(1, sizeof *p);
    if (!p || posix_memalign(&p->mem, 64, total ? total : 64) != 0) {
        free(p);
        return -2;
    }
    char *at = p->mem;
    p->tmpl = *t;
    OrtqArgs *c = &p->tmpl;
    c->w = ortq_keep(&at, t->w, sizes[0]);
    c->w_colsum = ortq_keep(&at, t->w_colsum, sizes[1]);
    c->w_scale = ortq_keep(&at, t->w_scale, sizes[2]);
    c->w_zp = ortq_keep(&at, t->w_zp, sizes[3]);
    c->r = ortq_keep(&at, t->r, sizes[4]);
    c->r_colsum = ortq_keep(&at, t->r_colsum, sizes[5]);
    c->r_scale = ortq_keep(&at, t->r_scale, sizes[6]);
    c->r_zp = ortq_keep(&at, t->r_zp, sizes[7]);
    c->bias = ortq_keep(&at, t->bias, sizes[8]);
    c->P = ortq_keep(&at, t->P, sizes[9]);
    c->reverse = ortq_keep(&at, t->reverse, sizes[10]);
    c->acts = ortq_keep(&at, t->acts, sizes[11]);
    c->alphas = ortq_keep(&at, t->alphas, sizes[12]);
    c->betas = ortq_keep(&at, t->betas, sizes[13]);
    c->x = NULL; c->lens = NULL; c->h0 = c->c0 = NULL; c->Y = c->Yh = c->Yc = NULL;
    p->head.kind = 0;
    p->head.release = ortq_plan_release;
    return bridge_register(&p->head);
}

void ortq_bridge_drop(long id) { bridge_drop(id); }
int ortq_bridge_live(void) { return bridge_count(); }
void ortq_bridge_threads(int n, long min_macs) {  /* every call may use n threads (as fusedrnn.ops) */
    (void)min_macs;
    __atomic_store_n(&ortq_threads, n < 1 ? 1 : n > POOL_MAX ? POOL_MAX : n, __ATOMIC_RELAXED);
}
long ortq_bridge_ns(void) { return __atomic_load_n(&bridge_ns, __ATOMIC_RELAXED); }

static OrtStatus *ortq_compute(void *kernel, OrtKernelContext *ctx) {
    const bridge_kernel *k = kernel;
    const void *api = k->api;
    const ortq_plan *p = (const ortq_plan *)k->plan;
    const int D = p->tmpl.D, H = p->tmpl.H;
    bridge_tensor in[4];
    int64_t T = 0, B = 0;
    OrtStatus *st = bridge_inputs(api, ctx, 4, in);
    if (st || (st = bridge_check(api, in, 4, p->tmpl.I, D, H, &T, &B))) return st;
    const int64_t ydims[4] = {T, D, B, H}, sdims[3] = {D, B, H};
    float *Y = NULL, *Yh = NULL, *Yc = NULL;
    if ((st = bridge_output(api, ctx, 0, ydims, 4, &Y)) || (st = bridge_output(api, ctx, 1, sdims, 3, &Yh))
        || (st = bridge_output(api, ctx, 2, sdims, 3, &Yc)))
        return st;
    const size_t state = (size_t)D * B * H;
    memset(Y, 0, (size_t)T * state * sizeof(float));
    memset(Yh, 0, state * sizeof(float));
    memset(Yc, 0, state * sizeof(float));
    /* absent inputs: every row T steps, zero states */
    const size_t extra = (in[1].data ? 0 : (size_t)B * 4) + (in[2].data ? 0 : state * 4)
                         + (in[3].data ? 0 : state * 4);
    char *mem = extra ? calloc(1, extra) : NULL;
    if (extra && !mem) return bridge_no_memory(api);
    char *at = mem;
    int32_t *lens = in[1].data;
    if (!lens) {
        lens = (int32_t *)at;
        at += (size_t)B * 4;
        for (int64_t b = 0; b < B; b++) lens[b] = (int32_t)T;
    }
    const float *h0 = in[2].data, *c0 = in[3].data;
    if (!h0) { h0 = (const float *)at; at += state * 4; }
    if (!c0) c0 = (const float *)at;
    OrtqArgs a = p->tmpl;
    a.T = (int)T; a.B = (int)B; a.x = in[0].data; a.lens = lens; a.h0 = h0; a.c0 = c0;
    a.block_rows = (int)B;
    a.threads = __atomic_load_n(&ortq_threads, __ATOMIC_RELAXED);
    a.Y = Y; a.Yh = Yh; a.Yc = Yc;
    const long t0 = bridge_now_ns();
    const int rc = ortq_run(&a);
    __atomic_add_fetch(&bridge_ns, bridge_now_ns() - t0, __ATOMIC_RELAXED);
    free(mem);
    return rc == 0 ? NULL : bridge_no_memory(api);
}

static const bridge_op ortq_ops[] = {BRIDGE_OP("DynamicQuantizeLSTM", 0, 4, 3, ortq_compute)};

/* onnxruntime's entry point of a custom-op library (SessionOptions.register_custom_ops_library). */
__attribute__((visibility("default"))) OrtStatus *RegisterCustomOps(OrtSessionOptions *options,
                                                                    const OrtApiBase *base) {
    return bridge_register_ops(options, base, "ai.fusedrnn.native.ortq", ortq_ops, 1);
}

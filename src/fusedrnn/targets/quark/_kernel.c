/* The ExtendedLSTM recurrence of kernel.py in C: the whole time loop of both directions in one call.
 *
 * Same arithmetic as the NumPy path, to the bit (tests/test_quark_compiled.py):
 *  - exact integer products h @ R'^T and x @ W'^T: the int16 weights are split into a signed high byte and an
 *    unsigned low byte (w = 256 * hi + lo), each multiplied with int16 activations in int32 (pair sums < 2^24,
 *    at most 128 pairs per int32 chunk, so no int32 sum can overflow), combined in int64;
 *  - srs_int rounded shifts (half away from zero; faithful: int32 saturation, the kernel's INT_MIN constant at
 *    shift 32), the int32 wrap of the faithful gate sum, float32 gates;
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

#define QUARK_ABI 4

int quark_abi_version(void) { return QUARK_ABI; }

typedef struct {
    int64_t shift, half, delta, sat; /* rounded shift: (x + half - (x < 0) * delta) >> shift; sat: int32 clamp */
} Srs;

typedef struct {
    int32_t T, B, I, H, G, D, Ip, Hp, Gp, faithful, rev0, rev1, has_qb, pad;
    int64_t qx, qh, qb, ohs, ohz, ohz_term;
    Srs xw, xwq, hr, hrq, hss, oh;
    const int16_t *x;   /* [T][B][Ip], int16-domain inputs (zero padded to Ip, even) */
    const int64_t *xs;  /* [D][T][B]: srs(sum(x) * qa, xss) in each direction's processing order */
    const int64_t *qc;  /* [D][G] */
    const int16_t *Wh, *Wl; /* [D][Gp/16][Ip/2][16][2]: high / low bytes of W'[d][g][k] at [g/16][k/2][g%16][k%2] */
    const int16_t *Rh, *Rl; /* [D][Gp/16][Hp/2][16][2] */
    int16_t *h;         /* [D][B][Hp] in/out */
    float *c;           /* [D][B][H] in/out */
    int16_t *y;         /* [T][D][B][H] out, in input time order */
    int64_t *acc;       /* scratch [B][Gp] */
    int64_t *accx;      /* scratch [D][ts][B][Gp] */
    float *gf;          /* scratch [2 G + 2 H] */
    int32_t ts, xlo[2]; /* time steps per x-projection block; first input step of each direction's block */
} QuarkArgs;

static inline int64_t srs(int64_t x, const Srs *s) {
    int64_t r = (x + s->half - (x < 0 ? s->delta : 0)) >> s->shift;
    if (s->sat) {
        if (r < INT32_MIN) r = INT32_MIN;
        if (r > INT32_MAX) r = INT32_MAX;
    }
    return r;
}

/* ---- exact int16 products -------------------------------------------------------------------------------- */
/* out[m][n] (n < N) = sum_k a[m][k] * (256 * Ph[.] + Pl[.]) for m < M, a [M][lda] int16 with Kp (even) columns
 * used; P in panels [Np/16][Kp/2][16][2] (Np a multiple of 16), see the header. int32 chunks of 128 pairs: |a * hi| <= 2^22,
 * |a * lo| < 2^23, so a pair sum is < 2^24 and 128 of them < 2^31. */
#define CHUNK 128

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
/* 4 rows x 16 columns per tile, vpdpwssd (int16 pair products added into int32 lanes) */
static inline __attribute__((always_inline)) void tile(const int16_t *a, int lda, int nr, int kp2,
                                                       const int16_t *Ph, const int16_t *Pl, int Np, int n0,
                                                       int64_t *out, int ldo, int N) {
    int64_t acc[4][16];
    memset(acc, 0, sizeof acc);
    for (int k0 = 0; k0 < kp2; k0 += CHUNK) {
        int k1 = k0 + CHUNK < kp2 ? k0 + CHUNK : kp2;
        __m512i ah0 = _mm512_setzero_si512(), ah1 = ah0, ah2 = ah0, ah3 = ah0;
        __m512i al0 = ah0, al1 = ah0, al2 = ah0, al3 = ah0;
        for (int kp = k0; kp < k1; kp++) {
            const __m512i wh = _mm512_loadu_si512((const void *)(Ph + (((size_t)(n0 / 16) * kp2 + kp) * 16 + n0 % 16) * 2));
            const __m512i wl = _mm512_loadu_si512((const void *)(Pl + (((size_t)(n0 / 16) * kp2 + kp) * 16 + n0 % 16) * 2));
            int32_t p;
            memcpy(&p, a + 2 * kp, 4);
            __m512i b = _mm512_set1_epi32(p);
            ah0 = _mm512_dpwssd_epi32(ah0, b, wh);
            al0 = _mm512_dpwssd_epi32(al0, b, wl);
            if (nr > 1) {
                memcpy(&p, a + lda + 2 * kp, 4);
                b = _mm512_set1_epi32(p);
                ah1 = _mm512_dpwssd_epi32(ah1, b, wh);
                al1 = _mm512_dpwssd_epi32(al1, b, wl);
            }
            if (nr > 2) {
                memcpy(&p, a + 2 * lda + 2 * kp, 4);
                b = _mm512_set1_epi32(p);
                ah2 = _mm512_dpwssd_epi32(ah2, b, wh);
                al2 = _mm512_dpwssd_epi32(al2, b, wl);
            }
            if (nr > 3) {
                memcpy(&p, a + 3 * lda + 2 * kp, 4);
                b = _mm512_set1_epi32(p);
                ah3 = _mm512_dpwssd_epi32(ah3, b, wh);
                al3 = _mm512_dpwssd_epi32(al3, b, wl);
            }
        }
        int32_t hh[4][16], ll[4][16];
        _mm512_storeu_si512(hh[0], ah0); _mm512_storeu_si512(ll[0], al0);
        _mm512_storeu_si512(hh[1], ah1); _mm512_storeu_si512(ll[1], al1);
        _mm512_storeu_si512(hh[2], ah2); _mm512_storeu_si512(ll[2], al2);
        _mm512_storeu_si512(hh[3], ah3); _mm512_storeu_si512(ll[3], al3);
        for (int r = 0; r < 4; r++)
            for (int j = 0; j < 16; j++) acc[r][j] += (int64_t)hh[r][j] * 256 + ll[r][j];
    }
    int nn = N - n0 < 16 ? N - n0 : 16;
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nn; j++) out[(size_t)r * ldo + n0 + j] = acc[r][j];
}
#define TILE_N 16
#elif defined(__AVX2__)
#define TILE_N 8
static inline __attribute__((always_inline)) void tile(const int16_t *a, int lda, int nr, int kp2,
                                                       const int16_t *Ph, const int16_t *Pl, int Np, int n0,
                                                       int64_t *out, int ldo, int N) {
    int64_t acc[4][8];
    memset(acc, 0, sizeof acc);
    for (int k0 = 0; k0 < kp2; k0 += CHUNK) {
        int k1 = k0 + CHUNK < kp2 ? k0 + CHUNK : kp2;
        __m256i ah0 = _mm256_setzero_si256(), ah1 = ah0, ah2 = ah0, ah3 = ah0;
        __m256i al0 = ah0, al1 = ah0, al2 = ah0, al3 = ah0;
        for (int kp = k0; kp < k1; kp++) {
            const __m256i wh = _mm256_loadu_si256((const __m256i *)(Ph + (((size_t)(n0 / 16) * kp2 + kp) * 16 + n0 % 16) * 2));
            const __m256i wl = _mm256_loadu_si256((const __m256i *)(Pl + (((size_t)(n0 / 16) * kp2 + kp) * 16 + n0 % 16) * 2));
            int32_t p;
            memcpy(&p, a + 2 * kp, 4);
            __m256i b = _mm256_set1_epi32(p);
            ah0 = _mm256_add_epi32(ah0, _mm256_madd_epi16(b, wh));
            al0 = _mm256_add_epi32(al0, _mm256_madd_epi16(b, wl));
            if (nr > 1) {
                memcpy(&p, a + lda + 2 * kp, 4);
                b = _mm256_set1_epi32(p);
                ah1 = _mm256_add_epi32(ah1, _mm256_madd_epi16(b, wh));
                al1 = _mm256_add_epi32(al1, _mm256_madd_epi16(b, wl));
            }
            if (nr > 2) {
                memcpy(&p, a + 2 * lda + 2 * kp, 4);
                b = _mm256_set1_epi32(p);
                ah2 = _mm256_add_epi32(ah2, _mm256_madd_epi16(b, wh));
                al2 = _mm256_add_epi32(al2, _mm256_madd_epi16(b, wl));
            }
            if (nr > 3) {
                memcpy(&p, a + 3 * lda + 2 * kp, 4);
                b = _mm256_set1_epi32(p);
                ah3 = _mm256_add_epi32(ah3, _mm256_madd_epi16(b, wh));
                al3 = _mm256_add_epi32(al3, _mm256_madd_epi16(b, wl));
            }
        }
        int32_t hh[4][8], ll[4][8];
        _mm256_storeu_si256((__m256i *)hh[0], ah0); _mm256_storeu_si256((__m256i *)ll[0], al0);
        _mm256_storeu_si256((__m256i *)hh[1], ah1); _mm256_storeu_si256((__m256i *)ll[1], al1);
        _mm256_storeu_si256((__m256i *)hh[2], ah2); _mm256_storeu_si256((__m256i *)ll[2], al2);
        _mm256_storeu_si256((__m256i *)hh[3], ah3); _mm256_storeu_si256((__m256i *)ll[3], al3);
        for (int r = 0; r < 4; r++)
            for (int j = 0; j < 8; j++) acc[r][j] += (int64_t)hh[r][j] * 256 + ll[r][j];
    }
    int nn = N - n0 < 8 ? N - n0 : 8;
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nn; j++) out[(size_t)r * ldo + n0 + j] = acc[r][j];
}

#endif

#ifdef TILE_N
static void gemm(const int16_t *a, int lda, int M, int Kp, const int16_t *Ph, const int16_t *Pl, int Np, int N,
                 int64_t *out, int ldo) {
    int kp2 = Kp / 2;
    for (int n0 = 0; n0 < N; n0 += TILE_N) { /* one weight panel (L1-sized) for all rows */
        for (int m = 0; m < M; m += 4) {
            int nr = M - m < 4 ? M - m : 4;
            const int16_t *am = a + (size_t)m * lda;
            int64_t *om = out + (size_t)m * ldo;
            switch (nr) {
            case 4: tile(am, lda, 4, kp2, Ph, Pl, Np, n0, om, ldo, N); break;
            case 3: tile(am, lda, 3, kp2, Ph, Pl, Np, n0, om, ldo, N); break;
            case 2: tile(am, lda, 2, kp2, Ph, Pl, Np, n0, om, ldo, N); break;
            default: tile(am, lda, 1, kp2, Ph, Pl, Np, n0, om, ldo, N); break;
            }
        }
    }
}
#else
static void gemm(const int16_t *a, int lda, int M, int Kp, const int16_t *Ph, const int16_t *Pl, int Np, int N,
                 int64_t *out, int ldo) {
    for (int m = 0; m < M; m++) {
        const int16_t *am = a + (size_t)m * lda;
        for (int n = 0; n < N; n++) {
            int64_t s = 0;
            for (int k = 0; k < Kp; k++) {
                size_t i = (((size_t)(n / 16) * (Kp / 2) + k / 2) * 16 + n % 16) * 2 + (k & 1);
                s += (int64_t)am[k] * (256 * (int64_t)Ph[i] + Pl[i]);
            }
            out[(size_t)m * ldo + n] = s;
        }
    }
}
#endif

/* ---- tanhf (fdlibm's float32 algorithm, as tanhf.py) ------------------------------------------------------- */
static inline float f_of(uint32_t w) { float f; memcpy(&f, &w, 4); return f; }
static inline uint32_t w_of(float f) { uint32_t w; memcpy(&w, &f, 4); return w; }

/* expm1f for y = 2|x| in [2, 19) or y = -2|x| in (-2, 0] (tanhf.py's _expm1f_tanh with the exact k = 0 bound) */
static inline float expm1f_tanh(float y) {
    const float ln2_hi = f_of(0x3F317180), ln2_lo = f_of(0x3717F7D1), invln2 = f_of(0x3FB8AA3B);
    const float q0 = f_of(0xBD088889), q1 = f_of(0x3AD00D01), q2 = f_of(0xB8A670CD), q3 = f_of(0x36867E54),
                q4 = f_of(0xB457EDBB);
    float hs = y < 0.0f ? -0.5f : 0.5f;
    float prod = invln2 * y;
    int32_t k = (int32_t)(prod + hs);
    if (w_of(y) == 0xBEB17218u) k = 0;
    float tk = (float)k;
    float hi = y - tk * ln2_hi;
    float lo = tk * ln2_lo;
    float xr = hi - lo;
    float c = (hi - xr) - lo;
    float hfx = 0.5f * xr;
    float hxs = xr * hfx;
    float r1 = 1.0f + hxs * (q0 + hxs * (q1 + hxs * (q2 + hxs * (q3 + hxs * q4))));
    float t = 3.0f - r1 * hfx;
    float e = hxs * ((r1 - t) / (6.0f - xr * t));
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
static void tanhf_vec(const float *restrict x, float *restrict out, int n) {
    const float ln2_hi = f_of(0x3F317180), ln2_lo = f_of(0x3717F7D1), invln2 = f_of(0x3FB8AA3B);
    const float q0 = f_of(0xBD088889), q1 = f_of(0x3AD00D01), q2 = f_of(0xB8A670CD), q3 = f_of(0x36867E54),
                q4 = f_of(0xB457EDBB);
    for (int i = 0; i < n; i++) {
        uint32_t wx = w_of(x[i]);
        uint32_t ix = wx & 0x7FFFFFFFu;
        float ax = f_of(ix);
        float y2 = 2.0f * (ax < 9.5f ? ax : 9.5f);
        int ge1 = ix >= 0x3F800000u;
        float ny2 = -y2;
        float y = ge1 ? y2 : ny2;
        float hs = ge1 ? 0.5f : -0.5f;
        float prod = invln2 * y;
        int32_t k = (int32_t)(prod + hs);
        k = w_of(y) == 0xBEB17218u ? 0 : k;
        float tk = (float)k;
        float hi = y - tk * ln2_hi;
        float lo = tk * ln2_lo;
        float xr = hi - lo;
        float c = (hi - xr) - lo;
        float hfx = 0.5f * xr;
        float hxs = xr * hfx;
        float r1 = 1.0f + hxs * (q0 + hxs * (q1 + hxs * (q2 + hxs * (q3 + hxs * q4))));
        float t = 3.0f - r1 * hfx;
        float e = hxs * ((r1 - t) / (6.0f - xr * t));
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
        float zbig = 1.0f - 2.0f / t2, zsmall = -em / t2;
        float z = ge1 ? zbig : zsmall;
        out[i] = f_of((w_of(z) & 0x7FFFFFFFu) | (wx & 0x80000000u));
    }
}

float quark_tanhf(float x) { return tanhf_fd(x); }

void quark_tanhf_vec(const float *x, float *out, int64_t n) { tanhf_vec(x, out, (int)n); }

void quark_tanhf_array(const float *x, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = tanhf_fd(x[i]);
}

/* ---- the time loop ---------------------------------------------------------------------------------------- */
int quark_run(QuarkArgs *a) {
    const int T = a->T, B = a->B, H = a->H, G = a->G, D = a->D, Ip = a->Ip, Hp = a->Hp, Gp = a->Gp;
    const float s25 = 1.0f / 33554432.0f, s24 = 1.0f / 16777216.0f;
    for (int t = 0; t < T; t++) {
        for (int d = 0; d < D; d++) {
            const int rev = d ? a->rev1 : a->rev0;
            const int tx = rev ? T - 1 - t : t;
            int16_t *h = a->h + (size_t)d * B * Hp;
            float *c = a->c + (size_t)d * B * H;
            const size_t wo = (size_t)d * (Ip / 2) * Gp * 2, ro = (size_t)d * (Hp / 2) * Gp * 2;
            if (t % a->ts == 0) { /* x projection of the next ts steps of this direction, in input time order */
                int n = T - t < a->ts ? T - t : a->ts;
                int lo = rev ? T - t - n : t;
                gemm(a->x + (size_t)lo * B * Ip, Ip, n * B, Ip, a->Wh + wo, a->Wl + wo, Gp, G,
                     a->accx + (size_t)d * a->ts * B * Gp, Gp);
                a->xlo[d] = lo;
            }
            gemm(h, Hp, B, Hp, a->Rh + ro, a->Rl + ro, Gp, G, a->acc, Gp);
            const int64_t *qc = a->qc + (size_t)d * G;
            const int64_t *xs = a->xs + ((size_t)d * T + t) * B;
            for (int b = 0; b < B; b++) {
                int16_t *hb = h + (size_t)b * Hp;
                float *cb = c + (size_t)b * H;
                const int64_t *ax = a->accx + (((size_t)d * a->ts + (tx - a->xlo[d])) * B + b) * Gp, *ar = a->acc + (size_t)b * Gp;
                int64_t hterm = 0;
                if (a->has_qb) {
                    int64_t hsum = 0;
                    for (int j = 0; j < H; j++) hsum += hb[j];
                    hterm = srs(hsum * a->qb, &a->hss);
                }
                int16_t *yb = a->y + (((size_t)tx * D + d) * B + b) * H;
                float *gf = a->gf, *v = a->gf + G, *cn = a->gf + 2 * G, *th = a->gf + 2 * G + H;
                const int64_t xsb = xs[b], qx = a->qx, qh = a->qh;
                const Srs sxw = a->xw, sxwq = a->xwq, shr = a->hr, shrq = a->hrq;
                for (int k = 0; k < G; k++) {
                    int64_t g = srs(srs(ax[k], &sxw) * qx, &sxwq) - xsb + qc[k];
                    g += srs(srs(ar[k], &shr) * qh, &shrq);
                    g -= hterm;
                    gf[k] = a->faithful ? (float)(int32_t)g : (float)g;
                }
                for (int k = 0; k < 3 * H; k++) gf[k] *= s25;
                for (int k = 3 * H; k < G; k++) gf[k] *= s24;
                tanhf_vec(gf, v, G);
                for (int j = 0; j < H; j++) {
                    float si = v[j] * 0.5f + 0.5f, sf = v[2 * H + j] * 0.5f + 0.5f;
                    float cj = si * v[3 * H + j] + sf * cb[j];
                    cb[j] = cj;
                    cn[j] = cj;
                }
                tanhf_vec(cn, th, H);
                for (int j = 0; j < H; j++) {
                    float so = v[H + j] * 0.5f + 0.5f;
                    float hf = so * th[j];
                    double dd = (double)hf * 16777216.0;
                    double r = __builtin_trunc((dd < 0 ? -dd : dd) + 0.5);
                    int64_t hv;
                    if (a->faithful) {
                        int64_t ri = dd >= 0.0 ? (int64_t)r : (dd <= -1.0 ? -(int64_t)r : 0);
                        int64_t q = srs(ri * a->ohs + a->ohz_term, &a->oh);
                        q = q < -65536 ? -65536 : (q > 65535 ? 65535 : q);
                        hv = (int16_t)(uint16_t)(uint64_t)q;
                    } else {
                        int64_t ri = dd < 0 ? -(int64_t)r : (int64_t)r;
                        int64_t q = srs(ri * a->ohs, &a->oh) + a->ohz;
                        hv = q < -32768 ? -32768 : (q > 32767 ? 32767 : q);
                    }
                    yb[j] = (int16_t)hv;
                }
            }
            /* h is read by every gate of the step above, so it is updated after the whole row set */
            for (int b = 0; b < B; b++)
                memcpy(h + (size_t)b * Hp, a->y + (((size_t)tx * D + d) * B + b) * H, (size_t)H * 2);
        }
    }
    return 0;
}

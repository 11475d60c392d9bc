/* One instantiation of the recurrence (included by _kernel.c with REAL = float, then double). */

/* out[j] = Σ_k Rm[j·K + k] · h[k] for j < N: four output units at a time, vectorised over k (R stays in its
 * canonical row-major layout, so nothing is packed per call; measured as fast as a packed axpy GEMV here). */
static void SFX(gemv)(const REAL *Rm, int N, int K, const REAL *h, REAL *out) {
    int j = 0;
    int kv = K / VL * VL;
    for (; j + 4 <= N; j += 4) {
        const REAL *r = Rm + (long)j * K;
        VEC a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int k = 0; k < kv; k += VL) {
            VEC hv = *(const VECU *)(h + k);
            a0 += *(const VECU *)(r + k) * hv;
            a1 += *(const VECU *)(r + K + k) * hv;
            a2 += *(const VECU *)(r + 2L * K + k) * hv;
            a3 += *(const VECU *)(r + 3L * K + k) * hv;
        }
        REAL s[4] = {SFX(hsum)(a0), SFX(hsum)(a1), SFX(hsum)(a2), SFX(hsum)(a3)};
        for (int k = kv; k < K; k++)
            for (int q = 0; q < 4; q++) s[q] += r[(long)q * K + k] * h[k];
        for (int q = 0; q < 4; q++) out[j + q] = s[q];
    }
    for (; j < N; j++) {
        const REAL *r = Rm + (long)j * K;
        VEC a = {0};
        for (int k = 0; k < kv; k += VL) a += *(const VECU *)(r + k) * *(const VECU *)(h + k);
        REAL s = SFX(hsum)(a);
        for (int k = kv; k < K; k++) s += r[k] * h[k];
        out[j] = s;
    }
}

/* In place on v[0 .. n) where n is a multiple of VL (buffers are padded). */
static void SFX(activate)(int code, REAL a, REAL b, REAL *v, int n) {
    switch (code) {
    case ACT_SIGMOID: SFX(sigmoid)(v, n); return;
    case ACT_TANH: SFX(tanh)(v, n); return;
    case ACT_SCALED_TANH:
        for (int j = 0; j < n; j++) v[j] *= b;
        SFX(tanh)(v, n);
        for (int j = 0; j < n; j++) v[j] *= a;
        return;
    case ACT_RELU: for (int j = 0; j < n; j++) v[j] = v[j] < 0 ? 0 : v[j]; return;
    case ACT_AFFINE: for (int j = 0; j < n; j++) { REAL t = v[j] * a; v[j] = t + b; } return;
    case ACT_LEAKY_RELU: for (int j = 0; j < n; j++) v[j] = v[j] < 0 ? v[j] * a : v[j]; return;
    case ACT_THRESHOLDED_RELU: for (int j = 0; j < n; j++) v[j] = v[j] <= a ? 0 : v[j]; return;
    case ACT_HARD_SIGMOID:
        for (int j = 0; j < n; j++) { REAL t = v[j] * a; t = t + b; v[j] = t < 0 ? 0 : (t > 1 ? 1 : t); }
        return;
    case ACT_ELU: for (int j = 0; j < n; j++) v[j] = v[j] < 0 ? a * EXPM1(v[j]) : v[j]; return;
    case ACT_SOFTSIGN: for (int j = 0; j < n; j++) v[j] = v[j] / (1 + (v[j] < 0 ? -v[j] : v[j])); return;
    case ACT_SOFTPLUS:
        for (int j = 0; j < n; j++) {
            REAL x = v[j];
            if (x > 0) v[j] = x + LOG1P(EXP(-x));
            else if (x <= 0) v[j] = LOG1P(EXP(x));
        }
        return;
    default: return;
    }
}

static inline void SFX(clamp)(REAL *v, int n, double lim) {
    if (lim < 0) return;
    REAL lo = (REAL)-lim, hi = (REAL)lim;
    for (int j = 0; j < n; j++) v[j] = v[j] < lo ? lo : (v[j] > hi ? hi : v[j]);
}

/* TFLite layer norm over the H units of one gate: (v - mean) / sqrt(var + 1e-8) · w (+ bias). */
static void SFX(layer_norm)(REAL *v, int H, const REAL *w, const REAL *bias) {
    double s = 0;
    for (int j = 0; j < H; j++) s += v[j];
    REAL mean = (REAL)(s / H);
    double q = 0;
    for (int j = 0; j < H; j++) { v[j] -= mean; q += (double)v[j] * v[j]; }
    REAL var = (REAL)(q / H);
    REAL den = (REAL)sqrt((double)(var + (REAL)1e-8));
    for (int j = 0; j < H; j++) { v[j] /= den; v[j] *= w[j]; }
    if (bias) for (int j = 0; j < H; j++) v[j] += bias[j];
}

/* Packed recurrent matrix for gemv_packed: Rm [N, K] row-major -> P [ceil(N/NB)][K][NB] (rows beyond N are 0),
 * so a block of NB output units is one contiguous stream and needs no horizontal sums. With perm, packed row j is
 * source row perm[j / H]·H + j % H (the gate blocks are reordered on the way: no per-call copy of R elsewhere). */
#define NBK (8 * VL)
static void SFX(pack)(const REAL *Rm, int N, int K, REAL *P, const int32_t *perm, int H) {
    for (int j0 = 0; j0 < N; j0 += NBK) {
        REAL *p = P + (long)j0 * K;
        const int nq = N - j0 < NBK ? N - j0 : NBK;
        for (int k0 = 0; k0 < K; k0 += 8) {  /* 8 x nq tiles: the 8 destination rows stay in L1 */
            const int k1 = K - k0 < 8 ? K : k0 + 8;
            for (int q = 0; q < nq; q++) {
                const int j = j0 + q;
                const long src = perm ? (long)perm[j / H] * H + j % H : j;
                const REAL *r = Rm + src * K;
                for (int k = k0; k < k1; k++) p[(long)k * NBK + q] = r[k];
            }
        }
        for (int q = nq; q < NBK; q++)
            for (int k = 0; k < K; k++) p[(long)k * NBK + q] = 0;
    }
}

/* out[j] = Σ_k P(j, k) · h[k], j < PAD(N, NBK) (out has that room): eight vector accumulators per block of NBK
 * output units, k ascending (one multiply-add chain per unit). */
static void SFX(gemv_packed)(const REAL *P, int N, int K, const REAL *h, REAL *out) {
    for (int j0 = 0; j0 < N; j0 += NBK) {
        const REAL *p = P + (long)j0 * K;
        VEC a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
        for (int k = 0; k < K; k++, p += NBK) {
            VEC hv = (VEC){0} + h[k];
            a0 += *(const VEC *)(p + 0 * VL) * hv; a1 += *(const VEC *)(p + 1 * VL) * hv;
            a2 += *(const VEC *)(p + 2 * VL) * hv; a3 += *(const VEC *)(p + 3 * VL) * hv;
            a4 += *(const VEC *)(p + 4 * VL) * hv; a5 += *(const VEC *)(p + 5 * VL) * hv;
            a6 += *(const VEC *)(p + 6 * VL) * hv; a7 += *(const VEC *)(p + 7 * VL) * hv;
        }
        VEC *o = (VEC *)(out + j0);
        o[0] = a0; o[1] = a1; o[2] = a2; o[3] = a3; o[4] = a4; o[5] = a5; o[6] = a6; o[7] = a7;
    }
}

/* The whole chunk of steps [s0, s1) of direction d (directions are independent: one may run on its own thread).
 * Work memory is allocated here, 64-byte aligned; returns 0, or -1 when it cannot be allocated. */
static int SFX(run_dir)(const rnn_args *a, int d) {
    const int B = a->B, H = a->H, Hp = a->Hp, G = a->G, GH = a->G * a->H, D = a->D;
    const long Hq = PAD(H, VL), Hpq = PAD(Hp, VL);
    const int Gr = (a->kind == KIND_GRU && !a->lbr) ? 2 : G;  /* gates whose recurrent term needs no r first */
#if FAST
    const int fast_lstm = a->kind == KIND_LSTM && !a->diagonal && !a->P && !a->ln_on && !a->projW && a->clip < 0
        && a->cell_clip < 0 && a->coupling == COUPLE_NONE && H % VL == 0 && a->act[3 * d] == ACT_SIGMOID
        && a->act[3 * d + 1] == ACT_TANH && a->act[3 * d + 2] == ACT_TANH;
    const int fast_gru = a->kind == KIND_GRU && !a->diagonal && a->clip < 0 && H % VL == 0
        && a->act[3 * d] == ACT_SIGMOID && a->act[3 * d + 1] == ACT_TANH;
    const int rows = HAVE_GEMV8 && (fast_lstm || fast_gru);  /* R read in place by gemv_rows: nothing packed */
    static const int32_t ident[1] = {0};
#else
    const int rows = 0;
#endif
    /* no room for packed copies where gemv_rows reads R in place (a fresh 256 KiB buffer per call is an mmap, page
     * faults and a memset: ~10 µs of a batch-1 call) */
    const long np = (a->diagonal || rows) ? 0 : PAD((long)Gr * H, NBK) * Hp;
    const long nnp = (a->kind == KIND_GRU && !a->lbr && !rows) ? PAD((long)H, NBK) * H : 0;
    const long ntmp = PAD((long)G * H, NBK) + NBK;
    const long n = 4 * Hq + (long)B * (Hpq + Hq) + 3 * Hq + Hpq + ntmp + np + nnp + 4 * Hq;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, (size_t)n * sizeof(REAL)) != 0) return -1;
    REAL *acc = (REAL *)mem;
    memset(acc, 0, (size_t)n * sizeof(REAL));
    REAL *Rp = acc;                          /* packed [Gr*H, Hp] recurrent rows (first: 64-byte aligned) */
    REAL *Rnp = Rp + np;                     /* packed GRU candidate rows [H, H] */
    REAL *tmp = Rnp + nnp;                   /* [PAD(G*H, NBK)] packed-GEMV output */
    acc = tmp + ntmp;                        /* [G, Hq] gate pre-activations / activations */
    REAL *hs = acc + 4 * Hq;                 /* [B, Hpq] hidden states */
    REAL *cs = hs + (long)B * Hpq;           /* [B, Hq] cell states */
    REAL *m = cs + (long)B * Hq;             /* [Hq] LSTM o·h(c), GRU r ⊙ h / candidate */
    REAL *t1 = m + Hq;                       /* [Hq] */
    REAL *t2 = t1 + Hq;                      /* [Hq] */
    REAL *hn = t2 + Hq;                      /* [Hpq] new hidden state */
    REAL *xbuf = hn + Hpq;                   /* [G, Hq] projected input + bias, kernel gate order */
    (void)t2;
    const int32_t *gp = a->gperm;
    const REAL *Rd = (const REAL *)a->R + (a->diagonal ? (long)d * GH : (long)d * GH * Hp);
    const REAL *xbd = a->xb ? (const REAL *)a->xb + (long)d * GH : NULL;
    if (!a->diagonal && !rows) SFX(pack)(Rd, Gr * H, Hp, Rp, gp, H);
    if (nnp && !rows) SFX(pack)(Rd + (long)gp[2] * H * Hp, H, H, Rnp, NULL, H);
    const REAL *h_in = (const REAL *)a->h + (long)d * B * Hp;
    const REAL *c_in = a->kind == KIND_LSTM ? (const REAL *)a->c + (long)d * B * H : NULL;
    for (long r = 0; r < B; r++) {
        memcpy(hs + r * Hpq, h_in + r * Hp, sizeof(REAL) * Hp);
        if (c_in) memcpy(cs + r * Hq, c_in + r * H, sizeof(REAL) * H);
    }
    const REAL *xp = (const REAL *)a->xp;
    REAL *Y = (REAL *)a->Y;
    const int rev = a->reverse[d];
    const int *act = a->act + 3 * d;
    const double *al = a->alpha + 3 * d, *be = a->beta + 3 * d;
    for (int s = a->s0; s < a->s1; s++) {
        for (int b = 0; b < B; b++) {
            const long len = a->lens ? a->lens[b] : a->T;
            if (s >= len) continue;
            const long t = rev ? len - 1 - s : s;
            const REAL *x0 = xp + (((long)d * a->K + (s - a->s0)) * B + b) * GH;
            REAL *hp = hs + (long)b * Hpq;
            REAL *cc = cs + (long)b * Hq;
            REAL *yo = Y + ((t * D + d) * (long)B + b) * Hp;
#if FAST
            if (fast_lstm) {
                if (rows) f32_gemv_rows(Rd, 4, H, Hp, gp, hp, tmp);
                else SFX(gemv_packed)(Rp, 4 * H, Hp, hp, tmp);
                const REAL *xi = x0 + (long)gp[0] * H, *xf = x0 + (long)gp[1] * H;
                const REAL *xg = x0 + (long)gp[2] * H, *xo = x0 + (long)gp[3] * H;
                const REAL *bi = xbd ? xbd + (long)gp[0] * H : NULL, *bf = xbd ? xbd + (long)gp[1] * H : NULL;
                const REAL *bg = xbd ? xbd + (long)gp[2] * H : NULL, *bo = xbd ? xbd + (long)gp[3] * H : NULL;
                for (int u = 0; u < H; u += VL) {
                    VEC vi = *(const VECU *)(xi + u), vf_ = *(const VECU *)(xf + u);
                    VEC vg = *(const VECU *)(xg + u), vo = *(const VECU *)(xo + u);
                    if (bi) {
                        vi += *(const VECU *)(bi + u); vf_ += *(const VECU *)(bf + u);
                        vg += *(const VECU *)(bg + u); vo += *(const VECU *)(bo + u);
                    }
                    VEC hv = vf_lstm_update(*(const VEC *)(tmp + u) + vi, *(const VEC *)(tmp + H + u) + vf_,
                                            *(const VEC *)(tmp + 2 * H + u) + vg, *(const VEC *)(tmp + 3 * H + u) + vo,
                                            (VEC *)(cc + u));
                    *(VEC *)(hp + u) = hv;
                    *(VECU *)(yo + u) = hv;
                }
                continue;
            }
            if (fast_gru) {
                const REAL *xz = x0 + (long)gp[0] * H, *xr = x0 + (long)gp[1] * H, *xn = x0 + (long)gp[2] * H;
                const REAL *bz = xbd ? xbd + (long)gp[0] * H : NULL, *br = xbd ? xbd + (long)gp[1] * H : NULL;
                const REAL *bn = xbd ? xbd + (long)gp[2] * H : NULL;
                const REAL *bhn = (a->lbr && a->bh) ? (const REAL *)a->bh + (long)d * H : NULL;
                if (rows) f32_gemv_rows(Rd, Gr, H, Hp, gp, hp, tmp);
                else SFX(gemv_packed)(Rp, Gr * H, Hp, hp, tmp);
                REAL *z = acc, *r = acc + Hq;
                for (int u = 0; u < H; u += VL) {
                    VEC vz = *(const VECU *)(xz + u), vr = *(const VECU *)(xr + u);
                    if (bz) { vz += *(const VECU *)(bz + u); vr += *(const VECU *)(br + u); }
                    *(VEC *)(z + u) = vf_sigmoid(*(const VEC *)(tmp + u) + vz);
                    *(VEC *)(r + u) = vf_sigmoid(*(const VEC *)(tmp + H + u) + vr);
                }
                const REAL *tn = tmp + 2 * H;
                if (!a->lbr) {
                    for (int u = 0; u < H; u++) t1[u] = r[u] * hp[u];
                    if (rows) f32_gemv_rows(Rd + (long)gp[2] * H * H, 1, H, H, ident, t1, tmp);
                    else SFX(gemv_packed)(Rnp, H, H, t1, tmp);
                    tn = tmp;
                }
                for (int u = 0; u < H; u += VL) {
                    VEC vx = *(const VECU *)(xn + u);
                    if (bn) vx += *(const VECU *)(bn + u);
                    VEC nv = *(const VEC *)(tn + u);
                    if (a->lbr) {
                        if (bhn) nv += *(const VECU *)(bhn + u);
                        nv *= *(const VEC *)(r + u);
                    }
                    VEC hv = vf_gru_update(*(const VEC *)(hp + u), *(const VEC *)(z + u), vf_tanh(nv + vx));
                    *(VEC *)(hp + u) = hv;
                    *(VECU *)(yo + u) = hv;
                }
                continue;
            }
#endif
            const REAL *x = x0;
            if (xbd || gp[0] != 0 || gp[1] != 1 || gp[2] != 2 || gp[3] != 3) {  /* kernel gate order, + bias */
                for (int q = 0; q < G; q++) {
                    const REAL *xs = x0 + (long)gp[q] * H, *bs = xbd ? xbd + (long)gp[q] * H : NULL;
                    for (int u = 0; u < H; u++) xbuf[q * H + u] = bs ? xs[u] + bs[u] : xs[u];
                }
                x = xbuf;
            }
            /* recurrent term of the gates that do not need r first, plus the projected input */
            if (a->diagonal) {
                for (int q = 0; q < Gr; q++) for (int u = 0; u < H; u++) acc[q * Hq + u] = Rd[(long)gp[q] * H + u] * hp[u];
            } else {
                SFX(gemv_packed)(Rp, Gr * H, Hp, hp, tmp);
                for (int q = 0; q < Gr; q++) memcpy(acc + q * Hq, tmp + (long)q * H, sizeof(REAL) * H);
            }
            if (a->kind == KIND_LSTM) {
                REAL *gi = acc, *gf = acc + Hq, *gg = acc + 2 * Hq, *go = acc + 3 * Hq;
                for (int q = 0; q < 4; q++) for (int u = 0; u < H; u++) acc[q * Hq + u] += x[q * H + u];
                const REAL *P = a->P ? (const REAL *)a->P + (long)d * 3 * H : NULL;
                if (P) for (int u = 0; u < H; u++) { gi[u] += P[u] * cc[u]; gf[u] += P[H + u] * cc[u]; }
                const REAL *lw = a->ln_on ? (const REAL *)a->ln + (long)d * 4 * H : NULL;
                const REAL *lb = (a->ln_on && a->bh) ? (const REAL *)a->bh + (long)d * 4 * H : NULL;  /* source order */
                if (lw) {
                    for (int q = 0; q < 4; q++) {
                        if (q == 3 && P) continue;
                        SFX(layer_norm)(acc + q * Hq, H, lw + q * H, lb ? lb + (long)gp[q] * H : NULL);
                    }
                }
                SFX(clamp)(gi, 3 * Hq + (P ? 0 : Hq), a->clip);
                SFX(activate)(act[0], (REAL)al[0], (REAL)be[0], gi, 2 * Hq);
                if (!P) SFX(activate)(act[0], (REAL)al[0], (REAL)be[0], go, Hq);
                SFX(activate)(act[1], (REAL)al[1], (REAL)be[1], gg, Hq);
                if (a->coupling == COUPLE_INPUT_FORGET) for (int u = 0; u < H; u++) gf[u] = 1 - gi[u];
                else if (a->coupling == COUPLE_CIFG) for (int u = 0; u < H; u++) gi[u] = 1 - gf[u];
                for (int u = 0; u < H; u++) { REAL ig = gi[u] * gg[u]; REAL fc = cc[u] * gf[u]; cc[u] = fc + ig; }
                SFX(clamp)(cc, H, a->cell_clip);
                if (P) {
                    for (int u = 0; u < H; u++) go[u] += P[2 * H + u] * cc[u];
                    if (lw) SFX(layer_norm)(go, H, lw + 3 * H, lb ? lb + (long)gp[3] * H : NULL);
                    SFX(clamp)(go, H, a->clip);
                    SFX(activate)(act[0], (REAL)al[0], (REAL)be[0], go, Hq);
                }
                memcpy(m, cc, sizeof(REAL) * Hq);
                SFX(activate)(act[2], (REAL)al[2], (REAL)be[2], m, Hq);
                for (int u = 0; u < H; u++) m[u] *= go[u];
                if (a->projW) {
                    SFX(gemv)((const REAL *)a->projW + (long)d * Hp * H, Hp, H, m, hn);
                    if (a->projb) { const REAL *pb = (const REAL *)a->projb + (long)d * Hp; for (int u = 0; u < Hp; u++) hn[u] += pb[u]; }
                    SFX(clamp)(hn, Hp, a->proj_clip);
                    memcpy(hp, hn, sizeof(REAL) * Hp);
                } else {
                    memcpy(hp, m, sizeof(REAL) * H);
                }
            } else if (a->kind == KIND_GRU) {
                REAL *z = acc, *r = acc + Hq, *nn = acc + 2 * Hq;
                for (int q = 0; q < 2; q++) for (int u = 0; u < H; u++) acc[q * Hq + u] += x[q * H + u];
                SFX(clamp)(z, 2 * Hq, a->clip);
                SFX(activate)(act[0], (REAL)al[0], (REAL)be[0], z, 2 * Hq);
                if (a->lbr) {
                    if (a->bh) { const REAL *bn = (const REAL *)a->bh + (long)d * H; for (int u = 0; u < H; u++) nn[u] += bn[u]; }
                    for (int u = 0; u < H; u++) nn[u] *= r[u];
                } else {
                    for (int u = 0; u < H; u++) t1[u] = r[u] * hp[u];
                    SFX(gemv_packed)(Rnp, H, H, t1, tmp);
                    memcpy(nn, tmp, sizeof(REAL) * H);
                }
                for (int u = 0; u < H; u++) nn[u] += x[2 * H + u];
                SFX(clamp)(nn, H, a->clip);
                SFX(activate)(act[1], (REAL)al[1], (REAL)be[1], nn, Hq);
                for (int u = 0; u < H; u++) { REAL dlt = hp[u] - nn[u]; dlt *= z[u]; hp[u] = dlt + nn[u]; }
            } else {
                for (int u = 0; u < H; u++) acc[u] += x[u];
                SFX(clamp)(acc, H, a->clip);
                SFX(activate)(act[0], (REAL)al[0], (REAL)be[0], acc, Hq);
                memcpy(hp, acc, sizeof(REAL) * H);
            }
            memcpy(yo, hp, sizeof(REAL) * Hp);
        }
    }
    REAL *h_out = (REAL *)a->h + (long)d * B * Hp;
    REAL *c_out = a->kind == KIND_LSTM ? (REAL *)a->c + (long)d * B * H : NULL;
    for (long r = 0; r < B; r++) {
        memcpy(h_out + r * Hp, hs + r * Hpq, sizeof(REAL) * Hp);
        if (c_out) memcpy(c_out + r * H, cs + r * Hq, sizeof(REAL) * H);
    }
    free(mem);
    return 0;
}

typedef struct { const rnn_args *a; int rc; } SFX(job);

static void SFX(dir_chunk)(void *p, int d, int tid) {
    (void)tid;
    SFX(job) *j = (SFX(job) *)p + d;
    j->rc = SFX(run_dir)(j->a, d);
}

/* Runs the chunk; with threads >= 2 a bidirectional call's directions are two chunks of one phase (_pool.h): a
 * helper takes the second where it is running, else the caller runs both. */
int SFX(run)(const rnn_args *a) {
#if FAST
    if (f32_batched_ok(a)) return f32_run_batched(a);
    if (f32_rows_ok(a)) return f32_run_rows(a);
#endif
    SFX(job) j[2] = {{a, 0}, {a, 0}};
    team_t team;
    team_begin(&team, a->D == 2 ? a->threads : 1);
    team_run(&team, SFX(dir_chunk), j, a->D);
    team_end(&team);
    return j[0].rc != 0 || (a->D == 2 && j[1].rc != 0) ? -1 : 0;
}

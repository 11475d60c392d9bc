/* Per-row float32 recurrence for small batches (included by _kernel.c after _batched.h).
 *
 * For the fused LSTM / GRU forms of _batched.h at batch 1 and 2 where the batched path declines: H a multiple of
 * 8 but not of its vector width (AVX-512: 16), or B < batch_min when that is raised. Each step is a dot product
 * per gate row, done on W and R where they lie (no copy or packing per call):
 *
 * - the input projection x_t·Wᵀ is computed here, for blocks of PB steps at a time (each group of 8 W rows is
 *   read once per two input vectors), so no BLAS call and no projection buffer the size of the sequence;
 * - the recurrent product h·Rᵀ reads 8 rows of R per pass over h (one multiply-add chain per row, the eight sums
 *   reduced together at the end), both batch rows of a B = 2 call per pass;
 * - the gate math runs on the 8 units just finished.
 *
 * Threads (_pool.h): each step is a phase of chunks, one per direction and block of hidden units; a chunk computes
 * every gate of its units (the input projection of its units for PB steps at a time, the recurrent products, the
 * gate math), whichever thread claims it. Two phases per step for the GRU with linear_before_reset = 0. When the
 * two directions alone give every thread work (one block each), they run as two pipes (team_pipes): a thread per
 * direction without a phase per step, a late thread's remaining steps taken over by the other.
 */
#if HAVE_GEMV8

#define PB 8     /* steps whose input projection is computed together */
#define NVEC 16  /* vectors per dot_gates call */

/* Least multiply-adds per step and direction (B·G·H·(I + H)) for which its units are split into blocks (a phase
 * costs ~0.05-0.15 µs of synchronisation here; a step of 16K multiply-adds ~0.6 µs); a block has at least half. */
#define ROWS_SPLIT_MIN_MACS (1L << 14)

/* o[q] = Σ_k r[q·K + k]·v[k] for the 8 rows q < 8 (any K): vectors over k < K - K % 8, the rest in order. */
static inline void dot8(const float *r, long K, const float *v, float *o) {
    const long K8 = K & ~7L;
    vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    for (long k = 0; k < K8; k += 8) {
        vf x = *(const vfu *)(v + k);
        a0 += *(const vfu *)(r + k) * x; a1 += *(const vfu *)(r + K + k) * x;
        a2 += *(const vfu *)(r + 2 * K + k) * x; a3 += *(const vfu *)(r + 3 * K + k) * x;
        a4 += *(const vfu *)(r + 4 * K + k) * x; a5 += *(const vfu *)(r + 5 * K + k) * x;
        a6 += *(const vfu *)(r + 6 * K + k) * x; a7 += *(const vfu *)(r + 7 * K + k) * x;
    }
    _mm256_storeu_ps(o, red8(a0, a1, a2, a3, a4, a5, a6, a7));
    for (long k = K8; k < K; k++)
        for (int q = 0; q < 8; q++) o[q] += r[q * K + k] * v[k];
}

/* dot8 for two vectors at once (each row loaded once for both). */
static inline void dot8x2(const float *r, long K, const float *v, const float *w, float *o, float *p) {
    const long K8 = K & ~7L;
    vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    vf b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0}, b4 = {0}, b5 = {0}, b6 = {0}, b7 = {0};
    for (long k = 0; k < K8; k += 8) {
        vf x = *(const vfu *)(v + k), y = *(const vfu *)(w + k), t;
        t = *(const vfu *)(r + k); a0 += t * x; b0 += t * y;
        t = *(const vfu *)(r + K + k); a1 += t * x; b1 += t * y;
        t = *(const vfu *)(r + 2 * K + k); a2 += t * x; b2 += t * y;
        t = *(const vfu *)(r + 3 * K + k); a3 += t * x; b3 += t * y;
        t = *(const vfu *)(r + 4 * K + k); a4 += t * x; b4 += t * y;
        t = *(const vfu *)(r + 5 * K + k); a5 += t * x; b5 += t * y;
        t = *(const vfu *)(r + 6 * K + k); a6 += t * x; b6 += t * y;
        t = *(const vfu *)(r + 7 * K + k); a7 += t * x; b7 += t * y;
    }
    _mm256_storeu_ps(o, red8(a0, a1, a2, a3, a4, a5, a6, a7));
    _mm256_storeu_ps(p, red8(b0, b1, b2, b3, b4, b5, b6, b7));
    for (long k = K8; k < K; k++)
        for (int q = 0; q < 8; q++) { o[q] += r[q * K + k] * v[k]; p[q] += r[q * K + k] * w[k]; }
}

/* out[i][q·nu + u - u0] = Σ_k M[src(q) + u][k]·vec[i][k] for the ng gates q (source block of gate q: perm[q0 + q]),
 * own units u0 <= u < u0 + nu, n vectors of length K (M row-major, row stride K). */
static inline __attribute__((always_inline)) void dot_gates_(const float *M, long K, int H, const int32_t *perm,
                                                            int q0, int ng, int u0, int nu, const float *const *vec,
                                                            float *const *out, int n, const int k8) {
    for (int q = 0; q < ng; q++) {
        for (int u = 0; u < nu; u += 8) {
            const float *r = M + ((long)perm[q0 + q] * H + u0 + u) * K;
            const long o = (long)q * nu + u;
            int i = 0;
            if (k8 && n == 1) { f32_gemv8(r, K, vec[0], out[0] + o); continue; }
            for (; i + 2 <= n; i += 2) dot8x2(r, K, vec[i], vec[i + 1], out[i] + o, out[i + 1] + o);
            if (i < n) {
                if (k8) f32_gemv8(r, K, vec[i], out[i] + o);
                else dot8(r, K, vec[i], out[i] + o);
            }
        }
    }
}

/* dot_gates_ for K % 8 == 0 (the recurrent products: H is a multiple of 8) and for any K (the input projection) */
static void dot_gates8(const float *M, long K, int H, const int32_t *perm, int q0, int ng, int u0, int nu,
                       const float *const *vec, float *const *out, int n) {
    dot_gates_(M, K, H, perm, q0, ng, u0, nu, vec, out, n, 1);
}
static void dot_gates(const float *M, long K, int H, const int32_t *perm, int q0, int ng, int u0, int nu,
                      const float *const *vec, float *const *out, int n) {
    dot_gates_(M, K, H, perm, q0, ng, u0, nu, vec, out, n, 0);
}

#define ROWS_MAX_UB 64  /* unit blocks per direction */

/* One call on the per-row path: chunk i of a phase is unit block i % nub of direction i / nub. */
typedef struct {
    const rnn_args *a;
    int form[2], nub, numax, s, pass;
    int ub[ROWS_MAX_UB + 1];  /* unit block b: units [ub[b], ub[b + 1]) (multiples of VF) */
    float *hb[2];       /* [2][B][H] hidden state of direction d, double-buffered */
    float *cb[2];       /* LSTM: [B][H] cell state (each chunk owns its units) */
    float *zb[2], *rh[2];  /* GRU form 3: [B][H] z and r ⊙ h */
    float *xq[2];       /* [PB][B][G·H]: unit block b's projected input of the next PB steps at PB·B·G·ub[b] */
    float *tmp;         /* per thread: [B][G·numax] recurrent terms, thread tid at tid·B·G·numax */
} rctx;

#define ROWS_MAX_B 2  /* most rows the per-row path takes by default (more only below a raised batch_min) */

/* Which fused form direction d takes on the per-row path (1 LSTM, 2 GRU lbr, 3 GRU), 0 for none. The caller
 * (f32_run, driver._template) asks the batched path first. */
static int rows_form(const rnn_args *a, int d) {
    if (!a->x || !a->W || (a->B >= a->batch_min && a->B > ROWS_MAX_B) || a->H % VF != 0) return 0;
    return fused_form(a, d);
}

/* Step s, pass `pass`, of unit block blk of direction d (the input projection of the next PB steps first
 * where the step starts a block of PB). */
static void rows_part(const rctx *c, int d, int blk, int s, int pass, int tid) {
    const rnn_args *a = c->a;
    const int B = a->B, H = a->H, I = a->I, G = a->G, GH = G * H, form = c->form[d], D = a->D;
    const int u0 = c->ub[blk], nu = c->ub[blk + 1] - u0, Gn = G * nu;
    const int32_t *gp = a->gperm;
    static const int32_t cand[1] = {0};
    const float *Wd = (const float *)a->W + (long)d * GH * I, *Rd = (const float *)a->R + (long)d * GH * H;
    const float *Rn = Rd + (long)gp[2] * H * H;  /* GRU candidate rows */
    const float *xbd = a->xb ? (const float *)a->xb + (long)d * GH : NULL;
    const float *bhn = (form == 2 && a->bh) ? (const float *)a->bh + (long)d * H : NULL;
    const float *xin = (const float *)a->x;
    float *Y = (float *)a->Y;
    const long BH = (long)B * H;
    const int nsteps = a->s1 - a->s0, k = (s - a->s0) % PB;
    float *hcur = c->hb[d] + BH * ((s - a->s0 + nsteps) & 1), *hnext = c->hb[d] + BH * ((s - a->s0 + nsteps + 1) & 1);
    float *xqb = c->xq[d] + (long)PB * B * G * u0, *tmpb = c->tmp + (long)tid * B * G * c->numax;
    float *cb = c->cb[d], *zb = c->zb[d], *rh = c->rh[d];
    const int rev = a->reverse[d];
    const float *vec[NVEC];
    float *out[NVEC];
    if (k == 0 && pass == 0) {  /* input projection of steps s .. s + PB - 1, every row still running */
        const int nb = a->s1 - s < PB ? a->s1 - s : PB;
        int n = 0;
        for (int i = 0; i < nb; i++)
            for (int b = 0; b < B; b++) {
                const long len = a->lens ? a->lens[b] : a->T;
                if (s + i >= len) continue;
                const long t = rev ? len - 1 - (s + i) : s + i;
                vec[n] = xin + (t * B + b) * (long)I;
                out[n] = xqb + ((long)i * B + b) * Gn;
                if (++n == NVEC) { dot_gates(Wd, I, H, gp, 0, G, u0, nu, vec, out, n); n = 0; }
            }
        if (n) dot_gates(Wd, I, H, gp, 0, G, u0, nu, vec, out, n);
    }
    const int passes = form == 3 ? 2 : 1;
    /* recurrent products of this pass for every running row */
    const float *M = pass ? Rn : Rd;
    const int32_t *perm = pass ? cand : gp;
    const int ng = pass ? 1 : (form == 3 ? 2 : G);
    int n = 0;
    for (int b = 0; b < B; b++) {
        const long len = a->lens ? a->lens[b] : a->T;
        if (s >= len) continue;
        vec[n] = (pass ? rh : hcur) + (long)b * H;
        out[n] = tmpb + (long)b * Gn;
        if (++n == NVEC) { dot_gates8(M, H, H, perm, 0, ng, u0, nu, vec, out, n); n = 0; }
    }
    if (n) dot_gates8(M, H, H, perm, 0, ng, u0, nu, vec, out, n);
    for (int b = 0; b < B; b++) {
        const long len = a->lens ? a->lens[b] : a->T;
        float *ho = hcur + (long)b * H + u0, *hn = hnext + (long)b * H + u0;
        if (s >= len) {
            if (pass == passes - 1) memcpy(hn, ho, sizeof(float) * nu);
            continue;
        }
        const long t = rev ? len - 1 - s : s;
        float *yo = Y + ((t * D + d) * (long)B + b) * H + u0;
        const float *xq = xqb + ((long)k * B + b) * Gn, *tm = tmpb + (long)b * Gn;
        for (int u = 0; u < nu; u += VF) {
            const long ug = u0 + u;
            if (form == 1) {
                float *cc = cb + (long)b * H + ug;
                vf vi = *(const vfu *)(xq + u), vf_ = *(const vfu *)(xq + nu + u);
                vf vg = *(const vfu *)(xq + 2 * nu + u), vo = *(const vfu *)(xq + 3 * nu + u);
                if (xbd) {
                    vi += *(const vfu *)(xbd + (long)gp[0] * H + ug); vf_ += *(const vfu *)(xbd + (long)gp[1] * H + ug);
                    vg += *(const vfu *)(xbd + (long)gp[2] * H + ug); vo += *(const vfu *)(xbd + (long)gp[3] * H + ug);
                }
                vf c = *(const vfu *)cc;
                vf hv = vf_lstm_update(*(const vfu *)(tm + u) + vi, *(const vfu *)(tm + nu + u) + vf_,
                                       *(const vfu *)(tm + 2 * nu + u) + vg, *(const vfu *)(tm + 3 * nu + u) + vo, &c);
                *(vfu *)cc = c;
                *(vfu *)(hn + u) = hv;
                *(vfu *)(yo + u) = hv;
            } else if (!pass) {
                vf vz = *(const vfu *)(xq + u), vr = *(const vfu *)(xq + nu + u);
                if (xbd) { vz += *(const vfu *)(xbd + (long)gp[0] * H + ug); vr += *(const vfu *)(xbd + (long)gp[1] * H + ug); }
                vf z = vf_sigmoid(*(const vfu *)(tm + u) + vz);
                vf r = vf_sigmoid(*(const vfu *)(tm + nu + u) + vr);
                vf hv = *(const vfu *)(ho + u);
                if (form == 3) {  /* pass 1 of 2: keep z and r ⊙ h */
                    *(vfu *)(zb + (long)b * H + ug) = z;
                    *(vfu *)(rh + (long)b * H + ug) = r * hv;
                    continue;
                }
                vf vx = *(const vfu *)(xq + 2 * nu + u);
                if (xbd) vx += *(const vfu *)(xbd + (long)gp[2] * H + ug);
                vf nv = *(const vfu *)(tm + 2 * nu + u);
                if (bhn) nv += *(const vfu *)(bhn + ug);
                nv *= r;
                hv = vf_gru_update(hv, z, vf_tanh(nv + vx));
                *(vfu *)(hn + u) = hv;
                *(vfu *)(yo + u) = hv;
            } else {  /* GRU pass 2: tanh(x·Wnᵀ + b + (r ⊙ h)·Rnᵀ) */
                vf vx = *(const vfu *)(xq + 2 * nu + u);
                if (xbd) vx += *(const vfu *)(xbd + (long)gp[2] * H + ug);
                vf hv = vf_gru_update(*(const vfu *)(ho + u), *(const vfu *)(zb + (long)b * H + ug),
                                      vf_tanh(*(const vfu *)(tm + u) + vx));
                *(vfu *)(hn + u) = hv;
                *(vfu *)(yo + u) = hv;
            }
        }
    }
}

/* Phase chunk i: unit block i % nub of direction i / nub, at step c->s, pass c->pass. */
static void rows_chunk(void *p, int chunk, int tid) {
    const rctx *c = (const rctx *)p;
    rows_part(c, chunk / c->nub, chunk % c->nub, c->s, c->pass, tid);
}

/* Pipe d, step k: every pass of step s0 + k of direction d (one unit block). */
static void rows_pipe_step(void *p, int d, int k, int tid) {
    const rctx *c = (const rctx *)p;
    for (int pass = 0; pass < (c->form[d] == 3 ? 2 : 1); pass++) rows_part(c, d, 0, c->a->s0 + k, pass, tid);
}

/* 1 when every direction of this call takes the per-row fused path. */
int f32_rows_ok(const rnn_args *a) {
    for (int d = 0; d < a->D; d++)
        if (!rows_form(a, d)) return 0;
    return 1;
}

/* Unit blocks per direction for a call of nth threads: one when the directions alone give every thread a chunk
 * or the step is too small to share, else about one per thread with at least ROWS_SPLIT_MIN_MACS / 2
 * multiply-adds each. Depends only on the shapes and nth (never on which thread runs what). */
static int rows_blocks(const rnn_args *a, int nth) {
    const int D = a->D, nv = a->H / VF;
    if (nth < 2 || D >= nth) return 1;
    const long macs = (long)a->B * a->G * a->H * (a->H + a->I);
    if (macs < ROWS_SPLIT_MIN_MACS) return 1;
    long nub = (nth + D - 1) / D, cap = macs / (ROWS_SPLIT_MIN_MACS / 2);
    if (nub > cap) nub = cap;
    if (nub > nv) nub = nv;
    if (nub > ROWS_MAX_UB) nub = ROWS_MAX_UB;
    return nub < 1 ? 1 : (int)nub;
}

/* Steps [s0, s1) of every direction; 0, or -1 when memory cannot be allocated. */
static int f32_run_rows(const rnn_args *a) {
    const int B = a->B, H = a->H, D = a->D, G = a->G;
    team_t team;
    team_begin(&team, a->D * rows_blocks(a, a->threads) >= 2 ? a->threads : 1);
    rctx c;
    c.a = a;
    c.nub = rows_blocks(a, team.nth);
    const int nv = H / VF;
    c.numax = 0;
    for (int b = 0; b <= c.nub; b++) c.ub[b] = (int)((long)nv * b / c.nub) * VF;
    for (int b = 0; b < c.nub; b++)
        if (c.ub[b + 1] - c.ub[b] > c.numax) c.numax = c.ub[b + 1] - c.ub[b];
    const long shared = 2L * B * H + 3L * B * H + (long)PB * B * G * H, priv = (long)B * G * c.numax;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, (size_t)(D * shared + team.nth * priv) * sizeof(float)) != 0) {
        team_end(&team);
        return -1;
    }
    float *w = (float *)mem;
    const int nsteps = a->s1 - a->s0;
    for (int d = 0; d < D; d++) {
        float *hb = w + d * shared;
        c.form[d] = rows_form(a, d);
        c.hb[d] = hb;
        c.cb[d] = hb + 2L * B * H;
        c.zb[d] = hb + 3L * B * H;
        c.rh[d] = hb + 4L * B * H;
        c.xq[d] = hb + 5L * B * H;
        memcpy(nsteps & 1 ? hb + (long)B * H : hb, (const float *)a->h + (long)d * B * H, sizeof(float) * B * H);
        if (a->kind == KIND_LSTM) memcpy(c.cb[d], (const float *)a->c + (long)d * B * H, sizeof(float) * B * H);
        else memset(c.zb[d], 0, sizeof(float) * 2 * B * H);
    }
    c.tmp = w + D * shared;
    const int passes = c.form[0] == 3 ? 2 : 1;  /* both directions have the same form (kind and options) */
    if (D == 2 && c.nub == 1 && team.nth >= 2) {  /* a direction per thread, a late thread's steps taken over */
        team_pipes(&team, rows_pipe_step, &c, 2, a->s1 - a->s0);
    } else {
        for (int s = a->s0; s < a->s1; s++)
            for (int pass = 0; pass < passes; pass++) {
                c.s = s;
                c.pass = pass;
                team_run(&team, rows_chunk, &c, D * c.nub);
            }
    }
    team_end(&team);
    for (int d = 0; d < D; d++) {
        const float *hb = w + d * shared;
        memcpy((float *)a->h + (long)d * B * H, hb, sizeof(float) * B * H);
        if (a->kind == KIND_LSTM) memcpy((float *)a->c + (long)d * B * H, hb + 2L * B * H, sizeof(float) * B * H);
    }
    free(mem);
    return 0;
}

#else
int f32_rows_ok(const rnn_args *a) { (void)a; return 0; }
static int f32_run_rows(const rnn_args *a) { (void)a; return -1; }
#endif

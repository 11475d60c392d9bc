/* Batched float32 recurrence (included by _kernel.c after the float32 instantiation of _kernel_body.h).
 *
 * For the fused LSTM / GRU options (the FAST subset of run_dir) and B >= BATCH_MIN rows, every step is one
 * register-blocked GEMM h[B, Hp] · Rᵀ with the gate math done on each tile as soon as it is complete:
 *
 * - R is packed once per call (first chunk) into panels of VW output units (one vector) of NG gates:
 *   panel p holds, for k = 0 .. Hp-1, the NG·VW values R[gate q, unit p·VW + w][k] contiguously, so one
 *   k step of the micro-kernel loads NG aligned vectors and broadcasts one h value per row;
 * - the micro-kernel keeps an MR x NG tile of vector accumulators in registers (MR·NG <= 24 with AVX-512's 32
 *   registers, <= 12 with AVX2's 16), k ascending, one multiply-add chain per output;
 * - the tile (all gates of VW units of MR rows) goes through the gate math at once and the new h, c and Y are
 *   written; h is double-buffered (the other panels of the step still read the old h).
 *
 * GRU with linear_before_reset = 0 needs r before its candidate product: pass 1 runs panels of (z, r) and
 * stores z and r ⊙ h, pass 2 runs panels of the candidate rows on r ⊙ h. A unidirectional call may split the
 * panels between two threads (a spinning barrier per pass); a bidirectional one runs a direction per thread.
 * VW is 16 with AVX-512 (-march=native on such a CPU), 8 otherwise (AVX2/FMA, or GCC's generic vectors).
 */
#if defined(__AVX512F__)
typedef float vw __attribute__((vector_size(64)));
#define VW 16
#define ACC_REGS 24
#else
typedef float vw __attribute__((vector_size(32)));
#define VW 8
#define ACC_REGS 12
#endif
#define MR_CAP 8

static inline int mr_for(int ng) { int m = ACC_REGS / ng; return m > MR_CAP ? MR_CAP : m; }

/* out[r·4·VW + q·VW + w] = Σ_{k<K1} pan[k][q·VW + w]·x[r·xs + k] + Σ_{k<K2} pan[K1 + k][q·VW + w]·h[r·hs + k] for
 * r < mr, q < ng (constants at each call site), k ascending. stash: slot 2's input part goes to slot 3 instead
 * (the GRU linear_before_reset candidate keeps x·Wnᵀ and h·Rnᵀ apart). */
static inline __attribute__((always_inline)) void mk_tile(const float *restrict pan, int K1, const float *restrict x,
                                                          long xs, int K2, const float *restrict h, long hs,
                                                          const int mr, const int ng, int stash, float *restrict out) {
    vw acc[MR_CAP][4];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < ng; q++) acc[r][q] = (vw){0};
    for (int part = 0; part < 2; part++) {
        const float *src = part ? h : x;
        const long ss = part ? hs : xs;
        const int K = part ? K2 : K1;
        const vw *p = (const vw *)(pan + (part ? (long)K1 * ng * VW : 0));
        for (int k = 0; k < K; k++, p += ng) {
            vw b[4];
#pragma GCC unroll 4
            for (int q = 0; q < ng; q++) b[q] = p[q];
#pragma GCC unroll 8
            for (int r = 0; r < mr; r++) {
                vw hv = (vw){0} + src[r * ss + k];
#pragma GCC unroll 4
                for (int q = 0; q < ng; q++) acc[r][q] += b[q] * hv;
            }
        }
        if (!part && stash && ng >= 3) {
#pragma GCC unroll 8
            for (int r = 0; r < mr; r++) { *(vw *)(out + (r * 4 + 3) * VW) = acc[r][2]; acc[r][2] = (vw){0}; }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < ng; q++) *(vw *)(out + (r * 4 + q) * VW) = acc[r][q];
}

#define MK_ARGS pan, K1, x, xs, K2, h, hs
#define MK_CASES(NG)                                                                                      \
    switch (mr) {                                                                                         \
    case 1: mk_tile(MK_ARGS, 1, NG, stash, out); return;                                                  \
    case 2: mk_tile(MK_ARGS, 2, NG, stash, out); return;                                                  \
    case 3: mk_tile(MK_ARGS, 3, NG, stash, out); return;                                                  \
    case 4: mk_tile(MK_ARGS, 4, NG, stash, out); return;                                                  \
    case 5: mk_tile(MK_ARGS, 5, NG, stash, out); return;                                                  \
    case 6: mk_tile(MK_ARGS, 6, NG, stash, out); return;                                                  \
    case 7: mk_tile(MK_ARGS, 7, NG, stash, out); return;                                                  \
    default: mk_tile(MK_ARGS, 8, NG, stash, out); return;                                                 \
    }

static void mk_dispatch(const float *pan, int K1, const float *x, long xs, int K2, const float *h, long hs, int mr,
                        int ng, int stash, float *out) {
    switch (ng) {
    case 1: MK_CASES(1)
    case 2: MK_CASES(2)
    case 3: MK_CASES(3)
    default: MK_CASES(4)
    }
}

/* [W | R] rows of the kernel gates q0 .. q0+ng-1 (kernel gate q is source block perm[q]) -> panels p0 .. p1-1:
 * P[p][k][q·VW + w], k < I from W [G·H, I], then k < I + H from R [G·H, H]. */
static void pack_panels(const float *W, const float *R, int I, int H, const int32_t *perm, int q0, int ng, int p0,
                        int p1, float *P) {
    const long KK = (long)I + H;
    for (int p = p0; p < p1; p++) {
        float *dst = P + (long)p * ng * VW * KK;
        for (long k0 = 0; k0 < KK; k0 += 16) {  /* 16 k x ng·VW tiles: source and destination lines stay in L1 */
            const long k1 = KK - k0 < 16 ? KK : k0 + 16;
            for (int q = 0; q < ng; q++) {
                const long row0 = (long)perm[q0 + q] * H + (long)p * VW;
                for (int w = 0; w < VW; w++) {
                    const float *wr = W + (row0 + w) * I, *rr = R + (row0 + w) * H - I;
                    float *o = dst + q * VW + w;
                    for (long k = k0; k < k1; k++) o[k * ng * VW] = k < I ? wr[k] : rr[k];
                }
            }
        }
    }
}

typedef struct {
    const rnn_args *a;
    int d, tid, nth;
    bar_t *bar;
    float *hbuf, *cbuf, *zbuf, *rh;  /* shared work of direction d */
    float *xg;                       /* [B, I] gathered x rows (reverse with lens), private to the job */
} bjob;

/* Which fused form direction d of the call has (1 LSTM, 2 GRU lbr, 3 GRU with r before the candidate product;
 * 0: none): float32 x and W given, sigmoid / tanh activations, no peepholes, projection, layer norm, clips or
 * coupling, full R. */
static int fused_form(const rnn_args *a, int d) {
    if (!a->x || !a->W || a->diagonal || a->clip >= 0) return 0;
    const int *act = a->act + 3 * d;
    if (a->kind == KIND_LSTM && !a->P && !a->ln_on && !a->projW && a->cell_clip < 0 && a->coupling == COUPLE_NONE
        && a->Hp == a->H && act[0] == ACT_SIGMOID && act[1] == ACT_TANH && act[2] == ACT_TANH)
        return 1;
    if (a->kind == KIND_GRU && act[0] == ACT_SIGMOID && act[1] == ACT_TANH) return a->lbr ? 2 : 3;
    return 0;
}

/* The fused form direction d takes on the batched path (B >= batch_min, H a multiple of VW), 0 for none. */
static int batched_form(const rnn_args *a, int d) {
    if (a->B < a->batch_min || a->H % VW != 0) return 0;
    return fused_form(a, d);
}

/* Part tid of nth of the panels of direction d, all steps [s0, s1) (the input projection is in the tiles). */
static void batched_part(bjob *j) {
    const rnn_args *a = j->a;
    const int d = j->d, B = a->B, H = a->H, I = a->I, GH = a->G * a->H, form = batched_form(a, d);
    const long KK = (long)I + H;
    const int np = H / VW, p0 = np * j->tid / j->nth, p1 = np * (j->tid + 1) / j->nth;
    const int ng = form == 1 ? 4 : form == 2 ? 3 : 2, mr = mr_for(ng), mr2 = mr_for(1);
    const int32_t *gp = a->gperm;
    const float *Wd = (const float *)a->W + (long)d * GH * I, *Rd = (const float *)a->R + (long)d * GH * H;
    float *Pk = (float *)a->Rpk + (long)d * GH * KK;       /* [np][I + H][ng·VW] */
    float *Pn = Pk + (long)ng * H * KK;                     /* form 3: candidate panels [np][I + H][VW] */
    pack_panels(Wd, Rd, I, H, gp, 0, ng, p0, p1, Pk);
    if (form == 3) pack_panels(Wd, Rd, I, H, gp, 2, 1, p0, p1, Pn);
    const float *xbd = a->xb ? (const float *)a->xb + (long)d * GH : NULL;
    const float *bhn = (form == 2 && a->bh) ? (const float *)a->bh + (long)d * H : NULL;
    float *hcur = j->hbuf, *hnext = j->hbuf + (long)B * H, *cs = j->cbuf;
    if ((a->s1 - a->s0) & 1) { float *t = hcur; hcur = hnext; hnext = t; }  /* the leader put h in place */
    const float *xin = (const float *)a->x;
    float *Y = (float *)a->Y;
    const int rev = a->reverse[d], D = a->D;
    const int gather = rev && a->lens;  /* rows at different time indices: their x rows are copied together */
    float *xg = j->xg;
    float tile[MR_CAP * 4 * VW] __attribute__((aligned(64)));
    bar_wait(j->bar, j->nth);  /* every panel packed */
    for (int s = a->s0; s < a->s1; s++) {
        const float *xs;
        if (gather) {
            for (int b = 0; b < B; b++) {
                const long len = a->lens[b];
                if (s < len) memcpy(xg + (long)b * I, xin + ((len - 1 - s) * B + b) * (long)I, sizeof(float) * I);
            }
            xs = xg;
        } else {
            xs = xin + (long)(rev ? a->T - 1 - s : s) * B * I;
        }
        for (int pass = 0; pass < (form == 3 ? 2 : 1); pass++) {
            const int g = pass ? 1 : ng, m = pass ? mr2 : mr;
            for (int p = p0; p < p1; p++) {
                const int u0 = p * VW;
                const float *pan = pass ? Pn + (long)p * VW * KK : Pk + (long)p * ng * VW * KK;
                for (int rb = 0; rb < B; rb += m) {
                    const int mm = B - rb < m ? B - rb : m;
                    mk_dispatch(pan, I, xs + (long)rb * I, I, H, (pass ? j->rh : hcur) + (long)rb * H, H, mm, g,
                                form == 2, tile);
                    for (int r = 0; r < mm; r++) {
                        const int b = rb + r;
                        const long len = a->lens ? a->lens[b] : a->T;
                        float *ho = hcur + (long)b * H + u0, *hn = hnext + (long)b * H + u0;
                        if (s >= len) {
                            if (form != 3 || pass) memcpy(hn, ho, sizeof(float) * VW);
                            continue;
                        }
                        const long t = rev ? len - 1 - s : s;
                        float *yo = Y + ((t * D + d) * (long)B + b) * H + u0;
                        const float *tl = tile + (long)r * 4 * VW;
                        for (int v = 0; v < VW; v += VF) {
                            if (form == 1) {
                                float *cc = cs + (long)b * H + u0;
                                vf vi = *(const vf *)(tl + v), vf_ = *(const vf *)(tl + VW + v);
                                vf vg = *(const vf *)(tl + 2 * VW + v), vo = *(const vf *)(tl + 3 * VW + v);
                                if (xbd) {
                                    const float *bb = xbd + u0 + v;
                                    vi += *(const vfu *)(bb + (long)gp[0] * H); vf_ += *(const vfu *)(bb + (long)gp[1] * H);
                                    vg += *(const vfu *)(bb + (long)gp[2] * H); vo += *(const vfu *)(bb + (long)gp[3] * H);
                                }
                                vi = vf_sigmoid(vi);
                                vf_ = vf_sigmoid(vf_);
                                vg = vf_tanh(vg);
                                vo = vf_sigmoid(vo);
                                vf ig = vi * vg;
                                vf fc = *(const vfu *)(cc + v) * vf_;
                                vf cn = fc + ig;
                                *(vfu *)(cc + v) = cn;
                                vf hv = vf_tanh(cn) * vo;
                                *(vfu *)(hn + v) = hv;
                                *(vfu *)(yo + v) = hv;
                            } else if (!pass) {
                                vf vz = *(const vf *)(tl + v), vr = *(const vf *)(tl + VW + v);
                                if (xbd) {
                                    vz += *(const vfu *)(xbd + u0 + v + (long)gp[0] * H);
                                    vr += *(const vfu *)(xbd + u0 + v + (long)gp[1] * H);
                                }
                                vf z = vf_sigmoid(vz);
                                vf rr = vf_sigmoid(vr);
                                vf hv = *(const vfu *)(ho + v);
                                if (form == 3) {  /* pass 1 of 2: keep z and r ⊙ h */
                                    *(vfu *)(j->zbuf + (long)b * H + u0 + v) = z;
                                    *(vfu *)(j->rh + (long)b * H + u0 + v) = rr * hv;
                                    continue;
                                }
                                vf vx = *(const vf *)(tl + 3 * VW + v);
                                if (xbd) vx += *(const vfu *)(xbd + u0 + v + (long)gp[2] * H);
                                vf nv = *(const vf *)(tl + 2 * VW + v);
                                if (bhn) nv += *(const vfu *)(bhn + u0 + v);
                                nv *= rr;
                                nv = vf_tanh(nv + vx);
                                vf dl = hv - nv;
                                dl *= z;
                                hv = dl + nv;
                                *(vfu *)(hn + v) = hv;
                                *(vfu *)(yo + v) = hv;
                            } else {  /* GRU pass 2: the candidate x·Wnᵀ + (r ⊙ h)·Rnᵀ */
                                vf vx = *(const vf *)(tl + v);
                                if (xbd) vx += *(const vfu *)(xbd + u0 + v + (long)gp[2] * H);
                                vf nv = vf_tanh(vx);
                                vf hv = *(const vfu *)(ho + v);
                                vf dl = hv - nv;
                                dl *= *(const vfu *)(j->zbuf + (long)b * H + u0 + v);
                                hv = dl + nv;
                                *(vfu *)(hn + v) = hv;
                                *(vfu *)(yo + v) = hv;
                            }
                        }
                    }
                }
            }
            bar_wait(j->bar, j->nth);
        }
        float *t = hcur; hcur = hnext; hnext = t;
    }
}

static void batched_main(void *p) { batched_part((bjob *)p); }

/* f32_batched_ok: 1 when every direction of this call takes the batched path. */
int f32_batched_ok(const rnn_args *a) {
    for (int d = 0; d < a->D; d++)
        if (!batched_form(a, d)) return 0;
    return 1;
}

/* Least multiply-adds per step for which a unidirectional call splits its panels over two threads. */
#define SPLIT_MIN_MACS (1L << 20)

/* Steps [s0, s1) of every direction through batched_part; returns 0, or -1 when memory cannot be allocated. */
static int f32_run_batched(const rnn_args *a) {
    const int B = a->B, H = a->H, D = a->D;
    const long per = 2L * B * H + (a->kind == KIND_LSTM ? (long)B * H : 0) + (a->kind == KIND_GRU ? 2L * B * H : 0)
        + 2L * PAD((long)B * a->I, 16);
    void *mem = NULL;
    if (posix_memalign(&mem, 64, (size_t)(D * per) * sizeof(float)) != 0) return -1;
    float *w = (float *)mem;
    bar_t bars[2] = {{0, 0, 0}, {0, 0, 0}};
    bjob jobs[4];
    int nj = 0;
    const int nsteps = a->s1 - a->s0;
    const int split = D == 1 && a->threads >= 2 && (long)B * a->G * H * (H + a->I) >= SPLIT_MIN_MACS && H / VW >= 2;
    for (int d = 0; d < D; d++) {
        float *base = w + d * per;
        float *hb = base, *cb = base + 2L * B * H;
        float *zb = cb + (a->kind == KIND_LSTM ? (long)B * H : 0), *rh = zb + (long)B * H;
        float *hstart = nsteps & 1 ? hb + (long)B * H : hb;  /* so that the final h lands in hb */
        memcpy(hstart, (const float *)a->h + (long)d * B * H, sizeof(float) * B * H);
        if (a->kind == KIND_LSTM) memcpy(cb, (const float *)a->c + (long)d * B * H, sizeof(float) * B * H);
        if (a->kind == KIND_GRU) memset(zb, 0, sizeof(float) * 2 * B * H);
        float *xg = base + per - 2L * PAD((long)B * a->I, 16);
        for (int t = 0; t < (split ? 2 : 1); t++)
            jobs[nj++] = (bjob){a, d, t, split ? 2 : 1, &bars[d], hb, cb, zb, rh, xg + t * PAD((long)B * a->I, 16)};
    }
    const int together = nj == 2 && (split || a->threads >= 2) ? pool_try_begin() : 0;
    if (!together && split) {  /* no second thread: run the panels as one part */
        jobs[0].nth = 1;
        nj = 1;
    }
    if (together) pool_run2(batched_main, &jobs[0], &jobs[1]);
    else for (int i = 0; i < nj; i++) batched_part(&jobs[i]);
    for (int d = 0; d < D; d++) {
        const float *base = w + d * per;
        memcpy((float *)a->h + (long)d * B * H, base, sizeof(float) * B * H);
        if (a->kind == KIND_LSTM) memcpy((float *)a->c + (long)d * B * H, base + 2L * B * H, sizeof(float) * B * H);
    }
    free(mem);
    return 0;
}

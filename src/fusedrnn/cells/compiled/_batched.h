/* Batched float32 recurrence (included by _kernel.c after the float32 instantiation of _kernel_body.h).
 *
 * For the fused LSTM / GRU options (the FAST subset of run_dir) and B >= batch_min rows, every step is one
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
 * Small batches (B < MR, streaming at batch 1-2) have too few rows to share the panels' loads, so three things
 * change there, none of them the arithmetic (each output is the same chain; tested bit for bit against the same
 * rows in a larger batch):
 * - the input part of the chains is computed HOIST_STEPS steps at a time with the steps as tile rows (bt_hoist),
 *   so a step streams only the R part of the panels;
 * - a single row runs two panels per micro-kernel call (mk_pair): 2·NG independent chains instead of NG;
 * - odd steps walk the panels backwards, so the panels the previous step read last are still in L1.
 * Measured at batch 1 on one thread: 0.67 µs per step (LSTM I=40 H=64), 2.3 µs (I=64 H=128), against 1.1 and
 * 3.7 µs on the per-row path (_rows.h) and 0.78 and 2.8 µs in onnxruntime.
 *
 * GRU with linear_before_reset = 0 needs r before its candidate product: pass 1 runs panels of (z, r) and
 * stores z and r ⊙ h, pass 2 runs panels of the candidate rows on r ⊙ h. Threads (_pool.h): packing is a phase
 * of one chunk per panel, every step (pass) a phase of chunks of (direction, row block, panel group), claimed by
 * whichever thread comes first (bt_plan sizes them).
 * VW is 16 with AVX-512 (-march=native on such a CPU), 8 otherwise (AVX2/FMA, or GCC's generic vectors).
 */
#if defined(__AVX512F__)
typedef vz vw;   /* one panel's VW units: the micro-kernel's accumulators and the gate math's vectors */
typedef vzu vwu;
#define VW 16
#define ACC_REGS 24
#define vw_sigmoid vz_sigmoid
#define vw_tanh vz_tanh
#define vw_lstm_update vz_lstm_update
#define vw_gru_update vz_gru_update
#else
typedef vf vw;
typedef vfu vwu;
#define VW 8
#define ACC_REGS 12
#define vw_sigmoid vf_sigmoid
#define vw_tanh vf_tanh
#define vw_lstm_update vf_lstm_update
#define vw_gru_update vf_gru_update
#endif
#define MR_CAP 8

static inline int mr_for(int ng) { int m = ACC_REGS / ng; return m > MR_CAP ? MR_CAP : m; }

/* out[r·4·VW + q·VW + w] = init[r·irs + q·VW + w] + Σ_{k<K1} pan[k][q·VW + w]·x[r·xs + k]
 *                           + Σ_{k<K2} pan[K1 + k][q·VW + w]·h[r·hs + k]
 * for r < mr, q < ng (constants at each call site), k ascending (one multiply-add chain per output); init NULL
 * for 0. stash: slot 2's input part (init and x terms) goes to slot 3 instead (the GRU linear_before_reset
 * candidate keeps x·Wnᵀ and h·Rnᵀ apart). An init holding the x terms of the same chain (K1 = 0 here) gives the
 * same bits as computing them here. */
static inline __attribute__((always_inline)) void mk_tile(const float *restrict pan, int K1, const float *restrict x,
                                                          long xs, int K2, const float *restrict h, long hs,
                                                          const int mr, const int ng, int stash,
                                                          const float *restrict init, long irs,
                                                          float *restrict out) {
    vw acc[MR_CAP][4];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < ng; q++) acc[r][q] = init ? *(const vw *)(init + r * irs + q * VW) : (vw){0};
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
#define MK_TAIL stash, init, irs, out
#define MK_CASES(NG)                                                                                      \
    switch (mr) {                                                                                         \
    case 1: mk_tile(MK_ARGS, 1, NG, MK_TAIL); return;                                                  \
    case 2: mk_tile(MK_ARGS, 2, NG, MK_TAIL); return;                                                  \
    case 3: mk_tile(MK_ARGS, 3, NG, MK_TAIL); return;                                                  \
    case 4: mk_tile(MK_ARGS, 4, NG, MK_TAIL); return;                                                  \
    case 5: mk_tile(MK_ARGS, 5, NG, MK_TAIL); return;                                                  \
    case 6: mk_tile(MK_ARGS, 6, NG, MK_TAIL); return;                                                  \
    case 7: mk_tile(MK_ARGS, 7, NG, MK_TAIL); return;                                                  \
    default: mk_tile(MK_ARGS, 8, NG, MK_TAIL); return;                                                 \
    }

static void mk_dispatch(const float *pan, int K1, const float *x, long xs, int K2, const float *h, long hs, int mr,
                        int ng, int stash, const float *init, long irs, float *out) {
    switch (ng) {
    case 1: MK_CASES(1)
    case 2: MK_CASES(2)
    case 3: MK_CASES(3)
    default: MK_CASES(4)
    }
}

/* mk_tile for one row and two adjacent panels (the second at pan + pst, its init at init + ng·VW):
 * out[e·4·VW + q·VW + w] for panel e < 2.
 * A single row's tile has only ng multiply-add chains, too few to hide their latency; two panels double them.
 * Every output is the same chain as in mk_tile (k ascending), so results do not depend on which of the two ran. */
static inline __attribute__((always_inline)) void mk_pair(const float *restrict pan, long pst, int K1,
                                                          const float *restrict x, int K2, const float *restrict h,
                                                          const int ng, int stash, const float *restrict init,
                                                          float *restrict out) {
    vw acc[2][4];
#pragma GCC unroll 4
    for (int q = 0; q < ng; q++) {
        acc[0][q] = init ? *(const vw *)(init + q * VW) : (vw){0};
        acc[1][q] = init ? *(const vw *)(init + (ng + q) * VW) : (vw){0};
    }
    for (int part = 0; part < 2; part++) {
        const float *src = part ? h : x;
        const int K = part ? K2 : K1;
        const vw *p = (const vw *)(pan + (part ? (long)K1 * ng * VW : 0)), *p2 = (const vw *)((const float *)p + pst);
        for (int k = 0; k < K; k++, p += ng, p2 += ng) {
            vw hv = (vw){0} + src[k];
#pragma GCC unroll 4
            for (int q = 0; q < ng; q++) { acc[0][q] += p[q] * hv; acc[1][q] += p2[q] * hv; }
        }
        if (!part && stash && ng >= 3) {
            for (int e = 0; e < 2; e++) { *(vw *)(out + (e * 4 + 3) * VW) = acc[e][2]; acc[e][2] = (vw){0}; }
        }
    }
#pragma GCC unroll 4
    for (int q = 0; q < ng; q++) { *(vw *)(out + q * VW) = acc[0][q]; *(vw *)(out + (4 + q) * VW) = acc[1][q]; }
}

static void mk_pair_dispatch(const float *pan, long pst, int K1, const float *x, int K2, const float *h, int ng,
                             int stash, const float *init, float *out) {
    switch (ng) {
    case 1: mk_pair(pan, pst, K1, x, K2, h, 1, stash, init, out); return;
    case 2: mk_pair(pan, pst, K1, x, K2, h, 2, stash, init, out); return;
    case 3: mk_pair(pan, pst, K1, x, K2, h, 3, stash, init, out); return;
    default: mk_pair(pan, pst, K1, x, K2, h, 4, stash, init, out); return;
    }
}

#if defined(__AVX__)
/* dst[k·ds + w] = src[w·ss + k] for w, k < 8: one 8x8 tile transposed (unpack pairs, then quads, then halves). */
static inline void transpose8(const float *s, long ss, float *d, long ds) {
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ss), r2 = _mm256_loadu_ps(s + 2 * ss);
    __m256 r3 = _mm256_loadu_ps(s + 3 * ss), r4 = _mm256_loadu_ps(s + 4 * ss), r5 = _mm256_loadu_ps(s + 5 * ss);
    __m256 r6 = _mm256_loadu_ps(s + 6 * ss), r7 = _mm256_loadu_ps(s + 7 * ss);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3);
    __m256 t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

/* dst[k·ds + w] = M[(row0 + w)·K + k] for w < VW, k < K: VW rows of a row-major matrix, transposed (8x8 tiles
 * where AVX has them; measured 4x faster than an element loop, which made packing a third of a batch-1 call). */
static void pack_rows(const float *M, long K, long row0, float *dst, long ds) {
    long k8 = 0;
#if defined(__AVX__)
    k8 = K & ~7L;
    for (int w0 = 0; w0 < VW; w0 += 8)
        for (long k = 0; k < k8; k += 8) transpose8(M + (row0 + w0) * K + k, K, dst + k * ds + w0, ds);
#endif
    for (int w = 0; w < VW; w++)
        for (long k = k8; k < K; k++) dst[k * ds + w] = M[(row0 + w) * K + k];
}

/* [W | R] rows of the kernel gates q0 .. q0+ng-1 (kernel gate q is source block perm[q]) -> panels p0 .. p1-1:
 * P[p][k][q·VW + w], k < I from W [G·H, I], then k < I + H from R [G·H, H]. */
static void pack_panels(const float *W, const float *R, int I, int H, const int32_t *perm, int q0, int ng, int p0,
                        int p1, float *P) {
    const long KK = (long)I + H, ds = (long)ng * VW;
    for (int p = p0; p < p1; p++) {
        float *dst = P + (long)p * ng * VW * KK;
        for (int q = 0; q < ng; q++) {
            const long row0 = (long)perm[q0 + q] * H + (long)p * VW;
            pack_rows(W, I, row0, dst + q * VW, ds);
            pack_rows(R, H, row0, dst + (long)I * ds + q * VW, ds);
        }
    }
}

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

/* One call on the batched path. A step phase's chunk i is (direction d, row block, panel group), d slowest: the
 * tiles of rows [r0, r1) and panels [p0, p1) of direction d, panel group inner. */
typedef struct {
    const rnn_args *a;
    int form[2], ng, np, nrb, npg, s, pass;
    int rbs;    /* the most rows of a row block (bt_row0) */
    float *hbuf[2], *cbuf[2], *zbuf[2], *rh[2];  /* state of direction d */
    float *xg;  /* per thread: [rbs, I] gathered x rows (reverse with lens), thread tid at tid·xgs */
    long xgs;
    int hoist;       /* small batch: the input part of the chains is computed HOIST_STEPS steps at a time */
    float *xq[2];    /* hoist: [HOIST_STEPS][B][G·H] input part of direction d (layout: bt_hoist) */
} bctx;

#define HOIST_STEPS 16

/* Least multiply-adds per step and direction for which its tiles are split into several chunks; a chunk has at
 * least half. SMALL: where the input part is hoisted (small batches) and a step streams R alone, so that a split
 * halves each core's share of R (S1: LSTM I=64 H=128 at batch 1 in 0.10 ms on two threads against 0.15 ms on one;
 * a phase costs about 0.1-0.2 µs of synchronisation). */
#define SPLIT_MIN_MACS (1L << 20)
#ifndef SPLIT_MIN_MACS_SMALL
#define SPLIT_MIN_MACS_SMALL (1L << 15)
#endif
/* Fewest row tiles of a row block where panel groups could be cut instead (a row tile shares each panel load
 * among its rows; a panel group shares nothing but needs every row's h). */
#ifndef ROW_BLOCK_MIN_TILES
#define ROW_BLOCK_MIN_TILES 4
#endif
/* Rows of a row block: their [x | h] rows (RB·(I + H) floats) take about this many bytes (stays in L2 while the
 * block's panels stream past it). */
#ifndef ROW_BLOCK_BYTES
#define ROW_BLOCK_BYTES (96L << 10)
#endif
/* Packed panels one thread may own and keep in its core's L2 from step to step (half of a 1 MiB L2: the rows and
 * the outputs take the rest); a direction whose [W | R] is larger is cut into panel groups of at most this. */
#ifndef PANEL_GROUP_BYTES
#define PANEL_GROUP_BYTES (512L << 10)
#endif
/* Panels a chunk of several row tiles runs over all its tiles before the next ones (so they are read from L2, not
 * from L3 or memory, once per tile). */
#ifndef PANEL_BLOCK_BYTES
#define PANEL_BLOCK_BYTES (256L << 10)
#endif

/* First row of row block k of c->nrb (k = nrb: B): the rows split evenly at tile (mr) boundaries. */
static inline int bt_row0(const bctx *c, int k, int mr) {
    const int B = c->a->B;
    return k >= c->nrb ? B : (int)((long)B * k / c->nrb / mr * mr);
}

/* Small batches (fewer rows than a tile holds, so W would be streamed from cache every step for one or two rows):
 * the input part Σ_{k<I} W[u][k]·x_t[k] of the rows [r0, r1) and panels [p0, p1) of direction d for the steps
 * s .. s + HOIST_STEPS - 1, as tiles whose rows are steps (W read once per HOIST_STEPS steps). Step s + i of row
 * b goes to xq[d] + (i·B + b)·G·H: pass-0 panel p at + p·ng·VW, form-3 candidate panel p at + np·ng·VW + p·VW.
 * The step's chains then start from these sums (mk_tile's init): the same chains, so the same bits. */
static void bt_hoist(const bctx *c, int d, int r0, int r1, int p0, int p1, int s) {
    const rnn_args *a = c->a;
    const int B = a->B, H = a->H, I = a->I, GH = a->G * H, ng = c->ng, np = c->np, rev = a->reverse[d];
    const long KK = (long)I + H, xs = rev ? -(long)B * I : (long)B * I;  /* x stride from step to step */
    const float *Pk = (const float *)a->Rpk + (long)d * GH * KK, *Pn = Pk + (long)ng * H * KK;
    const float *xin = (const float *)a->x;
    const int n = a->s1 - s < HOIST_STEPS ? a->s1 - s : HOIST_STEPS;
    float tile[MR_CAP * 4 * VW] __attribute__((aligned(64)));
    for (int b = r0; b < r1; b++) {
        const long len = a->lens ? a->lens[b] : a->T;
        const int nb = len - s < n ? (int)(len - s) : n;  /* steps of the block this row still runs */
        const long t0 = rev ? len - 1 - s : s;             /* time index of step s */
        for (int pass = 0; pass < (c->form[d] == 3 ? 2 : 1); pass++) {
            const int g = pass ? 1 : ng, m = mr_for(g);
            for (int p = p0; p < p1; p++) {
                const float *pan = (pass ? Pn : Pk) + (long)p * g * VW * KK;
                const long off = pass ? (long)np * ng * VW + (long)p * VW : (long)p * ng * VW;
                for (int i0 = 0; i0 < nb; i0 += m) {
                    const int mm = nb - i0 < m ? nb - i0 : m;
                    const float *x0 = xin + ((t0 + (rev ? -i0 : i0)) * B + b) * (long)I;
                    mk_dispatch(pan, I, x0, xs, 0, NULL, 0, mm, g, 0, NULL, 0, tile);
                    for (int r = 0; r < mm; r++)
                        memcpy(c->xq[d] + ((long)(i0 + r) * B + b) * GH + off, tile + (long)r * 4 * VW,
                               sizeof(float) * g * VW);
                }
            }
        }
    }
}

/* Panel chunk i = d·np + p: packs panel p of direction d. */
static void bt_pack(void *p, int chunk, int tid) {
    (void)tid;
    const bctx *c = (const bctx *)p;
    const rnn_args *a = c->a;
    const int d = chunk / c->np, pn = chunk % c->np, H = a->H, I = a->I, GH = a->G * a->H, ng = c->ng;
    const long KK = (long)I + H;
    const float *Wd = (const float *)a->W + (long)d * GH * I, *Rd = (const float *)a->R + (long)d * GH * H;
    float *Pk = (float *)a->Rpk + (long)d * GH * KK;
    pack_panels(Wd, Rd, I, H, a->gperm, 0, ng, pn, pn + 1, Pk);
    if (c->form[d] == 3) pack_panels(Wd, Rd, I, H, a->gperm, 2, 1, pn, pn + 1, Pk + (long)ng * H * KK);
}

static void bt_part(const bctx *c, int d, int rbk, int pg, int s, int pass, int tid) {
    const rnn_args *a = c->a;
    const int B = a->B, H = a->H, I = a->I, GH = a->G * a->H, form = c->form[d], ng = c->ng;
    const long KK = (long)I + H, BH = (long)B * H;
    const int p0 = c->np * pg / c->npg, p1 = c->np * (pg + 1) / c->npg;
    const int mr = mr_for(ng), mr2 = mr_for(1);
    const int r0 = bt_row0(c, rbk, mr), r1 = bt_row0(c, rbk + 1, mr);
    const int32_t *gp = a->gperm;
    const float *Pk = (const float *)a->Rpk + (long)d * GH * KK;  /* [np][I + H][ng·VW] */
    const float *Pn = Pk + (long)ng * H * KK;                      /* form 3: candidate panels [np][I + H][VW] */
    const float *xbd = a->xb ? (const float *)a->xb + (long)d * GH : NULL;
    const float *bhn = (form == 2 && a->bh) ? (const float *)a->bh + (long)d * H : NULL;
    const int nsteps = a->s1 - a->s0;
    float *hcur = c->hbuf[d] + BH * ((s - a->s0 + nsteps) & 1), *hnext = c->hbuf[d] + BH * ((s - a->s0 + nsteps + 1) & 1);
    float *cs = c->cbuf[d], *zbuf = c->zbuf[d], *rh = c->rh[d];
    const float *xin = (const float *)a->x;
    float *Y = (float *)a->Y;
    const int rev = a->reverse[d], D = a->D;
    const float *xs;  /* x rows of the block: row b at xs + (b - r0)·I (unused where the input part is hoisted) */
    if (c->hoist && pass == 0 && (s - a->s0) % HOIST_STEPS == 0) bt_hoist(c, d, r0, r1, p0, p1, s);
    const float *xq = c->hoist ? c->xq[d] + (long)((s - a->s0) % HOIST_STEPS) * B * GH : NULL;
    if (xq) {
        xs = xin;
    } else if (rev && a->lens) {  /* rows at different time indices: their x rows are copied together */
        float *xg = c->xg + (long)tid * c->xgs;
        for (int b = r0; b < r1; b++) {
            const long len = a->lens[b];
            if (s < len) memcpy(xg + (long)(b - r0) * I, xin + ((len - 1 - s) * B + b) * (long)I, sizeof(float) * I);
        }
        xs = xg;
    } else {
        xs = xin + ((long)(rev ? a->T - 1 - s : s) * B + r0) * I;
    }
    float tile[MR_CAP * 4 * VW] __attribute__((aligned(64)));
    const int g = pass ? 1 : ng, m = pass ? mr2 : mr;
    /* a chunk of one row tile walks its panels backwards on odd steps: the panels the previous step read last are
     * still in L1 (a batch-1 LSTM with H = 64 has 104 KiB of [W | R], more than L1, streamed every step) */
    const int back = r1 - r0 <= m && ((s - a->s0) & 1);
    const long pst = (long)g * VW * KK;  /* floats per panel */
    /* several row tiles: blocks of PANEL_BLOCK_BYTES of panels, each run over every tile before the next (so a
     * tile reads them from L2); the tiles of block q, tile-major (it = q·ntile + tile) */
    const int ntile = (r1 - r0 + m - 1) / m, pbk = (int)(PANEL_BLOCK_BYTES / (pst * 4));
    const int pb = ntile == 1 ? p1 - p0 : pbk < 1 ? 1 : pbk;
    for (int it = 0; it < (p1 - p0 + pb - 1) / pb * ntile; it++) {
        const int q0 = p0 + it / ntile * pb, q1 = q0 + pb < p1 ? q0 + pb : p1, rb = r0 + it % ntile * m;
        const int mm = r1 - rb < m ? r1 - rb : m;
        const int per = mm == 1 ? 2 : 1;  /* panels per micro-kernel call */
        const int nj = (q1 - q0 + per - 1) / per;
        for (int j = 0; j < nj; j++) {
            const int pj = q0 + (back ? nj - 1 - j : j) * per, ne = pj + per <= q1 ? per : 1;
            const float *pan = (pass ? Pn : Pk) + pj * pst;
            const float *xr = xs + (long)(rb - r0) * I, *hr = (pass ? rh : hcur) + (long)rb * H;
            const float *init = NULL;
            int k1 = I;
            if (xq) {  /* the input part is in xq: the chains start there and run over the R part of the panels */
                init = xq + (long)rb * GH + (pass ? (long)c->np * ng * VW + (long)pj * VW : (long)pj * ng * VW);
                pan += (long)I * g * VW;
                k1 = 0;
            }
            if (ne == 2) mk_pair_dispatch(pan, pst, k1, xr, H, hr, g, form == 2, init, tile);
            else mk_dispatch(pan, k1, xr, I, H, hr, H, mm, g, form == 2, init, GH, tile);
            for (int e = 0; e < ne; e++) {
                const int u0 = (pj + e) * VW;
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
                    const float *tl = tile + (long)(r + e) * 4 * VW;
                    /* the gate math on the VW units of the tile (slots: kernel gates; GRU lbr: slot 3 the
                     * candidate's input part) */
                    const vw *tv = (const vw *)tl;
                    if (form == 1) {
                        float *cc = cs + (long)b * H + u0;
                        vw vi = tv[0], vf_ = tv[1], vg = tv[2], vo = tv[3];
                        if (xbd) {
                            const float *bb = xbd + u0;
                            vi += *(const vwu *)(bb + (long)gp[0] * H); vf_ += *(const vwu *)(bb + (long)gp[1] * H);
                            vg += *(const vwu *)(bb + (long)gp[2] * H); vo += *(const vwu *)(bb + (long)gp[3] * H);
                        }
                        vw c = *(const vwu *)cc;
                        vw hv = vw_lstm_update(vi, vf_, vg, vo, &c);
                        *(vwu *)cc = c;
                        *(vwu *)hn = hv;
                        *(vwu *)yo = hv;
                    } else if (!pass) {
                        vw vz_ = tv[0], vr = tv[1];
                        if (xbd) {
                            vz_ += *(const vwu *)(xbd + u0 + (long)gp[0] * H);
                            vr += *(const vwu *)(xbd + u0 + (long)gp[1] * H);
                        }
                        vw z = vw_sigmoid(vz_);
                        vw rr = vw_sigmoid(vr);
                        vw hv = *(const vwu *)ho;
                        if (form == 3) {  /* pass 1 of 2: keep z and r ⊙ h */
                            *(vwu *)(zbuf + (long)b * H + u0) = z;
                            *(vwu *)(rh + (long)b * H + u0) = rr * hv;
                            continue;
                        }
                        vw vx = tv[3];
                        if (xbd) vx += *(const vwu *)(xbd + u0 + (long)gp[2] * H);
                        vw nv = tv[2];
                        if (bhn) nv += *(const vwu *)(bhn + u0);
                        nv *= rr;
                        hv = vw_gru_update(hv, z, vw_tanh(nv + vx));
                        *(vwu *)hn = hv;
                        *(vwu *)yo = hv;
                    } else {  /* GRU pass 2: the candidate x·Wnᵀ + (r ⊙ h)·Rnᵀ */
                        vw vx = tv[0];
                        if (xbd) vx += *(const vwu *)(xbd + u0 + (long)gp[2] * H);
                        vw hv = vw_gru_update(*(const vwu *)ho, *(const vwu *)(zbuf + (long)b * H + u0), vw_tanh(vx));
                        *(vwu *)hn = hv;
                        *(vwu *)yo = hv;
                    }
                }
            }
        }
    }
}

/* Phase chunk i: (direction, row block, panel group), direction slowest, at step c->s, pass c->pass. */
static void bt_chunk(void *p, int chunk, int tid) {
    const bctx *c = (const bctx *)p;
    const int per = c->nrb * c->npg;
    bt_part(c, chunk / per, chunk % per / c->npg, chunk % c->npg, c->s, c->pass, tid);
}

/* Pipe d, step k: every pass of step s0 + k of direction d (one row block, one panel group). */
static void bt_pipe_step(void *p, int d, int k, int tid) {
    const bctx *c = (const bctx *)p;
    for (int pass = 0; pass < (c->form[d] == 3 ? 2 : 1); pass++) bt_part(c, d, 0, 0, c->a->s0 + k, pass, tid);
}

/* f32_batched_ok: 1 when every direction of this call takes the batched path. */
int f32_batched_ok(const rnn_args *a) {
    for (int d = 0; d < a->D; d++)
        if (!batched_form(a, d)) return 0;
    return 1;
}

/* The smallest divisor of n that is at least lo (n itself when none is smaller). */
static long divisor_at_least(long n, long lo) {
    for (long d = lo < 1 ? 1 : lo; d < n; d++)
        if (n % d == 0) return d;
    return n;
}

/* Chunking of a step for nth threads: c->nrb row blocks times c->npg panel groups per direction.
 * - Threads per direction tpd = ⌈nth / D⌉ (a bidirectional call's directions split the threads), fewer where a
 *   step is too small to share (cap: chunks of at least SPLIT_MIN_MACS / 2).
 * - Panel groups: enough that a group's panels (PANEL_GROUP_BYTES) stay in its thread's L2 from step to step
 *   (the pool gives a thread the same chunks every step), and enough that row blocks keep ROW_BLOCK_MIN_TILES
 *   row tiles each; a divisor of tpd, so that the chunks share out evenly, at most the panels there are.
 * - Row blocks: tpd / npg, times as many as keep a block's [x | h] rows within ROW_BLOCK_BYTES where the batch
 *   is large (so that each thread's rows stay local: large batches split rows, and a thread writes and reads the
 *   same h rows every step).
 * One direction per thread (pipes) where the directions give every thread one and the rows are few. */
static void bt_plan(bctx *c, int nth) {
    const rnn_args *a = c->a;
    const int B = a->B, D = a->D, mr = mr_for(c->ng);
    const long KK = (long)a->I + a->H, macs = (long)B * a->G * a->H * (c->hoist ? a->H : KK);  /* per step */
    c->nrb = 1; c->npg = 1;
    if (nth < 2) return;
    long rbs = ROW_BLOCK_BYTES / (KK * 4);
    rbs = rbs < mr ? mr : rbs / mr * mr;
    /* several L2-sized row blocks: split rows even when directions would do, unless (bidirectional) a direction's
     * weights outweigh its state (G·H·(I+H) > 3·B·H floats: LSTM S3 B=64 H=512): then row blocks would make every
     * thread stream both directions' weights each step, where a direction per thread streams one */
    const int large = B >= 2 * rbs && (D < 2 || 3L * B >= (long)a->G * KK);
    const long cap = macs / ((c->hoist ? SPLIT_MIN_MACS_SMALL : SPLIT_MIN_MACS) / 2);
    if (!large && (D >= nth || cap < 2)) return;  /* a direction per thread (pipes), or too small to share */
    long tpd = (nth + D - 1) / D;  /* chunks per direction so that every thread can take one */
    if (tpd > cap) tpd = cap;
    if (tpd < 1) tpd = 1;
    const long wbytes = (long)a->G * a->H * (c->hoist ? a->H : KK) * 4;  /* a direction's panels, as streamed */
    const long rows_max = B / (ROW_BLOCK_MIN_TILES * (long)mr) < 1 ? 1 : B / (ROW_BLOCK_MIN_TILES * (long)mr);
    long need = (wbytes + PANEL_GROUP_BYTES - 1) / PANEL_GROUP_BYTES, by_rows = (tpd + rows_max - 1) / rows_max;
    long npg = divisor_at_least(tpd, need > by_rows ? need : by_rows);
    if (npg > c->np) npg = c->np;
    long nrb = (tpd + npg - 1) / npg;
    if (large) {  /* as many more row blocks (a multiple of nrb) as keep each one's rows within ROW_BLOCK_BYTES */
        const long fit = (B + rbs - 1) / rbs;
        nrb *= (fit + nrb - 1) / nrb;
    }
    if (nrb > B / mr) nrb = B / mr < 1 ? 1 : B / mr;
    while (D * nrb * npg > POOL_CHUNKS / 2 && nrb > 1) nrb = (nrb + 1) / 2;
    c->nrb = (int)nrb;
    c->npg = (int)npg;
}

/* Steps [s0, s1) of every direction; returns 0, or -1 when memory cannot be allocated. */
static int f32_run_batched(const rnn_args *a) {
    const int B = a->B, H = a->H, D = a->D, I = a->I;
    bctx c;
    c.a = a;
    for (int d = 0; d < D; d++) c.form[d] = batched_form(a, d);
    c.ng = c.form[0] == 1 ? 4 : c.form[0] == 2 ? 3 : 2;
    c.np = H / VW;
    c.hoist = B < mr_for(c.ng);
    team_t team;
    bt_plan(&c, a->threads);
    team_begin(&team, D * c.nrb * c.npg >= 2 ? a->threads : 1);
    bt_plan(&c, team.nth);
    c.rbs = 0;
    for (int k = 0; k < c.nrb; k++) {
        const int mr = mr_for(c.ng), n = bt_row0(&c, k + 1, mr) - bt_row0(&c, k, mr);
        if (n > c.rbs) c.rbs = n;
    }
    const long per = 2L * B * H + (a->kind == KIND_LSTM ? (long)B * H : 0) + (a->kind == KIND_GRU ? 2L * B * H : 0);
    const long xgn = PAD((long)c.rbs * I, 16);
    const long xqn = c.hoist ? (long)HOIST_STEPS * B * a->G * H : 0;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, (size_t)(D * (per + xqn) + team.nth * xgn) * sizeof(float)) != 0) {
        team_end(&team);
        return -1;
    }
    float *w = (float *)mem;
    const int nsteps = a->s1 - a->s0;
    for (int d = 0; d < D; d++) {
        float *base = w + d * per;
        float *hb = base, *cb = base + 2L * B * H;
        float *zb = cb + (a->kind == KIND_LSTM ? (long)B * H : 0), *rh = zb + (long)B * H;
        c.hbuf[d] = hb; c.cbuf[d] = cb; c.zbuf[d] = zb; c.rh[d] = rh;
        float *hstart = nsteps & 1 ? hb + (long)B * H : hb;  /* so that the final h lands in hb */
        memcpy(hstart, (const float *)a->h + (long)d * B * H, sizeof(float) * B * H);
        if (a->kind == KIND_LSTM) memcpy(cb, (const float *)a->c + (long)d * B * H, sizeof(float) * B * H);
        if (a->kind == KIND_GRU) memset(zb, 0, sizeof(float) * 2 * B * H);
    }
    for (int d = 0; d < D; d++) c.xq[d] = w + D * per + d * xqn;
    c.xg = w + D * (per + xqn);
    c.xgs = xgn;
    if (!a->prepacked) team_run(&team, bt_pack, &c, D * c.np);
    const int passes = c.form[0] == 3 ? 2 : 1;  /* both directions have the same form (kind and options) */
    if (D == 2 && c.nrb * c.npg == 1 && team.nth >= 2) {  /* a direction per thread, a late one's steps taken over */
        team_pipes(&team, bt_pipe_step, &c, 2, a->s1 - a->s0);
    } else {
        for (int s = a->s0; s < a->s1; s++)
            for (int pass = 0; pass < passes; pass++) {
                c.s = s;
                c.pass = pass;
                team_run(&team, bt_chunk, &c, D * c.nrb * c.npg);
            }
    }
    team_end(&team);
    for (int d = 0; d < D; d++) {
        const float *base = w + d * per;
        memcpy((float *)a->h + (long)d * B * H, base, sizeof(float) * B * H);
        if (a->kind == KIND_LSTM) memcpy((float *)a->c + (long)d * B * H, base + 2L * B * H, sizeof(float) * B * H);
    }
    free(mem);
    return 0;
}

/* onnxruntime custom operators that run the batched float32 path (_batched.h) inside an onnxruntime session:
 * a model's LSTM / GRU nodes rewritten by fusedrnn.frontends.onnx_native run with no Python per call.
 *
 * The library is registered with SessionOptions.register_custom_ops_library(its own path): onnxruntime opens the
 * file this process already loaded (ctypes), so the plans Python registered (fusedrnn_bridge_add) are the ones the
 * kernels see. A plan holds copies of a node's W, R and summed biases, the _Args template Python made for it
 * (driver.native_plan: options, activations, gate order), and room for the packed [W | R] the first call fills.
 *
 *   Domain ai.fusedrnn.native, opset 1:
 *   LSTM(X [T, B, I] f32, sequence_lens [B] i32?, initial_h [D, B, H] f32?, initial_c [D, B, H] f32?)
 *        -> Y [T, D, B, H], Y_h [D, B, H], Y_c [D, B, H]           attribute plan: the id fusedrnn_bridge_add gave
 *   GRU (X, sequence_lens?, initial_h?) -> Y, Y_h
 *
 * ONNX's semantics with layout 0, as fusedrnn.ops computes them (the same kernel call): Y zero past a row's length,
 * Y_h / Y_c of a row of length 0 zero. Misuse (shapes, lengths, an unknown plan) is an error status naming the
 * input, what was expected and what was given (_ort_api.h). */
#include "_ort_api.h"

typedef struct {
    bridge_head head;
    rnn_args tmpl;              /* every field but the per-call ones (T, B, x, h, c, Y, lens, steps, threads) */
    float *W, *R, *xb, *bh;     /* copies: [D, G·H, I], [D, G·H, H], [D, G·H] or NULL, [D, H] or NULL */
    float *Rpk;                 /* the packed [W | R], filled by the first call that runs steps */
    void *mem;
    long max_rows;              /* the most D·B rows the other routes give this kernel (driver.BATCHED_MAX_ROWS) */
    int packed;                 /* atomic: Rpk holds the packed weights */
    pthread_mutex_t pack_lock;
} rnn_plan;

static int bridge_threads = 1;           /* threads a call may use (Python's thread setting, per model run) */
static long bridge_min_macs = 1L << 18;  /* below: one thread (driver.THREAD_MIN_MACS) */

static void rnn_plan_release(bridge_head *head) {
    rnn_plan *p = (rnn_plan *)head;
    pthread_mutex_destroy(&p->pack_lock);
    free(p->mem);
    free(p);
}

/* A plan from a template of driver._template (batched path, B = 1) and the arrays of driver.native_plan; its id
 * (>= 0), or -1 where the template is not one the bridge runs, -2 without memory or a free slot. A call of more
 * than max_rows rows (D·B) is refused: the other routes run it on the NumPy engine. */
long fusedrnn_bridge_add(const rnn_args *tmpl, const float *W, const float *R, const float *xb, const float *bh,
                         long max_rows) {
    const rnn_args *t = tmpl;
    if ((t->kind != KIND_LSTM && t->kind != KIND_GRU) || t->D < 1 || t->D > 2 || t->H < 1 || t->I < 1
        || t->H > (1 << 16) || t->I > (1 << 20) || t->G != (t->kind == KIND_LSTM ? 4 : 3) || t->Hp != t->H
        || t->P || t->projW || t->projb || t->ln || t->lens || !W || !R || !t->x || !t->W
        || (!t->xb) != (!xb) || (!t->bh) != (!bh) || (bh && t->kind != KIND_GRU) || !f32_batched_ok(t))
        return -1;
    const size_t D = (size_t)t->D, GH = (size_t)t->G * t->H, H = (size_t)t->H, I = (size_t)t->I;
    const size_t nW = D * GH * I, nR = D * GH * H, nxb = xb ? D * GH : 0, nbh = bh ? D * H : 0;
    const size_t off = PAD(nW + nR + nxb + nbh, 16), npk = D * GH * (I + H);  /* Rpk 64-byte aligned */
    rnn_plan *p = calloc(1, sizeof *p);
    if (!p) return -2;
    if (posix_memalign(&p->mem, 64, (off + npk) * sizeof(float)) != 0) {
        free(p);
        return -2;
    }
    float *m = (float *)p->mem;
    p->W = m; memcpy(p->W, W, nW * sizeof(float));
    p->R = m + nW; memcpy(p->R, R, nR * sizeof(float));
    p->xb = xb ? m + nW + nR : NULL;
    if (xb) memcpy(p->xb, xb, nxb * sizeof(float));
    p->bh = bh ? m + nW + nR + nxb : NULL;
    if (bh) memcpy(p->bh, bh, nbh * sizeof(float));
    p->Rpk = m + off;
    p->tmpl = *t;
    p->max_rows = max_rows;
    pthread_mutex_init(&p->pack_lock, NULL);
    p->head.kind = t->kind;
    p->head.release = rnn_plan_release;
    return bridge_register(&p->head);
}

void fusedrnn_bridge_drop(long id) { bridge_drop(id); }

/* Plans in memory: registered ones, and dropped ones a kernel still holds (tests check that models free theirs). */
int fusedrnn_bridge_live(void) { return bridge_count(); }

/* Threads a kernel call may use from now on (the caller's included), and the least multiply-adds for more than
 * one. */
void fusedrnn_bridge_threads(int n, long min_macs) {
    __atomic_store_n(&bridge_threads, n < 1 ? 1 : n > POOL_MAX ? POOL_MAX : n, __ATOMIC_RELAXED);
    __atomic_store_n(&bridge_min_macs, min_macs, __ATOMIC_RELAXED);
}

/* Nanoseconds the operators' kernels have run, all calls together (Python measures their share of a model run). */
long fusedrnn_bridge_ns(void) { return __atomic_load_n(&bridge_ns, __ATOMIC_RELAXED); }

/* Y, Y_h[, Y_c] = the node on X[, sequence_lens, initial_h, initial_c]: one call of f32_run over every step. */
static OrtStatus *rnn_compute(void *kernel, OrtKernelContext *ctx) {
    const bridge_kernel *k = kernel;
    const void *api = k->api;
    rnn_plan *p = (rnn_plan *)k->plan;
    const rnn_args *t = &p->tmpl;
    const int D = t->D, H = t->H, lstm = t->kind == KIND_LSTM;
    bridge_tensor in[4];
    int64_t T = 0, B = 0;
    OrtStatus *st = bridge_inputs(api, ctx, k->op->inputs, in);
    if (st || (st = bridge_check(api, in, k->op->inputs, t->I, D, H, &T, &B))) return st;
    if (D * B > p->max_rows)
        return bridge_error(api, "X: %d·%lld rows, more than the kernel takes (%ld): the other routes run it", D,
                            (long long)B, p->max_rows);
    int64_t *lens = NULL;
    long steps = T;
    if (in[1].data) {  /* lengths all T run as none */
        const int32_t *l = in[1].data;
        long most = 0;
        int all = 1;
        for (int64_t b = 0; b < B; b++) {
            most = l[b] > most ? l[b] : most;
            all &= l[b] == T;
        }
        if (!all) {
            if (!(lens = malloc(sizeof(int64_t) * (size_t)B))) return bridge_no_memory(api);
            for (int64_t b = 0; b < B; b++) lens[b] = l[b];
            steps = most;
        }
    }
    const int64_t ydims[4] = {T, D, B, H}, sdims[3] = {D, B, H};
    float *Y = NULL, *Yh = NULL, *Yc = NULL;
    if (!(st = bridge_output(api, ctx, 0, ydims, 4, &Y)) && !(st = bridge_output(api, ctx, 1, sdims, 3, &Yh)) && lstm)
        st = bridge_output(api, ctx, 2, sdims, 3, &Yc);
    if (st) {
        free(lens);
        return st;
    }
    const size_t state = (size_t)D * B * H;
    if (in[2].data) memcpy(Yh, in[2].data, state * sizeof(float)); else memset(Yh, 0, state * sizeof(float));
    if (lstm) {
        if (in[3].data) memcpy(Yc, in[3].data, state * sizeof(float)); else memset(Yc, 0, state * sizeof(float));
    }
    if (lens) memset(Y, 0, (size_t)T * state * sizeof(float));
    rnn_args a = *t;
    a.T = (int32_t)T; a.B = (int32_t)B; a.K = 1; a.s0 = 0; a.s1 = (int32_t)steps;
    a.x = in[0].data; a.W = p->W; a.R = p->R; a.xb = p->xb; a.bh = p->bh; a.Rpk = p->Rpk; a.xp = NULL;
    a.h = Yh; a.c = lstm ? Yc : NULL; a.Y = Y; a.lens = lens;
    a.threads = steps * B * t->G * H * (long)H >= __atomic_load_n(&bridge_min_macs, __ATOMIC_RELAXED)
                ? __atomic_load_n(&bridge_threads, __ATOMIC_RELAXED) : 1;
    const long t0 = bridge_now_ns();
    int rc = 0;
    if (steps) {
        if (__atomic_load_n(&p->packed, __ATOMIC_ACQUIRE)) {
            a.prepacked = 1;
            rc = f32_run(&a);
        } else {  /* the first call packs [W | R] into the plan; a call meanwhile waits for it */
            pthread_mutex_lock(&p->pack_lock);
            a.prepacked = __atomic_load_n(&p->packed, __ATOMIC_RELAXED);
            rc = f32_run(&a);
            if (rc == 0) __atomic_store_n(&p->packed, 1, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&p->pack_lock);
        }
    }
    __atomic_add_fetch(&bridge_ns, bridge_now_ns() - t0, __ATOMIC_RELAXED);
    if (lens) {  /* a row of length 0 ends with zero states, as onnxruntime's */
        for (int d = 0; d < D; d++)
            for (int64_t b = 0; b < B; b++)
                if (lens[b] == 0) {
                    memset(Yh + ((size_t)d * B + b) * H, 0, sizeof(float) * H);
                    if (lstm) memset(Yc + ((size_t)d * B + b) * H, 0, sizeof(float) * H);
                }
        free(lens);
    }
    return rc == 0 ? NULL : bridge_no_memory(api);
}

static const bridge_op rnn_ops[] = {BRIDGE_OP("LSTM", KIND_LSTM, 4, 3, rnn_compute),
                                    BRIDGE_OP("GRU", KIND_GRU, 3, 2, rnn_compute)};

/* onnxruntime's entry point of a custom-op library (SessionOptions.register_custom_ops_library). */
__attribute__((visibility("default"))) OrtStatus *RegisterCustomOps(OrtSessionOptions *options,
                                                                    const OrtApiBase *base) {
    return bridge_register_ops(options, base, "ai.fusedrnn.native", rnn_ops, sizeof rnn_ops / sizeof rnn_ops[0]);
}

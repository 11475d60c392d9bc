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
 * input, what was expected and what was given.
 *
 * onnxruntime's C API, as far as used here: the facts of its ABI (onnxruntime_c_api.h). OrtApi is a table of
 * function pointers that only ever grows at its end, so an entry's index holds in every version from the one it
 * appeared in; OrtCustomOp's fields up to KernelComputeV2 are read by onnxruntime when the op's version is 16 or
 * more (KernelComputeV2 and CreateKernelV2 return a status; version 16 is onnxruntime 1.16). */

#define BRIDGE_ORT_API 16
#define BRIDGE_DOMAIN "ai.fusedrnn.native"
#define BRIDGE_SLOTS 4096    /* plans alive at once; an id is slot + BRIDGE_SLOTS * generation */

typedef struct OrtStatus OrtStatus;
typedef struct OrtValue OrtValue;
typedef struct OrtKernelInfo OrtKernelInfo;
typedef struct OrtKernelContext OrtKernelContext;
typedef struct OrtTensorTypeAndShapeInfo OrtShape;
typedef struct OrtCustomOpDomain OrtCustomOpDomain;
typedef struct OrtSessionOptions OrtSessionOptions;

/* OrtApi entries by index, with their C signatures */
enum { ORT_CreateStatus = 0, ORT_CreateCustomOpDomain = 26, ORT_CustomOpDomain_Add = 27, ORT_AddCustomOpDomain = 28,
       ORT_GetTensorMutableData = 51, ORT_GetDimensionsCount = 61,
       ORT_GetDimensions = 62, ORT_GetTensorTypeAndShape = 65, ORT_KernelInfoGetAttribute_int64 = 86,
       ORT_KernelContext_GetInputCount = 88, ORT_KernelContext_GetInput = 90, ORT_KernelContext_GetOutput = 91,
       ORT_ReleaseStatus = 93, ORT_ReleaseTensorTypeAndShapeInfo = 99 };
typedef OrtStatus *(*ort_create_status)(int code, const char *msg);
typedef OrtStatus *(*ort_create_domain)(const char *domain, OrtCustomOpDomain **out);
typedef OrtStatus *(*ort_domain_add)(OrtCustomOpDomain *domain, const void *op);
typedef OrtStatus *(*ort_add_domain)(OrtSessionOptions *options, OrtCustomOpDomain *domain);
typedef OrtStatus *(*ort_mutable_data)(OrtValue *value, void **out);
typedef OrtStatus *(*ort_dims_count)(const OrtShape *info, size_t *out);
typedef OrtStatus *(*ort_dims)(const OrtShape *info, int64_t *dims, size_t n);
typedef OrtStatus *(*ort_type_and_shape)(const OrtValue *value, OrtShape **out);
typedef OrtStatus *(*ort_attribute_int64)(const OrtKernelInfo *info, const char *name, int64_t *out);
typedef OrtStatus *(*ort_input_count)(const OrtKernelContext *ctx, size_t *out);
typedef OrtStatus *(*ort_input)(const OrtKernelContext *ctx, size_t index, const OrtValue **out);
typedef OrtStatus *(*ort_output)(OrtKernelContext *ctx, size_t index, const int64_t *dims, size_t n, OrtValue **out);
typedef void (*ort_release_status)(OrtStatus *status);
typedef void (*ort_release_shape)(OrtShape *info);
#define ORT_CALL(api, name, type) ((type)((void *const *)(api))[ORT_##name])

enum { ORT_INVALID_ARGUMENT = 2, ORT_RUNTIME_EXCEPTION = 6 };  /* OrtErrorCode */
enum { ELEM_FLOAT = 1, ELEM_INT32 = 6 };                       /* ONNXTensorElementDataType */
enum { IO_REQUIRED = 0, IO_OPTIONAL = 1 };                     /* OrtCustomOpInputOutputCharacteristic */

typedef struct {
    const void *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

typedef struct ort_custom_op ort_custom_op;
struct ort_custom_op {  /* OrtCustomOp up to KernelComputeV2 */
    uint32_t version;
    void *(*CreateKernel)(const ort_custom_op *op, const void *api, const OrtKernelInfo *info);
    const char *(*GetName)(const ort_custom_op *op);
    const char *(*GetExecutionProviderType)(const ort_custom_op *op);
    int (*GetInputType)(const ort_custom_op *op, size_t index);
    size_t (*GetInputTypeCount)(const ort_custom_op *op);
    int (*GetOutputType)(const ort_custom_op *op, size_t index);
    size_t (*GetOutputTypeCount)(const ort_custom_op *op);
    void (*KernelCompute)(void *kernel, OrtKernelContext *ctx);
    void (*KernelDestroy)(void *kernel);
    int (*GetInputCharacteristic)(const ort_custom_op *op, size_t index);
    int (*GetOutputCharacteristic)(const ort_custom_op *op, size_t index);
    int (*GetInputMemoryType)(const ort_custom_op *op, size_t index);
    int (*GetVariadicInputMinArity)(const ort_custom_op *op);
    int (*GetVariadicInputHomogeneity)(const ort_custom_op *op);
    int (*GetVariadicOutputMinArity)(const ort_custom_op *op);
    int (*GetVariadicOutputHomogeneity)(const ort_custom_op *op);
    OrtStatus *(*CreateKernelV2)(const ort_custom_op *op, const void *api, const OrtKernelInfo *info, void **kernel);
    OrtStatus *(*KernelComputeV2)(void *kernel, OrtKernelContext *ctx);
};

/* ---- plans ----------------------------------------------------------------------------------------------------- */
typedef struct {
    rnn_args tmpl;              /* every field but the per-call ones (T, B, x, h, c, Y, lens, steps, threads) */
    float *W, *R, *xb, *bh;     /* copies: [D, G·H, I], [D, G·H, H], [D, G·H] or NULL, [D, H] or NULL */
    float *Rpk;                 /* the packed [W | R], filled by the first call that runs steps */
    void *mem;
    int packed;                 /* atomic: Rpk holds the packed weights */
    int kernels;                /* kernels holding the plan (under bridge_lock) */
    int dropped;                /* Python dropped it: freed with its last kernel */
    pthread_mutex_t pack_lock;
} bridge_plan;

static pthread_mutex_t bridge_lock = PTHREAD_MUTEX_INITIALIZER;
static bridge_plan *bridge_plans[BRIDGE_SLOTS];
static uint32_t bridge_gen[BRIDGE_SLOTS];
static int bridge_threads = 1;           /* threads a call may use (Python's thread setting, per model run) */
static long bridge_min_macs = 1L << 18;  /* below: one thread (driver.THREAD_MIN_MACS) */
static long bridge_ns;                   /* nanoseconds spent in the kernels (atomic) */
static int bridge_live;                  /* plans allocated (under bridge_lock) */

static void bridge_free(bridge_plan *p) {  /* under bridge_lock */
    bridge_live--;
    pthread_mutex_destroy(&p->pack_lock);
    free(p->mem);
    free(p);
}

/* A plan from a template of driver._template (batched path, B = 1) and the arrays of driver.native_plan; its id
 * (>= 0), or -1 where the template is not one the bridge runs, -2 without memory or a free slot. */
long fusedrnn_bridge_add(const rnn_args *tmpl, const float *W, const float *R, const float *xb, const float *bh) {
    const rnn_args *t = tmpl;
    if ((t->kind != KIND_LSTM && t->kind != KIND_GRU) || t->D < 1 || t->D > 2 || t->H < 1 || t->I < 1
        || t->H > (1 << 16) || t->I > (1 << 20) || t->G != (t->kind == KIND_LSTM ? 4 : 3) || t->Hp != t->H
        || t->P || t->projW || t->projb || t->ln || t->lens || !W || !R || !t->x || !t->W
        || (!t->xb) != (!xb) || (!t->bh) != (!bh) || (bh && t->kind != KIND_GRU) || !f32_batched_ok(t))
        return -1;
    const size_t D = (size_t)t->D, GH = (size_t)t->G * t->H, H = (size_t)t->H, I = (size_t)t->I;
    const size_t nW = D * GH * I, nR = D * GH * H, nxb = xb ? D * GH : 0, nbh = bh ? D * H : 0;
    const size_t npk = D * GH * (I + H);
    bridge_plan *p = calloc(1, sizeof *p);
    if (!p) return -2;
    size_t off = PAD(nW + nR + nxb + nbh, 16);  /* Rpk 64-byte aligned after the copies */
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
    pthread_mutex_init(&p->pack_lock, NULL);
    pthread_mutex_lock(&bridge_lock);
    for (long s = 0; s < BRIDGE_SLOTS; s++)
        if (!bridge_plans[s]) {
            bridge_plans[s] = p;
            bridge_live++;
            long id = s + BRIDGE_SLOTS * (long)(++bridge_gen[s] & 0x7ffff);
            pthread_mutex_unlock(&bridge_lock);
            return id;
        }
    bridge_live++;
    bridge_free(p);
    pthread_mutex_unlock(&bridge_lock);
    return -2;
}

/* Python's model is gone: the plan leaves its slot (a session made later cannot use it) and is freed once no
 * kernel holds it. */
void fusedrnn_bridge_drop(long id) {
    if (id < 0) return;
    const long s = id % BRIDGE_SLOTS;
    pthread_mutex_lock(&bridge_lock);
    bridge_plan *p = bridge_plans[s];
    if (p && (bridge_gen[s] & 0x7ffff) == (uint32_t)(id / BRIDGE_SLOTS)) {
        bridge_plans[s] = NULL;
        p->dropped = 1;
        if (p->kernels == 0) bridge_free(p);
    }
    pthread_mutex_unlock(&bridge_lock);
}

/* Threads a kernel call may use from now on (the caller's included), and the least multiply-adds for more than
 * one. */
void fusedrnn_bridge_threads(int n, long min_macs) {
    __atomic_store_n(&bridge_threads, n < 1 ? 1 : n > POOL_MAX ? POOL_MAX : n, __ATOMIC_RELAXED);
    __atomic_store_n(&bridge_min_macs, min_macs, __ATOMIC_RELAXED);
}

/* Plans in memory: registered ones, and dropped ones a kernel still holds (tests check that models free theirs). */
int fusedrnn_bridge_live(void) {
    pthread_mutex_lock(&bridge_lock);
    const int n = bridge_live;
    pthread_mutex_unlock(&bridge_lock);
    return n;
}

/* Nanoseconds the bridge's kernels have run, all calls together (Python measures their share of a model run). */
long fusedrnn_bridge_ns(void) { return __atomic_load_n(&bridge_ns, __ATOMIC_RELAXED); }

/* ---- the operators ------------------------------------------------------------------------------------------------ */
typedef struct {
    ort_custom_op op;
    const char *name;
    int kind;
    size_t inputs, outputs;
} bridge_op;

typedef struct {
    const void *api;
    bridge_plan *plan;
    const bridge_op *op;
} bridge_kernel;

static OrtStatus *bridge_error(const void *api, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static OrtStatus *bridge_error(const void *api, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ORT_CALL(api, CreateStatus, ort_create_status)(ORT_INVALID_ARGUMENT, msg);
}

static const char *bridge_name(const ort_custom_op *op) { return ((const bridge_op *)op)->name; }
static const char *bridge_provider(const ort_custom_op *op) { (void)op; return NULL; }  /* CPU */
static size_t bridge_input_count(const ort_custom_op *op) { return ((const bridge_op *)op)->inputs; }
static size_t bridge_output_count(const ort_custom_op *op) { return ((const bridge_op *)op)->outputs; }
static int bridge_input_type(const ort_custom_op *op, size_t i) { (void)op; return i == 1 ? ELEM_INT32 : ELEM_FLOAT; }
static int bridge_output_type(const ort_custom_op *op, size_t i) { (void)op; (void)i; return ELEM_FLOAT; }
static int bridge_input_kind(const ort_custom_op *op, size_t i) { (void)op; return i ? IO_OPTIONAL : IO_REQUIRED; }
static int bridge_output_kind(const ort_custom_op *op, size_t i) { (void)op; (void)i; return IO_REQUIRED; }
static int bridge_memory(const ort_custom_op *op, size_t i) { (void)op; (void)i; return 0; }  /* OrtMemTypeDefault */
static int bridge_one(const ort_custom_op *op) { (void)op; return 1; }
static void *bridge_create_v1(const ort_custom_op *op, const void *api, const OrtKernelInfo *info) {
    (void)op; (void)api; (void)info;
    return NULL;  /* never called: CreateKernelV2 is set */
}
static void bridge_compute_v1(void *kernel, OrtKernelContext *ctx) { (void)kernel; (void)ctx; }

static OrtStatus *bridge_create(const ort_custom_op *op, const void *api, const OrtKernelInfo *info, void **out) {
    const bridge_op *bop = (const bridge_op *)op;
    int64_t id = -1;
    OrtStatus *st = ORT_CALL(api, KernelInfoGetAttribute_int64, ort_attribute_int64)(info, "plan", &id);
    if (st) return st;
    bridge_plan *p = NULL;
    pthread_mutex_lock(&bridge_lock);
    if (id >= 0) {
        const long s = (long)(id % BRIDGE_SLOTS);
        if (bridge_plans[s] && (bridge_gen[s] & 0x7ffff) == (uint64_t)(id / BRIDGE_SLOTS)
            && bridge_plans[s]->tmpl.kind == bop->kind) {
            p = bridge_plans[s];
            p->kernels++;
        }
    }
    pthread_mutex_unlock(&bridge_lock);
    if (!p) return bridge_error(api, "plan: expected the id of a live fusedrnn %s plan, got %lld", bop->name,
                                (long long)id);
    bridge_kernel *k = malloc(sizeof *k);
    if (!k) {
        pthread_mutex_lock(&bridge_lock);
        if (--p->kernels == 0 && p->dropped) bridge_free(p);
        pthread_mutex_unlock(&bridge_lock);
        return ORT_CALL(api, CreateStatus, ort_create_status)(ORT_RUNTIME_EXCEPTION, "out of memory");
    }
    k->api = api; k->plan = p; k->op = bop;
    *out = k;
    return NULL;
}

static void bridge_destroy(void *kernel) {
    bridge_kernel *k = kernel;
    if (!k) return;
    pthread_mutex_lock(&bridge_lock);
    if (--k->plan->kernels == 0 && k->plan->dropped) bridge_free(k->plan);
    pthread_mutex_unlock(&bridge_lock);
    free(k);
}

/* Input i's data and shape (rank up to 3 in dims, the rank in *rank); NULL data where the input is absent. */
static OrtStatus *bridge_input(const void *api, OrtKernelContext *ctx, size_t i, size_t n_inputs, void **data,
                               int64_t dims[3], size_t *rank) {
    *data = NULL;
    *rank = 0;
    if (i >= n_inputs) return NULL;
    const OrtValue *v = NULL;
    OrtStatus *st = ORT_CALL(api, KernelContext_GetInput, ort_input)(ctx, i, &v);
    if (st || !v) return st;
    OrtShape *shape = NULL;
    if ((st = ORT_CALL(api, GetTensorTypeAndShape, ort_type_and_shape)(v, &shape))) return st;
    st = ORT_CALL(api, GetDimensionsCount, ort_dims_count)(shape, rank);
    if (!st && *rank <= 3) st = ORT_CALL(api, GetDimensions, ort_dims)(shape, dims, *rank);
    ORT_CALL(api, ReleaseTensorTypeAndShapeInfo, ort_release_shape)(shape);
    if (!st) st = ORT_CALL(api, GetTensorMutableData, ort_mutable_data)((OrtValue *)v, data);
    return st;
}

static OrtStatus *bridge_output(const void *api, OrtKernelContext *ctx, size_t i, const int64_t *dims, size_t rank,
                                float **data) {
    OrtValue *v = NULL;
    OrtStatus *st = ORT_CALL(api, KernelContext_GetOutput, ort_output)(ctx, i, dims, rank, &v);
    if (!st && !v) return ORT_CALL(api, CreateStatus, ort_create_status)(ORT_RUNTIME_EXCEPTION, "no output tensor");
    return st ? st : ORT_CALL(api, GetTensorMutableData, ort_mutable_data)(v, (void **)data);
}

static void bridge_shape_text(char *buf, size_t n, const int64_t *dims, size_t rank) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (size_t i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Y, Y_h[, Y_c] = the node on X[, sequence_lens, initial_h, initial_c]: one call of f32_run over every step. */
static OrtStatus *bridge_compute(void *kernel, OrtKernelContext *ctx) {
    const bridge_kernel *k = kernel;
    const void *api = k->api;
    bridge_plan *p = k->plan;
    const rnn_args *t = &p->tmpl;
    const int D = t->D, H = t->H, lstm = t->kind == KIND_LSTM;
    size_t n_in = 0, rank[4];
    int64_t dims[4][3];
    void *in[4];
    char shown[96];
    OrtStatus *st = ORT_CALL(api, KernelContext_GetInputCount, ort_input_count)(ctx, &n_in);
    for (size_t i = 0; !st && i < k->op->inputs; i++) st = bridge_input(api, ctx, i, n_in, &in[i], dims[i], &rank[i]);
    if (st) return st;
    bridge_shape_text(shown, sizeof shown, dims[0], rank[0] <= 3 ? rank[0] : 0);
    if (rank[0] != 3) return bridge_error(api, "X: expected rank 3 [seq_length, batch_size, input_size], got rank %zu",
                                          rank[0]);
    const int64_t T = dims[0][0], B = dims[0][1];
    if (T == 0 || B == 0 || dims[0][2] == 0)
        return bridge_error(api, "X: expected non-empty seq_length, batch_size and input_size, got shape %s", shown);
    if (dims[0][2] != t->I) return bridge_error(api, "X: expected input_size %d (W's), got shape %s", t->I, shown);
    if (T > INT32_MAX || B > INT32_MAX / 2) return bridge_error(api, "X: shape %s is too large", shown);
    const char *state_name[4] = {"X", "sequence_lens", "initial_h", "initial_c"};
    for (int i = 2; i < (lstm ? 4 : 3); i++) {
        if (!in[i]) continue;
        if (rank[i] != 3 || dims[i][0] != D || dims[i][1] != B || dims[i][2] != H) {
            bridge_shape_text(shown, sizeof shown, dims[i], rank[i] <= 3 ? rank[i] : 0);
            return bridge_error(api, "%s: expected shape [%d, %lld, %d] [num_directions, batch_size, hidden_size], "
                                "got %s%s", state_name[i], D, (long long)B, H, rank[i] <= 3 ? shown : "rank ",
                                rank[i] <= 3 ? "" : "> 3");
        }
    }
    int64_t *lens = NULL;
    long steps = T;
    if (in[1]) {
        if (rank[1] != 1 || dims[1][0] != B) {
            bridge_shape_text(shown, sizeof shown, dims[1], rank[1] <= 3 ? rank[1] : 0);
            return bridge_error(api, "sequence_lens: expected shape (%lld,) (batch_size,), got %s", (long long)B,
                                rank[1] <= 3 ? shown : "rank > 3");
        }
        const int32_t *l = in[1];
        int all = 1;
        long most = 0;
        for (int64_t b = 0; b < B; b++) {
            if (l[b] < 0 || l[b] > T)
                return bridge_error(api, "sequence_lens: expected every length in [0, %lld] (the sequence length), "
                                    "got [%d] at batch index [%lld]", (long long)T, l[b], (long long)b);
            all &= l[b] == T;
            if (l[b] > most) most = l[b];
        }
        if (!all) {
            lens = malloc(sizeof(int64_t) * (size_t)B);
            if (!lens) return ORT_CALL(api, CreateStatus, ort_create_status)(ORT_RUNTIME_EXCEPTION, "out of memory");
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
    if (in[2]) memcpy(Yh, in[2], state * sizeof(float)); else memset(Yh, 0, state * sizeof(float));
    if (lstm) {
        if (in[3]) memcpy(Yc, in[3], state * sizeof(float)); else memset(Yc, 0, state * sizeof(float));
    }
    if (lens) memset(Y, 0, (size_t)T * state * sizeof(float));
    rnn_args a = *t;
    a.T = (int32_t)T; a.B = (int32_t)B; a.K = 1; a.s0 = 0; a.s1 = (int32_t)steps;
    a.x = in[0]; a.W = p->W; a.R = p->R; a.xb = p->xb; a.bh = p->bh; a.Rpk = p->Rpk; a.xp = NULL;
    a.h = Yh; a.c = lstm ? Yc : NULL; a.Y = Y; a.lens = lens;
    a.threads = steps * B * t->G * H * (long)H >= __atomic_load_n(&bridge_min_macs, __ATOMIC_RELAXED)
                ? __atomic_load_n(&bridge_threads, __ATOMIC_RELAXED) : 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
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
    clock_gettime(CLOCK_MONOTONIC, &t1);
    __atomic_add_fetch(&bridge_ns, (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec), __ATOMIC_RELAXED);
    if (lens) {  /* a row of length 0 ends with zero states, as onnxruntime's */
        for (int d = 0; d < D; d++)
            for (int64_t b = 0; b < B; b++)
                if (lens[b] == 0) {
                    memset(Yh + ((size_t)d * B + b) * H, 0, sizeof(float) * H);
                    if (lstm) memset(Yc + ((size_t)d * B + b) * H, 0, sizeof(float) * H);
                }
        free(lens);
    }
    if (rc != 0) return ORT_CALL(api, CreateStatus, ort_create_status)(ORT_RUNTIME_EXCEPTION,
                                                                        "fusedrnn: could not allocate the kernel's work buffer");
    return NULL;
}

#define BRIDGE_OP(NAME, KIND, IN, OUT)                                                                            \
    {{BRIDGE_ORT_API, bridge_create_v1, bridge_name, bridge_provider, bridge_input_type, bridge_input_count,       \
      bridge_output_type, bridge_output_count, bridge_compute_v1, bridge_destroy, bridge_input_kind,              \
      bridge_output_kind, bridge_memory, bridge_one, bridge_one, bridge_one, bridge_one, bridge_create,           \
      bridge_compute},                                                                                            \
     NAME, KIND, IN, OUT}
static const bridge_op bridge_ops[] = {BRIDGE_OP("LSTM", KIND_LSTM, 4, 3), BRIDGE_OP("GRU", KIND_GRU, 3, 2)};
static OrtCustomOpDomain *bridge_domain;

/* onnxruntime's entry point of a custom-op library (SessionOptions.register_custom_ops_library): adds the domain
 * (made once; onnxruntime does not own it) to the session options. An onnxruntime older than BRIDGE_ORT_API gets no
 * operators, and a session of a rewritten model then fails to load (Python falls back to its other routes). */
__attribute__((visibility("default"))) OrtStatus *RegisterCustomOps(OrtSessionOptions *options,
                                                                    const OrtApiBase *base) {
    const void *api = base ? base->GetApi(BRIDGE_ORT_API) : NULL;
    if (!api) return NULL;
    OrtStatus *st = NULL;
    pthread_mutex_lock(&bridge_lock);
    if (!bridge_domain) {
        OrtCustomOpDomain *dom = NULL;
        st = ORT_CALL(api, CreateCustomOpDomain, ort_create_domain)(BRIDGE_DOMAIN, &dom);
        for (size_t i = 0; !st && i < sizeof bridge_ops / sizeof bridge_ops[0]; i++)
            st = ORT_CALL(api, CustomOpDomain_Add, ort_domain_add)(dom, &bridge_ops[i].op);
        if (!st) bridge_domain = dom;  /* a failed domain is left unreleased: its ops are static */
    }
    pthread_mutex_unlock(&bridge_lock);
    return st ? st : ORT_CALL(api, AddCustomOpDomain, ort_add_domain)(options, bridge_domain);
}

/* What a fusedrnn C library needs to be an onnxruntime custom-operator library (fusedrnn.frontends.onnx_native):
 * the facts of onnxruntime's C ABI it uses, a registry of plans Python makes (each operator's node holds a plan's
 * id as its attribute "plan"), the operators' common callbacks and input / output helpers. A library includes this
 * header once, defines its plans (a struct that starts with a bridge_head) and its compute functions, and exports
 * RegisterCustomOps (bridge_register_ops) and its plan functions.
 *
 * onnxruntime's C API (onnxruntime_c_api.h): OrtApi is a table of function pointers that only ever grows at its
 * end, so an entry's index holds in every version from the one it appeared in; onnxruntime reads OrtCustomOp's
 * fields up to KernelComputeV2 when the op's version is 16 or more (CreateKernelV2 and KernelComputeV2 return a
 * status; version 16 is onnxruntime 1.16). Enum values are ints in the C ABI. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#define BRIDGE_ORT_API 16
#define BRIDGE_SLOTS 4096    /* plans alive at once; an id is slot + BRIDGE_SLOTS * generation */
#define BRIDGE_GEN_MASK 0x7ffff

typedef struct OrtStatus OrtStatus;
typedef struct OrtValue OrtValue;
typedef struct OrtKernelInfo OrtKernelInfo;
typedef struct OrtKernelContext OrtKernelContext;
typedef struct OrtTensorTypeAndShapeInfo OrtShape;
typedef struct OrtCustomOpDomain OrtCustomOpDomain;
typedef struct OrtSessionOptions OrtSessionOptions;

/* OrtApi entries by index, with their C signatures */
enum { ORT_CreateStatus = 0, ORT_CreateCustomOpDomain = 26, ORT_CustomOpDomain_Add = 27, ORT_AddCustomOpDomain = 28,
       ORT_GetTensorMutableData = 51, ORT_GetDimensionsCount = 61, ORT_GetDimensions = 62,
       ORT_GetTensorTypeAndShape = 65, ORT_KernelInfoGetAttribute_int64 = 86, ORT_KernelContext_GetInputCount = 88,
       ORT_KernelContext_GetInput = 90, ORT_KernelContext_GetOutput = 91, ORT_ReleaseTensorTypeAndShapeInfo = 99 };
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

/* ---- the registry of plans ----------------------------------------------------------------------------------- */
typedef struct bridge_head bridge_head;
struct bridge_head {    /* the start of every plan */
    int kind;           /* which operator may use it */
    int kernels;        /* kernels holding the plan (under bridge_lock) */
    int dropped;        /* Python dropped it: freed with its last kernel */
    void (*release)(bridge_head *plan);
};

static pthread_mutex_t bridge_lock = PTHREAD_MUTEX_INITIALIZER;
static bridge_head *bridge_plans[BRIDGE_SLOTS];
static uint32_t bridge_gen[BRIDGE_SLOTS];
static int bridge_live;   /* plans allocated (under bridge_lock) */
static long bridge_ns;    /* nanoseconds spent in the operators' kernels (atomic) */

static void bridge_free(bridge_head *p) {  /* under bridge_lock */
    bridge_live--;
    p->release(p);
}

/* A new plan's id (>= 0), or -2 without a free slot (the plan is released). */
static long bridge_register(bridge_head *p) {
    pthread_mutex_lock(&bridge_lock);
    bridge_live++;
    for (long s = 0; s < BRIDGE_SLOTS; s++)
        if (!bridge_plans[s]) {
            bridge_plans[s] = p;
            const long id = s + BRIDGE_SLOTS * (long)(++bridge_gen[s] & BRIDGE_GEN_MASK);
            pthread_mutex_unlock(&bridge_lock);
            return id;
        }
    bridge_free(p);
    pthread_mutex_unlock(&bridge_lock);
    return -2;
}

/* Python's model is gone: the plan leaves its slot (a session made later cannot use it) and is freed once no
 * kernel holds it. */
static void bridge_drop(long id) {
    if (id < 0) return;
    const long s = id % BRIDGE_SLOTS;
    pthread_mutex_lock(&bridge_lock);
    bridge_head *p = bridge_plans[s];
    if (p && (bridge_gen[s] & BRIDGE_GEN_MASK) == (uint64_t)(id / BRIDGE_SLOTS)) {
        bridge_plans[s] = NULL;
        p->dropped = 1;
        if (p->kernels == 0) bridge_free(p);
    }
    pthread_mutex_unlock(&bridge_lock);
}

static int bridge_count(void) {
    pthread_mutex_lock(&bridge_lock);
    const int n = bridge_live;
    pthread_mutex_unlock(&bridge_lock);
    return n;
}

/* ---- the operators ----------------------------------------------------------------------------------------------- */
typedef struct bridge_op bridge_op;
struct bridge_op {
    ort_custom_op op;
    const char *name;
    int kind;
    size_t inputs, outputs;  /* input 1 is int32 (sequence_lens), the others float; all but input 0 optional */
};

typedef struct {
    const void *api;
    bridge_head *plan;
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

static OrtStatus *bridge_no_memory(const void *api) {
    return ORT_CALL(api, CreateStatus, ort_create_status)(ORT_RUNTIME_EXCEPTION, "fusedrnn: out of memory");
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

/* The kernel of a node: the live plan its attribute "plan" names, for this operator. */
static OrtStatus *bridge_create(const ort_custom_op *op, const void *api, const OrtKernelInfo *info, void **out) {
    const bridge_op *bop = (const bridge_op *)op;
    int64_t id = -1;
    OrtStatus *st = ORT_CALL(api, KernelInfoGetAttribute_int64, ort_attribute_int64)(info, "plan", &id);
    if (st) return st;
    bridge_head *p = NULL;
    pthread_mutex_lock(&bridge_lock);
    if (id >= 0) {
        const long s = (long)(id % BRIDGE_SLOTS);
        if (bridge_plans[s] && (bridge_gen[s] & BRIDGE_GEN_MASK) == (uint64_t)(id / BRIDGE_SLOTS)
            && bridge_plans[s]->kind == bop->kind) {
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
        return bridge_no_memory(api);
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

#define BRIDGE_OP(NAME, KIND, IN, OUT, COMPUTE)                                                                   \
    {{BRIDGE_ORT_API, bridge_create_v1, bridge_name, bridge_provider, bridge_input_type, bridge_input_count,       \
      bridge_output_type, bridge_output_count, bridge_compute_v1, bridge_destroy, bridge_input_kind,              \
      bridge_output_kind, bridge_memory, bridge_one, bridge_one, bridge_one, bridge_one, bridge_create,           \
      COMPUTE},                                                                                                   \
     NAME, KIND, IN, OUT}

static OrtCustomOpDomain *bridge_domain;

/* The body of a library's RegisterCustomOps: adds the domain (made once; onnxruntime does not own it) to the
 * session options. An onnxruntime older than BRIDGE_ORT_API gets no operators, and a session of a rewritten model
 * then fails to load (Python falls back to its other routes). */
static OrtStatus *bridge_register_ops(OrtSessionOptions *options, const OrtApiBase *base, const char *domain,
                                      const bridge_op *ops, size_t n) {
    const void *api = base ? base->GetApi(BRIDGE_ORT_API) : NULL;
    if (!api) return NULL;
    OrtStatus *st = NULL;
    pthread_mutex_lock(&bridge_lock);
    if (!bridge_domain) {
        OrtCustomOpDomain *dom = NULL;
        st = ORT_CALL(api, CreateCustomOpDomain, ort_create_domain)(domain, &dom);
        for (size_t i = 0; !st && i < n; i++) st = ORT_CALL(api, CustomOpDomain_Add, ort_domain_add)(dom, &ops[i].op);
        if (!st) bridge_domain = dom;  /* a failed domain is left unreleased: its ops are static */
    }
    pthread_mutex_unlock(&bridge_lock);
    return st ? st : ORT_CALL(api, AddCustomOpDomain, ort_add_domain)(options, bridge_domain);
}

/* ---- inputs and outputs ------------------------------------------------------------------------------------------ */
typedef struct {
    void *data;          /* NULL: the input is absent */
    size_t rank;
    int64_t dims[3];     /* the first three */
    char shown[96];      /* the shape as text, for messages */
} bridge_tensor;

static void bridge_shape_text(bridge_tensor *t) {
    size_t k = (size_t)snprintf(t->shown, sizeof t->shown, "[");
    if (t->rank > 3) {
        snprintf(t->shown, sizeof t->shown, "rank %zu", t->rank);
        return;
    }
    for (size_t i = 0; i < t->rank && k < sizeof t->shown; i++)
        k += (size_t)snprintf(t->shown + k, sizeof t->shown - k, i ? ", %lld" : "%lld", (long long)t->dims[i]);
    if (k < sizeof t->shown) snprintf(t->shown + k, sizeof t->shown - k, "]");
}

/* The operator's inputs (up to 4): data, rank, first dimensions. */
static OrtStatus *bridge_inputs(const void *api, OrtKernelContext *ctx, size_t n, bridge_tensor *in) {
    size_t given = 0;
    OrtStatus *st = ORT_CALL(api, KernelContext_GetInputCount, ort_input_count)(ctx, &given);
    for (size_t i = 0; !st && i < n; i++) {
        bridge_tensor *t = &in[i];
        t->data = NULL;
        t->rank = 0;
        const OrtValue *v = NULL;
        if (i >= given || (st = ORT_CALL(api, KernelContext_GetInput, ort_input)(ctx, i, &v)) || !v) continue;
        OrtShape *shape = NULL;
        if ((st = ORT_CALL(api, GetTensorTypeAndShape, ort_type_and_shape)(v, &shape))) break;
        st = ORT_CALL(api, GetDimensionsCount, ort_dims_count)(shape, &t->rank);
        if (!st && t->rank <= 3) st = ORT_CALL(api, GetDimensions, ort_dims)(shape, t->dims, t->rank);
        ORT_CALL(api, ReleaseTensorTypeAndShapeInfo, ort_release_shape)(shape);
        if (!st) st = ORT_CALL(api, GetTensorMutableData, ort_mutable_data)((OrtValue *)v, &t->data);
        bridge_shape_text(t);
    }
    return st;
}

static OrtStatus *bridge_output(const void *api, OrtKernelContext *ctx, size_t i, const int64_t *dims, size_t rank,
                                float **data) {
    OrtValue *v = NULL;
    OrtStatus *st = ORT_CALL(api, KernelContext_GetOutput, ort_output)(ctx, i, dims, rank, &v);
    if (!st && !v) return ORT_CALL(api, CreateStatus, ort_create_status)(ORT_RUNTIME_EXCEPTION, "no output tensor");
    return st ? st : ORT_CALL(api, GetTensorMutableData, ort_mutable_data)(v, (void **)data);
}

/* The checks every recurrent operator makes: X [T, B, I] non-empty with the plan's I; the states [D, B, H] (inputs
 * 2 .. n - 1); sequence_lens [B] within [0, T] (input 1). *T and *B get X's sizes. */
static OrtStatus *bridge_check(const void *api, const bridge_tensor *in, size_t n, int I, int D, int H, int64_t *T,
                               int64_t *B) {
    static const char *const names[4] = {"X", "sequence_lens", "initial_h", "initial_c"};
    if (in[0].rank != 3)
        return bridge_error(api, "X: expected rank 3 [seq_length, batch_size, input_size], got %s", in[0].shown);
    *T = in[0].dims[0];
    *B = in[0].dims[1];
    if (*T == 0 || *B == 0 || in[0].dims[2] == 0)
        return bridge_error(api, "X: expected non-empty seq_length, batch_size and input_size, got shape %s",
                            in[0].shown);
    if (in[0].dims[2] != I) return bridge_error(api, "X: expected input_size %d (W's), got shape %s", I, in[0].shown);
    if (*T > INT32_MAX || *B > INT32_MAX / 2) return bridge_error(api, "X: shape %s is too large", in[0].shown);
    for (size_t i = 2; i < n; i++)
        if (in[i].data && (in[i].rank != 3 || in[i].dims[0] != D || in[i].dims[1] != *B || in[i].dims[2] != H))
            return bridge_error(api, "%s: expected shape [%d, %lld, %d] [num_directions, batch_size, hidden_size], "
                                "got %s", names[i], D, (long long)*B, H, in[i].shown);
    if (in[1].data) {
        if (in[1].rank != 1 || in[1].dims[0] != *B)
            return bridge_error(api, "sequence_lens: expected shape (%lld,) (batch_size,), got %s", (long long)*B,
                                in[1].shown);
        const int32_t *l = in[1].data;
        for (int64_t b = 0; b < *B; b++)
            if (l[b] < 0 || l[b] > *T)
                return bridge_error(api, "sequence_lens: expected every length in [0, %lld] (the sequence length), "
                                    "got [%d] at batch index [%lld]", (long long)*T, l[b], (long long)b);
    }
    return NULL;
}

static long bridge_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

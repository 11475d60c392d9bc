/* fusedrnn: TFLite's integer requantization (``MultiplyByQuantizedMultiplier``) and its helpers, for the compiled
 * loops of the TFLite-family targets (targets/litert/_kernel.c, targets/_micro_lstm.c): int64 holding the C++ int32
 * values, as numerics/core.py's Requant computes them. Each loop's NumPy form stays the reference.
 */
#ifndef FUSEDRNN_TFLITE_REQUANT_H
#define FUSEDRNN_TFLITE_REQUANT_H
#include <stdint.h>

static inline int64_t wrap32(int64_t x) { return (int64_t)(int32_t)(uint32_t)(uint64_t)x; }
static inline int64_t sat(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : (x > hi ? hi : x); }
/* wrap32(x << L) for L >= 0: 0 from L = 32 on (every bit left the low 32), which is NumPy's result too; a C shift by
 * 64 or more is undefined (left shifts of 99 come from multipliers of calibration ranges near 1e30) */
static inline int64_t shl_wrap32(int64_t x, int64_t L) { return L >= 32 ? 0 : wrap32((int64_t)((uint64_t)x << L)); }

/* MultiplyByQuantizedMultiplier on int32 values (Requant.__call__) */
static inline int64_t mbqm(int64_t x, int64_t Q, int64_t shift, int single) {
    if (single) {
        int64_t total = 31 - shift;
        return wrap32((x * Q + ((int64_t)1 << (total - 1))) >> total);
    }
    if (shift > 0) x = shl_wrap32(x, shift);
    int64_t p;
    if (x == INT32_MIN && Q == INT32_MIN) p = INT32_MAX;
    else p = (x * Q + ((int64_t)1 << 30)) >> 31;
    if (shift < 0) {
        int r = (int)-shift;
        p = (p + ((int64_t)1 << (r - 1)) - (p < 0)) >> r;
    }
    return p;
}

/* MBQM with one gate block's constants r[g], r[G+g], ... = Q, left shift (single rounding: the shift), right
 * shift, its nudge, [right > 0]; branch-free, and on int32 operands (x is an int32 value, 0 < Q < 2^31: checked
 * by the loop's Python side) so that the 32 x 32 -> 64-bit products vectorise (vpmuldq) */
static inline int64_t rq_double(int32_t x, int32_t Q, int64_t L, int64_t R, int64_t nud, int64_t rpos) {
    x = L >= 32 ? 0 : (int32_t)((uint32_t)x << L);
    int64_t p = ((int64_t)x * Q + ((int64_t)1 << 30)) >> 31;
    return (p + nud - ((p < 0) & rpos)) >> R;
}
/* the single-rounding MBQM (mbqm with single = 1) on the same int32 operands */
static inline int64_t rq_single(int32_t x, int32_t Q, int64_t shift) {
    const int64_t total = 31 - shift;
    return wrap32(((int64_t)x * Q + ((int64_t)1 << (total - 1))) >> total);
}

#endif

/* The C library's float functions over arrays, for the primitives that must equal a program that calls them one
 * value at a time: numerics/eigen.py (Eigen's scalar logistic calls expf, and glibc's expf is not correctly rounded
 * for about 7e-5 of the inputs, so nothing but the C library's own expf gives its bits).
 *
 * Built without fast-math (the compiler must neither vectorise the calls into libmvec's variants nor contract
 * anything): every y[i] is exactly what expf(x[i]) returns.
 */
#include <math.h>

#define ABI_VERSION 1

int fusedrnn_libm_abi(void) { return ABI_VERSION; }

/* y[i] = expf(x[i]) for 0 <= i < n (x and y may be the same array). */
void fusedrnn_expf(const float *x, float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = expf(x[i]);
}

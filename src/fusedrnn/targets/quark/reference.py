"""Quark's own ExtendedLSTM kernel as a verification oracle (tests, benchmarks, users who want to check).

``build(workdir)`` downloads the amd-quark wheel (``pip download``), compiles a harness around the kernel's C++
source with g++ in ``workdir`` and loads it through ctypes; ``run(...)`` calls it. Not imported by the package.

Nothing from the wheel is stored in fusedrnn: the harness below is ours and ``#include``s the kernel
(``lstm/cpu/lstm.h``) and its quantize/dequantize loops (``qdq/cpu/quantize_linear.h``) from the extracted
wheel, reproducing what ``KernelCustomLSTM::Compute`` does around them (per-tensor uint16 quantization of X, W,
R, B with the attribute zero points cast to uint16, ``lstm()``, dequantization of Y).

Set ``FUSEDRNN_QUARK_WHEEL`` to a local amd-quark wheel to work offline.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

WHEEL_VERSION = "0.13"
_OPS = "quark/onnx/operators/custom_ops"

HARNESS = r"""
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>
#include "lstm/cpu/lstm.h"
#include "qdq/cpu/quantize_linear.h"

namespace harness {
QUANTIZE_LINEAR_APPLY(float)
DEQUANTIZE_LINEAR_APPLY(float)

static void quant(const float* a, long n, float scale, long long zp, uint16_t* q) {
  uint16_t z = (uint16_t)zp;
  QuantizeLinearApply<uint16_t>().op(nullptr, 1, 1, n, a, &scale, q, &z);
}
}  // namespace harness

extern "C" int quark_extended_lstm(
    const float* x, long x_len, const float* w, long w_len, const float* r, long r_len, const float* b,
    long b_len, int seq_len, int input_size, int hidden_size, long y_len, const float* scales,
    const long long* zps, float* y_out, uint16_t* yq_out) {
  std::vector<uint16_t> xq(x_len), wq(w_len), rq(r_len), bq(b_len);
  harness::quant(x, x_len, scales[0], zps[0], xq.data());
  harness::quant(w, w_len, scales[1], zps[1], wq.data());
  harness::quant(r, r_len, scales[2], zps[2], rq.data());
  harness::quant(b, b_len, scales[3], zps[3], bq.data());
  lstm(yq_out, xq.data(), wq.data(), rq.data(), bq.data(), scales[0], scales[1], scales[2], scales[3],
       scales[4], (unsigned short)zps[0], (unsigned short)zps[1], (unsigned short)zps[2],
       (unsigned short)zps[3], (unsigned short)zps[4], seq_len, input_size, hidden_size);
  uint16_t yz = (uint16_t)zps[4];
  float ys = scales[4];
  harness::DequantizeLinearApply<uint16_t>().op(nullptr, 1, 1, y_len, yq_out, &ys, y_out, &yz);
  return 0;
}

// the kernel's scalar helpers, for unit-level comparisons
extern "C" int k_round_int(double x) { return round_int(x); }
extern "C" short k_round_short(double x) { return round_short(x); }
extern "C" int k_srs_int(long long x, int s) { return srs_int(x, (unsigned char)s); }
extern "C" short k_srs_short(long long x, int s) { return srs_short(x, (unsigned char)s); }
extern "C" int k_fix(double v, short* m) { return params_float_to_fix(v, *m); }

// get_params on int16-domain tensors w [2, 4H, I], r [2, 4H, H], b [2, 8H] (row-major, ONNX layout)
extern "C" void k_params(const short* w, const short* r, const short* b, int I, int H, const float* sc,
                         const int* zp, int* qc_out, int* ints_out) {
  int G = 4 * H;
  std::vector<std::vector<short>> w0(I, std::vector<short>(G)), w1(I, std::vector<short>(G));
  std::vector<std::vector<short>> r0(H, std::vector<short>(G)), r1(H, std::vector<short>(G));
  std::vector<short> bx(G), bh(G), bxb(G), bhb(G);
  for (int k = 0; k < G; k++) {
    for (int j = 0; j < I; j++) { w0[j][k] = w[k * I + j]; w1[j][k] = w[G * I + k * I + j]; }
    for (int j = 0; j < H; j++) { r0[j][k] = r[k * H + j]; r1[j][k] = r[G * H + k * H + j]; }
    bx[k] = b[k]; bh[k] = b[G + k]; bxb[k] = b[2 * G + k]; bhb[k] = b[3 * G + k];
  }
  short qx, qh, qa, qb;
  std::vector<int> qc(G), qcb(G);
  unsigned short ohs, ohz;
  unsigned char xw, xwq, hr, hrq, xss, hss, oh;
  get_params(w0, w1, r0, r1, I, H, G, bx, bh, bxb, bhb, sc[0], sc[1], sc[2], sc[3], sc[4], zp[0], zp[1], zp[2],
             zp[3], zp[4], qx, qh, qa, qb, qc, qcb, ohs, ohz, xw, xwq, hr, hrq, xss, hss, oh);
  for (int k = 0; k < G; k++) { qc_out[k] = qc[k]; qc_out[G + k] = qcb[k]; }
  int v[14] = {qx, qh, qa, qb, ohs, (short)ohz, xw, xwq, hr, hrq, xss, hss, oh, 0};
  for (int i = 0; i < 14; i++) ints_out[i] = v[i];
}
"""


class OracleUnavailable(RuntimeError):
    """Why the oracle cannot be built (the tests skip with this message)."""


def _wheel(workdir: Path) -> Path:
    local = os.environ.get("FUSEDRNN_QUARK_WHEEL")
    if local:
        return Path(local)
    cmd = [sys.executable, "-m", "pip", "download", f"amd-quark=={WHEEL_VERSION}", "--no-deps", "--quiet",
           "--disable-pip-version-check", "-d", str(workdir)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        detail = getattr(e, "stderr", b"") or b""
        raise OracleUnavailable(f"cannot download amd-quark=={WHEEL_VERSION} (no network?): "
                                f"{detail.decode(errors='replace').strip()[-300:] or e}") from None
    found = sorted(workdir.glob("amd_quark-*.whl"))
    if not found:
        raise OracleUnavailable("pip download produced no amd_quark wheel")
    return found[0]


def build(workdir: Path) -> ctypes.CDLL:
    """Download, extract, compile; returns the loaded harness library (raises OracleUnavailable)."""
    cxx = shutil.which("g++")
    if cxx is None:
        raise OracleUnavailable("no C++ compiler (g++) on PATH")
    wheel = _wheel(workdir)
    with zipfile.ZipFile(wheel) as z:
        members = [m for m in z.namelist() if m.startswith(f"{_OPS}/src/lstm/") or m.startswith(f"{_OPS}/src/qdq/cpu/")
                   or m.startswith(f"{_OPS}/include/onnxruntime-")]
        z.extractall(workdir, members)
    ops = workdir / _OPS
    api = next((ops / "include").rglob("onnxruntime_c_api.h"), None)
    if api is None or not (ops / "src/lstm/cpu/lstm.h").exists():
        raise OracleUnavailable(f"the wheel {wheel.name} has no ExtendedLSTM kernel source where expected")
    src = workdir / "harness.cc"
    src.write_text(HARNESS)
    lib = workdir / "libquark_lstm_harness.so"
    cmd = [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", f"-I{ops / 'src'}", f"-I{api.parent}", str(src), "-o",
           str(lib)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=180)
    except subprocess.CalledProcessError as e:
        detail = e.stderr.decode(errors="replace")[-500:]
        raise OracleUnavailable(f"compiling Quark's kernel failed: {detail}") from None
    dll = ctypes.CDLL(str(lib))
    dll.quark_extended_lstm.restype = ctypes.c_int
    dll.k_round_int.restype, dll.k_round_int.argtypes = ctypes.c_int, [ctypes.c_double]
    dll.k_round_short.restype, dll.k_round_short.argtypes = ctypes.c_short, [ctypes.c_double]
    dll.k_srs_int.restype, dll.k_srs_int.argtypes = ctypes.c_int, [ctypes.c_longlong, ctypes.c_int]
    dll.k_srs_short.restype, dll.k_srs_short.argtypes = ctypes.c_short, [ctypes.c_longlong, ctypes.c_int]
    dll.k_fix.restype, dll.k_fix.argtypes = ctypes.c_int, [ctypes.c_double, ctypes.POINTER(ctypes.c_short)]
    return dll


def params(dll: ctypes.CDLL, w, r, b, input_size: int, hidden_size: int, scales: dict) -> dict:
    """The kernel's ``get_params`` on int16-domain w [2, 4H, I], r [2, 4H, H], b [2, 8H] (zero points as the
    kernel receives them, q - 32768). Returns a dict of the constants (qc int64 [2, 4H])."""
    G = 4 * hidden_size
    w, r, b = (np.ascontiguousarray(a, dtype=np.int16) for a in (w, r, b))
    sc = np.array([scales[f"{n}_scale"] for n in "xwrby"], dtype=np.float32)
    zp = np.array([scales[f"{n}_zero_point"] - 32768 for n in "xwrby"], dtype=np.int32)
    qc = np.zeros(2 * G, dtype=np.int32)
    ints = np.zeros(14, dtype=np.int32)

    def p(a):
        return a.ctypes.data_as(ctypes.c_void_p)

    dll.k_params(p(w), p(r), p(b), int(input_size), int(hidden_size), p(sc), p(zp), p(qc), p(ints))
    names = ("qx", "qh", "qa", "qb", "ohs", "ohz", "xw", "xwq", "hr", "hrq", "xss", "hss", "oh")
    out = {n: int(v) for n, v in zip(names, ints[: len(names)], strict=True)}
    out["qc"] = qc.reshape(2, G).astype(np.int64)
    return out


def build_ort_library(workdir: Path) -> Path:
    """Quark's whole ORT custom-op library (CPU, torch-free; quark.md section 5) built in ``workdir``, for
    ``SessionOptions.register_custom_ops_library``. Slow (about 15 s of CPU)."""
    cxx = shutil.which("g++")
    if cxx is None:
        raise OracleUnavailable("no C++ compiler (g++) on PATH")
    wheel = _wheel(workdir)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(workdir, [m for m in z.namelist() if m.startswith(f"{_OPS}/")])
    ops = workdir / _OPS
    api = next((ops / "include").rglob("onnxruntime_cxx_api.h"), None)
    ort_inc = next((ops / "include").glob("onnxruntime-*"), None)
    if api is None or ort_inc is None:
        raise OracleUnavailable(f"the wheel {wheel.name} has no ORT headers where expected")
    ort_root = ort_inc / "onnxruntime"
    srcs = [ops / "src" / f"custom_op_{n}.cc" for n in ("library", "qdq", "in", "bfp", "mx", "lstm")]
    srcs += [ops / "src" / p for p in ("bfp/cpu/bfp_kernel.cc", "bfp/cpu/bfp.cc", "mx/cpu/mx_kernel.cc",
                                       "mx/cpu/mx.cc")]
    lib = workdir / "libquark_custom_ops_cpu.so"
    gsl = next((ops / "include").glob("gsl-*"), ops / "include")
    cmd = [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-DNO_GPU", f"-I{ops / 'include'}", f"-I{ops / 'src'}",
           f"-I{ort_root}", f"-I{api.parent}", f"-I{gsl}", *map(str, srcs), "-o", str(lib)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    except subprocess.CalledProcessError as e:
        detail = e.stderr.decode(errors="replace")[-500:]
        raise OracleUnavailable(f"compiling Quark's library failed: {detail}") from None
    return lib


def run(dll: ctypes.CDLL, X, W, R, B, scales: dict, hidden_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Quark's kernel on float tensors (batch 1, two directions); returns (Y float32, Y uint16) [T, 2, 1, H]."""
    X, W, R, B = (np.ascontiguousarray(a, dtype=np.float32) for a in (X, W, R, B))
    T, batch, I = X.shape
    H = hidden_size
    y = np.zeros((T, 2, batch, H), dtype=np.float32)
    yq = np.zeros((T, 2, batch, H), dtype=np.uint16)
    sc = np.array([scales[f"{n}_scale"] for n in "xwrby"], dtype=np.float32)
    zp = np.array([scales[f"{n}_zero_point"] for n in "xwrby"], dtype=np.int64)

    def p(a):
        return a.ctypes.data_as(ctypes.c_void_p)

    dll.quark_extended_lstm(p(X), ctypes.c_long(X.size), p(W), ctypes.c_long(W.size), p(R), ctypes.c_long(R.size),
                            p(B), ctypes.c_long(B.size), int(T), int(I), int(H), ctypes.c_long(y.size), p(sc), p(zp),
                            p(y), p(yq))
    return y, yq

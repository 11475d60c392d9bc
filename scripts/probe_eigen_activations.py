"""Probe the LiteRT interpreter's float32 LOGISTIC and TANH (Eigen's ``logistic()`` / ``tanh()``, the functions
its LSTM / RNN kernels apply) and compare them bit for bit with :mod:`fusedrnn.numerics.eigen`.

    python scripts/probe_eigen_activations.py [--n 1000000] [--eigen path/to/eigen --cxx g++]

1. Bulk: n inputs (normal at several scales, a uniform sweep, edge values) through one op of n elements (n a
   multiple of 4: whole SSE packets), compared with ``eigen.tanh`` / ``eigen.logistic``, and how far the interpreter
   is from the correctly rounded function.
2. Scalar tail: vectors of 1-9 elements, where Eigen computes the elements after the last whole packet one at a
   time (for logistic a different formula: the C library's expf).
3. With ``--eigen`` (a checkout of Eigen) and a C++ compiler: Eigen's own ``array().tanh()`` / ``logistic()``
   compiled with SSE2, AVX and AVX2+FMA flags over the same inputs, to show which build the wheel matches (SSE2 and
   AVX agree with the interpreter; AVX2+FMA does not).

Findings (ai-edge-litert 2.3.0, x86-64): 0 mismatches in 1.37 million bulk inputs and in every tail length; the
interpreter differs from the correctly rounded tanh / logistic in 40-57 % / 47-50 % of the inputs (by the input
distribution; at most 2 ulp). Eigen built with SSE2 or AVX reproduces it exactly, AVX2+FMA does not.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from fusedrnn.numerics import eigen
from fusedrnn.targets.litert.reader import TensorInfo
from fusedrnn.targets.litert.writer import single_op_model

EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, 88.7, -88.7, 103.9, -104.0, -104.5, 9.0, -9.0,
         7.90738964, 7.9074, 8.0, 16.6355324, 16.64, 20.0]

HARNESS = r"""
#include <Eigen/Core>
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
  FILE* f = std::fopen(argv[1], "rb"); std::fseek(f, 0, SEEK_END); long n = std::ftell(f) / 4; std::rewind(f);
  float* x = (float*)std::aligned_alloc(64, n * 4); float* y = (float*)std::aligned_alloc(64, n * 4);
  if (std::fread(x, 4, n, f) != (size_t)n) return 1; std::fclose(f);
  Eigen::Map<Eigen::VectorXf> in(x, n), out(y, n);
  if (argv[2][0] == 't') out.array() = in.array().tanh(); else out.array() = in.array().logistic();
  f = std::fopen(argv[3], "wb"); std::fwrite(y, 4, n, f); std::fclose(f);
}
"""


def interpret(op: str, x: np.ndarray) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    n = x.size
    m = single_op_model(op, [TensorInfo(0, "x", "FLOAT32", (n,))], [TensorInfo(1, "y", "FLOAT32", (n,))], {})
    it = Interpreter(model_content=m, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def differ(a: np.ndarray, b: np.ndarray) -> int:
    return int((~((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b)))).sum())


def inputs(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    k = n // 6
    parts = [rng.normal(size=k) * s for s in (0.5, 2, 6, 20)] + [rng.uniform(-120, 120, k), np.linspace(-10, 10, k)]
    x = np.concatenate(parts + [np.array(EDGES)]).astype(np.float32)
    return np.concatenate([x, np.zeros(-x.size % 4, np.float32)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--eigen", type=Path, help="an Eigen checkout: also compile Eigen itself with several flags")
    ap.add_argument("--cxx", default="g++")
    a = ap.parse_args()
    x = inputs(a.n)
    fns = {"TANH": (eigen.tanh, lambda v: np.tanh(v.astype(np.float64))),
           "LOGISTIC": (eigen.logistic, lambda v: 1 / (1 + np.exp(-v.astype(np.float64))))}
    got = {}
    for op, (ours, exact) in fns.items():
        got[op] = interpret(op, x)
        with np.errstate(over="ignore"):
            cr = exact(x).astype(np.float32)
        print(f"{op}: {x.size} inputs, {differ(ours(x), got[op])} differ from numerics.eigen; "
              f"{differ(cr, got[op]) / x.size:.1%} differ from the correctly rounded value")
        for n in range(1, 10):
            rng = np.random.default_rng(n)
            bad = sum(differ(ours(v), interpret(op, v))
                      for v in ((rng.normal(size=n) * 4).astype(np.float32) for _ in range(50)))
            print(f"  length {n}: {bad} of {50 * n} differ")
    if a.eigen:
        with tempfile.TemporaryDirectory() as tmp:
            src, data = Path(tmp, "h.cc"), Path(tmp, "x.bin")
            src.write_text(HARNESS)
            x.tofile(data)
            for flags in ([], ["-mavx"], ["-mavx2", "-mfma"]):
                exe = Path(tmp, "h" + "".join(flags))
                subprocess.run([a.cxx, "-O3", "-DNDEBUG", *flags, f"-I{a.eigen}", str(src), "-o", str(exe)], check=True)
                for op, key in (("TANH", "t"), ("LOGISTIC", "l")):
                    out = Path(tmp, f"{key}.bin")
                    subprocess.run([str(exe), str(data), key, str(out)], check=True)
                    print(f"Eigen {' '.join(flags) or '(SSE2)'} {op}: "
                          f"{differ(np.fromfile(out, np.float32), got[op])} differ from the interpreter")


if __name__ == "__main__":
    main()

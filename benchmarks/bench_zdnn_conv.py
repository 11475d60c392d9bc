"""zDNN ``conv2d`` emulation vs PyTorch's float32 conv2d on the same problem, timed interleaved in one process.

Run from the repository root::

    python -m benchmarks.bench_zdnn_conv            # the issue's case: 1x56x56x64 input, 3x3x64x64 kernel
    python -m benchmarks.bench_zdnn_conv --quick    # fewer rounds
    python -m benchmarks.bench_zdnn_conv --threads 1

Timed in the same rounds (see ``benchmarks.common.interleaved_timing``):

* ``zdnn``  -- ``fusedrnn.zdnn.conv2d`` on transformed (stickified DLFLOAT16) input, kernel and bias ztensors,
  SAME padding, stride 1, into a transformed output ztensor: what a zDNN program calls, with DLFLOAT16 at the
  op's inputs and outputs;
* ``torch`` -- ``torch.nn.functional.conv2d`` in float32 on NCHW tensors prepared outside the timing.

The target (issue 9): ``zdnn`` within 3x of ``torch``. Exit status 1 when the paired median ratio misses it or the
two disagree by more than the DLFLOAT16 tolerance of zDNN's tests.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from .common import interleaved_timing, machine_facts, set_threads

TARGET = 3.0


def _ztensor(z, layout, dims, data=None):
    pre = z.init_pre_transformed_desc(layout, z.FP32, None, *dims)
    tf = z.TensorDesc()
    assert z.generate_transformed_desc(pre, tf) == z.ZDNN_OK
    t = z.ZTensor()
    assert z.init_ztensor_with_malloc(pre, tf, t) == z.ZDNN_OK
    if data is not None:
        assert z.transform_ztensor(t, data) == z.ZDNN_OK
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--threads", type=int, default=None, help="BLAS / torch threads (default: the library's)")
    ap.add_argument("--json", default=None, help="write the results to this file")
    args = ap.parse_args(argv)
    threads = set_threads(args.threads) if args.threads else "library default"

    import torch

    import fusedrnn.zdnn as z

    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    N, H, W, C, K = 1, 56, 56, 64, 64
    x = rng.normal(size=(N, H, W, C)).astype(np.float32)
    k = (rng.normal(size=(3, 3, C, K)) / np.sqrt(9 * C)).astype(np.float32)
    b = rng.normal(size=K).astype(np.float32)
    xi = _ztensor(z, z.ZDNN_NHWC, (N, H, W, C), x)
    ki = _ztensor(z, z.ZDNN_HWCK, (3, 3, C, K), k)
    bi = _ztensor(z, z.ZDNN_1D, (K,), b)
    out = _ztensor(z, z.ZDNN_NHWC, (N, H, W, K))

    def run_zdnn():
        status = z.conv2d(xi, ki, bi, z.SAME_PADDING, 1, 1, z.CONV2D_ACT_NONE, 0.0, out)
        assert status == z.ZDNN_OK, status

    xt = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()
    kt = torch.from_numpy(k).permute(3, 2, 0, 1).contiguous()
    bt = torch.from_numpy(b)

    def run_torch():
        with torch.no_grad():
            return torch.nn.functional.conv2d(xt, kt, bt, padding=1)

    run_zdnn()
    got = np.empty((N, H, W, K), np.float32)
    assert z.transform_origtensor(out, got) == z.ZDNN_OK
    ref = run_torch().permute(0, 2, 3, 1).numpy()
    err = float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref)))))
    timing = interleaved_timing({"zdnn": run_zdnn, "torch": run_torch}, min_rounds=5 if args.quick else 15,
                                max_rounds=10 if args.quick else 40, budget_s=5 if args.quick else 20)
    ratio = timing.paired_ratio("zdnn", "torch")
    zs, ts = timing.summary("zdnn"), timing.summary("torch")
    print(f"conv2d 1x56x56x64 * 3x3x64x64 SAME, threads: {threads}")
    print(f"  zdnn  median {zs['median_ms']:.2f} ms (min {zs['min_ms']:.2f})")
    print(f"  torch median {ts['median_ms']:.2f} ms (min {ts['min_ms']:.2f})")
    print(f"  zdnn / torch (paired median) {ratio:.2f}x  [target <= {TARGET}x]; max rel |zdnn - torch| {err:.1e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine_facts(), "threads": threads, "zdnn": zs, "torch": ts, "ratio": ratio,
                       "max_rel_diff": err}, f, indent=2)
    ok = ratio <= TARGET and err < 2e-2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

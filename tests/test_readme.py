"""The README's Python examples run as written, and its quoted messages are the ones the code produces."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import PROJECT_ROOT

import fusedrnn

README = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
PACKAGE_PARENT = Path(fusedrnn.__file__).resolve().parents[1]
"""Where the fusedrnn under test lives (the checkout's src/, or site-packages when installed): the blocks' own
interpreters import the same package, with the same compiled kernels."""


_EPILOGUE = """
import json as _json, numpy as _np
print("\\n__NAMES__" + _json.dumps({k: list(_np.shape(v)) for k, v in dict(globals()).items()
                                     if k in ("Y", "W", "W_torch")}))
"""


def _run_block(block: str, folder) -> tuple[str, dict]:
    """``block`` alone in a fresh interpreter (no KERAS_BACKEND set: the Keras blocks set their own); returns
    its stdout and the shapes of the names the test looks at."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_PARENT), env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", block + _EPILOGUE], capture_output=True, text=True, cwd=folder,
                         env=env, timeout=600)
    assert res.returncode == 0, f"README block failed on its own:\n{block}\n{res.stderr[-3000:]}"
    out, _, names = res.stdout.rpartition("\n__NAMES__")
    return out, json.loads(names)


def test_readme_python_blocks_run(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("keras")
    pytest.importorskip("ai_edge_litert")
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 3
    folders = []
    for k in range(len(blocks)):  # the examples write files: each in a folder of its own
        folders.append(tmp_path / f"block{k}")
        folders[-1].mkdir()
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 2)) as pool:
        ran = list(pool.map(_run_block, blocks, folders))
    printed = "".join(out for out, _ in ran)
    names = {k: v for _, n in ran for k, v in n.items()}
    assert names["Y"] == [20, 2, 4, 32]
    assert "Keras LSTM cannot express: projection (proj_W)" in printed
    assert names["W_torch"] == names["W"]
    # the outputs the README quotes next to the examples
    for quoted in ("mli2-sa8   max |Δ| = 5.21e-02", "zdnn       max |Δ| = 1.11e-03", "MLI_STATUS_OK [-52  11]",
                   "MLI_STATUS_OK False", "MLI_STATUS_OK 344 [-32767 -32767]", "MLI_STATUS_BAD_FUNC_CFG",
                   "MLI_STATUS_OK [-3 -3]",
                   "ZDNN_OK 4096", "000037333933", "int8x16 vs fp32: 0.018", "max |error| 9.47e-05",
                   "max |int8 model - Keras| = 0.004876353", "Int8Inputs max |Δ| = 8.97e-03",
                   "rounded ran; compiled declined: rounding policy 'bf16' (the kernel computes EXACT only)",
                   "int8 outputs that differ, LiteRT vs TFLM: 11.0%\nCMSIS-NN == TFLM reference kernel: True\n"
                   "True True",
                   "PreparedExtendedLSTM(input_size=8, hidden_size=16, num_directions=2, mode='faithful')\nTrue",
                   "Model(ops=[UNIDIRECTIONAL_SEQUENCE_LSTM[integer], STRIDED_SLICE], inputs=[x int8 (4, 20, 12)])"):
        assert quoted in printed, quoted
        assert quoted in README, quoted


def test_readme_keras_blocks_set_their_backend():
    for block in re.findall(r"```python\n(.*?)```", README, re.S):
        if re.search(r"^import keras|to_keras\(|from_keras\(", block, re.M):
            assert 'os.environ.setdefault("KERAS_BACKEND"' in block.split("import keras")[0], block[:200]


def test_readme_bench_only_in_a_source_checkout():
    """The README shows ``fusedrnn bench`` as a source-checkout command, as the CLI lists it."""
    for line in README.splitlines():
        if "fusedrnn bench" in line and line.lstrip().startswith(("$", "fusedrnn bench")):
            assert "checkout" in README[max(0, README.index(line) - 600): README.index(line) + 600], line


def test_readme_quoted_error_message():
    import fusedrnn

    quoted = re.search(r"^W: expected shape .*$", README, re.M).group(0)
    with pytest.raises(fusedrnn.ShapeError) as err:
        fusedrnn.ops.lstm(np.zeros((5, 2, 16), np.float32), np.zeros((1, 128, 16), np.float32),
                          np.zeros((1, 128, 32), np.float32), direction="bidirectional")
    assert str(err.value) == quoted

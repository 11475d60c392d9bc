"""The README's Python examples run as written, and its quoted messages are the ones the code produces."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest
from conftest import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("keras")
    pytest.importorskip("ai_edge_litert")
    monkeypatch.chdir(tmp_path)  # the examples write files
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 3
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own examples
    assert namespace["Y"].shape == (20, 2, 4, 32)
    assert "Keras LSTM cannot express: projection (proj_W)" in out.getvalue()
    assert namespace["W_torch"].shape == namespace["W"].shape
    printed = out.getvalue()
    # the outputs the README quotes next to the examples
    for quoted in ("mli2-sa8   max |Δ| = 5.21e-02", "zdnn       max |Δ| = 1.11e-03", "MLI_STATUS_OK [-52  11]",
                   "MLI_STATUS_OK False", "MLI_STATUS_OK 344 [-32767 -32767]", "MLI_STATUS_BAD_FUNC_CFG",
                   "MLI_STATUS_OK [-3 -3]",
                   "ZDNN_OK 4096", "000037333933", "int8x16 vs fp32: 0.011", "max |error| 6.02e-05",
                   "max |int8 model - Keras| = 0.004898186773061752", "Int8Inputs max |Δ| = 8.97e-03",
                   "rounded ran; compiled declined: rounding policy 'bf16' (the kernel computes EXACT only)",
                   "int8 outputs that differ, LiteRT vs TFLM: 11.0%\nCMSIS-NN == TFLM reference kernel: True\n"
                   "True True",
                   "PreparedExtendedLSTM(input_size=8, hidden_size=16, num_directions=2, mode='faithful')\nTrue",
                   "Model(ops=[UNIDIRECTIONAL_SEQUENCE_LSTM[integer], STRIDED_SLICE], inputs=[x int8 (4, 20, 12)])"):
        assert quoted in printed, quoted
        assert quoted in README, quoted


def test_readme_quoted_error_message():
    import fusedrnn

    quoted = re.search(r"^W: expected shape .*$", README, re.M).group(0)
    with pytest.raises(fusedrnn.ShapeError) as err:
        fusedrnn.ops.lstm(np.zeros((5, 2, 16), np.float32), np.zeros((1, 128, 16), np.float32),
                          np.zeros((1, 128, 32), np.float32), direction="bidirectional")
    assert str(err.value) == quoted

"""Reader for the MLI 2.0 conformance cases (``shared/conformance/mli``, format in its README): builds the MLI
tensors of a case from the exact container bytes the upstream CRC hashes, runs the case's function and
computes the upstream CRC32 of inputs and outputs."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .config import (
    ElType,
    FullyConnectedCfg,
    ReluCfg,
    ReluType,
    RnnAct,
    RnnCellCfg,
    RnnDenseCfg,
    RnnDirection,
    RnnResults,
)
from .luts import make_lut
from .tensors import EL_DTYPE, Tensor, dense_strides


@dataclass
class Case:
    stem: str
    meta: dict
    arrays: dict
    expected: dict
    tensors: dict = field(default_factory=dict)

    @property
    def function(self) -> str:
        return self.meta["function"]

    @property
    def kernel(self) -> str:
        return self.meta["kernel"]


def _tensor(op: dict, arrays: dict) -> Tensor:
    et = ElType[op["el_type"]]
    role = op["role"]
    dt = EL_DTYPE[et].newbyteorder("<")
    if f"{role}__crc_image" in arrays:
        data = np.frombuffer(arrays[f"{role}__crc_image"].tobytes(), dtype=dt).astype(EL_DTYPE[et])
        stride = op["mem_stride"]
    else:  # outputs and the LSTM cell: dense
        data = np.ascontiguousarray(arrays[f"{role}__q"]).ravel().astype(EL_DTYPE[et]).copy()
        stride = None
    kw = {}
    if et in (ElType.MLI_EL_FX_8, ElType.MLI_EL_FX_16):
        kw["frac_bits"] = op["frac_bits"]
    else:
        kw.update(scale=op["scale_int16"], zero_point=op["zero_point_int16"], scale_frac_bits=op["scale_frac_bits"],
                  dim=op["dim"])
    return Tensor(data.copy(), op["shape"], el_type=et, mem_stride=stride, **kw)


def load_case(folder: Path, stem: str) -> Case:
    folder = Path(folder)
    meta = json.loads((folder / f"{stem}.json").read_text())
    arrays = dict(np.load(folder / f"{stem}.npz"))
    expected = dict(np.load(folder / "expected" / f"{stem}.npz"))
    case = Case(stem, meta, arrays, expected)
    for op in meta["operands"]:
        case.tensors[op["role"]] = _tensor(op, arrays)
    return case


def cfg_of(case: Case):
    c = case.meta["cfg"]
    if c["type"] == "mli_fully_connected_cfg":
        return FullyConnectedCfg(ReluCfg(ReluType[c["relu"]]))
    if c["type"] == "mli_rnn_dense_cfg":
        return RnnDenseCfg(int(c["inputs_num"]))
    return RnnCellCfg(RnnDirection[c["direction"]], RnnResults[c["results"]], RnnAct[c["act"]])


def run_case(case: Case, api) -> tuple[int, dict]:
    """Run the case's function from module ``api`` on fresh copies of its tensors; returns (status, outputs)
    with outputs {"out": array[, "cell": array]} in the expected shapes."""
    t = {k: v.copy() for k, v in case.tensors.items()}
    fn = getattr(api, case.function.removeprefix("mli_"))
    cfg = cfg_of(case)
    out = t["out"]
    shape = list(case.expected["out__UP"].shape)  # the test harness's output descriptor: the expected shape, dense
    out.shape, out.rank, out.mem_stride = shape, len(shape), dense_strides(shape)
    if case.kernel == "mli_krn_fully_connected":
        st = fn(t["in"], t["weights"], t["bias"], cfg, out)
    elif case.kernel == "mli_krn_rnn_dense":
        n = cfg.inputs_num
        st = fn([t[f"in{i}"] for i in range(n)], [t[f"weights{i}"] for i in range(n)], t["bias"], cfg, out)
    else:
        tanh, sigm = make_lut("tanh"), make_lut("sigm")
        ins = t["in"]  # MLI's test harness hands the cell a scratch of 4 (LSTM) or 3 (GRU) outputs' elements
        cfg.scratch_data = np.zeros(4 * t["weights_out"].dims[-1], ins.mem.dtype)
        args = [t["in"], t["prev_out"], t["weights_in"], t["weights_out"], t["bias"], tanh, sigm, cfg]
        st = fn(*args, t["cell"], out) if case.kernel == "mli_krn_lstm_cell" else fn(*args, out)
    res = {"out": out.values().astype(out.mem.dtype)}
    if "cell" in t:
        res["cell"] = t["cell"].values().astype(t["cell"].mem.dtype)
    return int(st), res


def le_bytes(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()


def crc_of_inputs(case: Case) -> int:
    crc = 0
    for role in case.meta["crc_prefix_roles"]:
        crc = zlib.crc32(case.arrays[f"{role}__crc_image"].tobytes(), crc)
    return crc


def crc_of_outputs(case: Case, outputs: dict) -> int:
    """The upstream checksum: input containers, then (LSTM: the cell after the run, then) the output."""
    tail = (le_bytes(outputs["cell"]) if "cell" in outputs else b"") + le_bytes(outputs["out"])
    return zlib.crc32(tail, case.meta["crc32_prefix_over_inputs"])


def index(folder: Path) -> list[dict]:
    return json.loads((Path(folder) / "index.json").read_text())["cases"]

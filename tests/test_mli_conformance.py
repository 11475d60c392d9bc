"""MLI 2.0 conformance: the 86 upstream user-test cases (FC, rnn_dense, LSTM, GRU) bit-exact in both ROUND_MODEs
and both FULL_ACCU settings, with the upstream CRC32 reproduced over the input containers and our outputs."""

import json

import numpy as np
import pytest
from conftest import shared_dir

import fusedrnn.mli as mli
from fusedrnn.targets.mli import _compiled
from fusedrnn.targets.mli import conformance as C


@pytest.fixture(scope="module")
def folder():
    return shared_dir("conformance", "mli")


def _stems():
    try:
        from conftest import SHARED

        return [c["stem"] for c in json.loads((SHARED / "conformance" / "mli" / "index.json").read_text())["cases"]]
    except OSError:
        return ["missing"]


def _engine_cases():
    """Every case with the default engine; the LSTM / GRU cases also with the NumPy loop forced (the default is
    the compiled loop when it builds)."""
    return [(s, "auto") for s in _stems()] + [(s, "numpy") for s in _stems() if "lstm" in s or "gru" in s]


@pytest.mark.parametrize(("stem", "engine"), _engine_cases())
def test_case_bit_exact_and_crc(folder, stem, engine):
    with _compiled.use_engine(engine):
        _check_case(folder, stem)


def test_compiled_kernel_builds_here():
    """Where a C compiler exists the compiled loop must load (else the conformance run above tested NumPy twice)."""
    import os
    import shutil

    if not any(shutil.which(c) for c in ("cc", "gcc", "clang")) or os.environ.get("FUSEDRNN_COMPILED") == "0":
        pytest.skip("no C compiler, or the compiled kernels are disabled")
    assert _compiled.load() is not None, _compiled.unavailable_reason()


def _check_case(folder, stem):
    case = C.load_case(folder, stem)
    # the containers rebuilt from the CRC images hold exactly the harness-quantized inputs
    for role, t in case.tensors.items():
        if f"{role}__crc_image" in case.arrays:
            np.testing.assert_array_equal(t.values(), case.arrays[f"{role}__q"])
    assert C.crc_of_inputs(case) == case.meta["crc32_prefix_over_inputs"]
    for rm in ("UP", "CONVERGENT"):
        for full_accu in (False, True):
            with mli.build(rm, full_accu):
                status, res = C.run_case(case, mli)
            assert status == mli.MLI_STATUS_OK
            for k, v in res.items():
                exp = case.expected[f"{k}__{rm}"]
                assert v.dtype == exp.dtype and v.shape == exp.shape, (k, v.shape, exp.shape)
                np.testing.assert_array_equal(v, exp, err_msg=f"{stem} {rm} FULL_ACCU={full_accu} {k}")
            assert C.crc_of_outputs(case, res) == case.meta["expected_crc32"][f"ROUND_MODE_{rm}"]


def test_snr_gate(folder):
    """The upstream quality gate on one case per kernel family (dequantized output vs the float reference)."""
    for stem in ("mli_krn_lstm_cell__09_Test_3_SA8_SA32_StS_ALL_Forw", "mli_krn_gru_cell__03_Test_3_FX16_StS_ALL_Forw",
                 "mli_krn_fully_connected__03_Test_1_SA8_SA8_SA32"):
        case = C.load_case(folder, stem)
        _, res = C.run_case(case, mli)
        out = case.tensors["out"]
        q = res["out"].astype(np.float32)
        if out.is_fx:
            pred = np.ldexp(q, -out.frac_bits)
        else:
            pred = (q - out.zero_point[0]) * np.ldexp(np.float32(out.scale[0]), -int(out.scale_frac_bits[0]))
        ref = case.arrays["out__float"].reshape(pred.shape)
        snr = 10 * np.log10((np.sum(ref**2) + 1e-18) / (np.sum((ref - pred) ** 2) + 1e-18))
        assert snr >= case.meta["thresholds"]["snr_db_min"], (stem, snr)

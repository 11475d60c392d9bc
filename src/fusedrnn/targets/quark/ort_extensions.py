"""Run ExtendedLSTM models in onnxruntime with fusedrnn's kernel, through onnxruntime-extensions' Python ops.

::

    from fusedrnn.quark import onnxruntime_session
    sess = onnxruntime_session("model.onnx")           # registers the ops, then opens the session
    y, = sess.run(None, {"X": x})

onnxruntime-extensions hands float attributes to Python as strings with about 6 significant digits, which
would break bit-exactness, so :func:`onnxruntime_session` reads every ExtendedLSTM node's exact attributes from
the model proto and the op looks them up (two nodes whose scales agree to 6 digits but differ are refused).
Its other pitfalls (quark.md section 6): declarations are process-global and must precede the first session
that registers the extensions library (a later declaration has crashed the process), so call
:func:`declare_ops` early when other code also uses onnxruntime-extensions; results cross the bridge as Python
lists (about 70 ns per output element).
"""

from __future__ import annotations

import math

from ...errors import AttributeValueError, UnsupportedFeatureError
from .onnx_op import OPS, SCALE_ATTRIBUTES, is_extended_lstm, load_model, node_attributes, op_arguments
from .op import MODES, extended_lstm

_REL_TOL = 1e-5  # 6 significant digits
_NODES: list[tuple[dict, str]] = []  # (exact attributes, mode) of every node of every session opened here
_declared = False


def available() -> bool:
    """Whether onnxruntime and onnxruntime-extensions are importable."""
    try:
        import onnxruntime  # noqa: F401
        import onnxruntime_extensions  # noqa: F401
    except ImportError:
        return False
    return True


def _close(exact: dict, approx: dict) -> bool:
    for k, v in approx.items():
        e = exact.get(k)
        if isinstance(v, float):
            if e is None or not math.isclose(float(e), v, rel_tol=_REL_TOL, abs_tol=0.0):
                return False
        elif k != "direction" and e is not None and e != v:
            return False
    return True


def _compute(X, W, R, B, **attrs):
    found = [(exact, mode) for exact, mode in _NODES if _close(exact, attrs)]
    if not found:
        raise UnsupportedFeatureError("ExtendedLSTM: this node's attributes were not registered; open the session "
                                      "with fusedrnn.quark.onnxruntime_session(model)")
    exact, mode = found[-1]
    return extended_lstm(X, W, R, B, mode=mode, **op_arguments(exact))


def declare_ops() -> None:
    """Declare ExtendedLSTM and VitisLSTM as onnxruntime-extensions Python ops (once per process; before the
    first InferenceSession that registers the extensions library)."""
    global _declared
    if _declared:
        return
    from onnxruntime_extensions import PyCustomOpDef, onnx_op

    attrs = {"hidden_size": PyCustomOpDef.dt_int64, "direction": PyCustomOpDef.dt_string,
             "layout": PyCustomOpDef.dt_int64}
    for n in SCALE_ATTRIBUTES:
        attrs[n] = PyCustomOpDef.dt_float if n.endswith("scale") else PyCustomOpDef.dt_int64
    for domain, op_type in OPS:
        onnx_op(op_type=f"{domain}::{op_type}", inputs=[PyCustomOpDef.dt_float] * 4,
                outputs=[PyCustomOpDef.dt_float], attrs=attrs)(_compute)
    _declared = True


def has_sessions() -> bool:
    """Whether this module's Python ops are declared and a model's nodes were registered for a session (after
    which declaring more onnxruntime-extensions Python ops can crash that session)."""
    return _declared and bool(_NODES)


def register_model(model, mode: str = "faithful") -> None:
    """Record the exact attributes of the model's ExtendedLSTM nodes for the Python op to use."""
    if mode not in MODES:
        raise AttributeValueError(f"mode: expected one of {MODES}, got {mode!r}")
    proto = load_model(model)
    for node in proto.graph.node:
        if not is_extended_lstm(node):
            continue
        exact = node_attributes(node)
        op_arguments(exact)  # raises on missing attributes
        approx = {k: (float(f"{v:.6g}") if isinstance(v, float) else v) for k, v in exact.items()}
        for other, _ in _NODES:
            if other != exact and _close(other, approx):
                raise UnsupportedFeatureError(
                    f"{node.op_type} {node.name!r}: its scales equal another registered node's to 6 significant "
                    f"digits but differ; onnxruntime-extensions cannot tell them apart")
        _NODES[:] = [(e, m) for e, m in _NODES if e != exact] + [(exact, mode)]


def onnxruntime_session(model, *, mode: str = "faithful", sess_options=None, providers=None):
    """An ``onnxruntime.InferenceSession`` for a model holding ExtendedLSTM / VitisLSTM nodes, which run
    fusedrnn's kernel in ``mode`` through onnxruntime-extensions (needs ``pip install onnxruntime-extensions``)."""
    if not available():
        raise UnsupportedFeatureError("onnxruntime_session: needs onnxruntime and onnxruntime-extensions "
                                      "(pip install onnxruntime-extensions)")
    import onnxruntime as ort
    from onnxruntime_extensions import get_library_path

    proto = load_model(model)
    register_model(proto, mode)
    declare_ops()
    so = sess_options if sess_options is not None else ort.SessionOptions()
    so.register_custom_ops_library(get_library_path())
    return ort.InferenceSession(proto.SerializeToString(), so, providers=providers or ["CPUExecutionProvider"])

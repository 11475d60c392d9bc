"""The non-recurrent ops of ``litert.load`` graphs (``fusedrnn.targets.litert.graph_ops``) against the LiteRT
interpreter: randomized one-op models written with fusedrnn's writer, integer outputs compared with ``==`` (and
``model.delegated`` empty, so fusedrnn's kernel computed them, not the interpreter); ops fusedrnn does not
compute run on the interpreter, or raise an error naming the op when it is not installed."""

from __future__ import annotations

import sys
import zlib

import numpy as np
import pytest

interp = pytest.importorskip("ai_edge_litert.interpreter")

from fusedrnn import litert  # noqa: E402
from fusedrnn.errors import FileFormatError, UnsupportedFeatureError  # noqa: E402
from fusedrnn.targets.litert.slots import const  # noqa: E402

N_CASES = 20  # random configurations per op family
ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
_TYPES = {np.dtype(np.int8): "INT8", np.dtype(np.int16): "INT16", np.dtype(np.float32): "FLOAT32",
          np.dtype(np.int32): "INT32", np.dtype(np.int64): "INT64", np.dtype(np.uint8): "UINT8"}


def interpreter_outputs(content: bytes, xs: list[np.ndarray]) -> list[np.ndarray]:
    it = interp.Interpreter(model_content=content,
                            experimental_op_resolver_type=interp.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), xs, strict=True):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def act(name: str, shape, dtype, q=None):
    """A graph input / output tensor (no data) of ``dtype`` with quantization ``q`` = (scale, zero point)."""
    s, z = q if q is not None else (None, None)
    return const(name, None, s, z, type_name=_TYPES[np.dtype(dtype)], shape=tuple(shape))


def check(op: str, inputs, outputs, options, xs, *, version: int = 1, native: bool = True, rtol: float = 0.0):
    """Run the one-op model on fusedrnn and on the interpreter; outputs equal (floats within ``rtol``)."""
    content = litert.single_op_model(op, inputs, outputs, options, version=version)
    model = litert.load(content)
    ours = model(*xs)
    ours = list(ours) if isinstance(ours, tuple) else [ours]
    ref = interpreter_outputs(content, xs)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, (op, a.dtype, b.dtype, a.shape, b.shape)
        if rtol and a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, err_msg=op)
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{op} {options}")
    assert (model.delegated == set()) == native, (op, model.delegated)
    return ours


def _q(rng, shape, dtype=np.int8):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)


def _qp(rng, dtype=np.int8, lo=0.002, hi=0.2):
    s = float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))
    z = 0 if dtype == np.int16 else int(rng.integers(-100, 100))
    return s, z


def _shapes(rng):
    shape = tuple(int(v) for v in rng.integers(1, 6, size=int(rng.integers(1, 4))))
    other = shape if rng.random() < 0.6 else (shape[-1],) if rng.random() < 0.5 else (1,) * len(shape)
    if rng.random() < 0.5:
        shape, other = other, shape
    return shape, other, np.broadcast_shapes(shape, other)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.float32], ids=["int8", "int16", "float"])
def test_elementwise_arithmetic(op, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{op} {np.dtype(dtype).name}".encode()))
    for _ in range(N_CASES):
        sa, sb, so = _shapes(rng)
        a_name = "FLOAT32" if dtype == np.float32 else None
        opts = {"fused_activation_function": ACTS[int(rng.integers(len(ACTS)))]}
        if dtype == np.float32:
            xs = [rng.normal(size=sa).astype(np.float32), rng.normal(size=sb).astype(np.float32)]
            ins = [act("a", sa, dtype), act("b", sb, dtype)]
            out = [act("y", so, dtype)]
        else:
            qa, qb, qo = _qp(rng, dtype), _qp(rng, dtype), _qp(rng, dtype)
            if op == "MUL":
                qo = (float(np.float32(qa[0] * qb[0] * rng.uniform(20, 200))), qo[1])
            if dtype == np.int16 and op != "MUL":
                opts["pot_scale_int16"] = bool(rng.random() < 0.5)  # scales are not powers of two: general kernel
            xs = [_q(rng, sa, dtype), _q(rng, sb, dtype)]
            ins = [act("a", sa, dtype, qa), act("b", sb, dtype, qb)]
            out = [act("y", so, dtype, qo)]
        del a_name
        version = {np.dtype(np.int8): 2, np.dtype(np.int16): 3 if op != "MUL" else 4}.get(np.dtype(dtype), 1)
        check(op, ins, out, opts, xs, version=version)


@pytest.mark.parametrize("kind", ["int8", "int8_per_channel", "int16x8", "float"])
def test_fully_connected(kind):
    rng = np.random.default_rng({"int8": 1, "int8_per_channel": 2, "int16x8": 3, "float": 4}[kind])
    for _ in range(N_CASES):
        B, T, depth, units = (int(v) for v in rng.integers(1, 7, size=4))
        depth *= 5
        keep = bool(rng.random() < 0.5)
        opts = {"fused_activation_function": ACTS[int(rng.integers(len(ACTS)))], "keep_num_dims": keep}
        out_shape = (B, T, units) if keep else (B * T, units)
        if kind == "float":
            w = rng.normal(size=(units, depth)).astype(np.float32)
            ins = [act("x", (B, T, depth), np.float32), const("w", w), const("b", rng.normal(size=units)
                                                                             .astype(np.float32))]
            check("FULLY_CONNECTED", ins, [act("y", out_shape, np.float32)], opts,
                  [rng.normal(size=(B, T, depth)).astype(np.float32)], rtol=1e-5)
            continue
        dx = np.int16 if kind == "int16x8" else np.int8
        qx = _qp(rng, dx)
        w = _q(rng, (units, depth))
        w[w == -128] = -127
        per_channel = kind != "int8"
        ws = (np.exp(rng.uniform(np.log(0.002), np.log(0.05), size=units if per_channel else 1))
              .astype(np.float32))
        wt = const("w", w, ws, np.zeros(ws.size, np.int64))
        if per_channel:
            from dataclasses import replace

            wt = replace(wt, quantized_dimension=0)
        bias_dtype = np.int64 if kind == "int16x8" else np.int32
        bs = np.float32(qx[0]) * ws
        bias = const("b", rng.integers(-5000, 5000, size=units).astype(bias_dtype), bs, np.zeros(ws.size, np.int64))
        if per_channel:
            from dataclasses import replace

            bias = replace(bias, quantized_dimension=0)
        so = float(np.float32(qx[0] * float(ws.max()) * np.sqrt(depth) * rng.uniform(20, 120)))
        qo = (so, 0 if dx == np.int16 else int(rng.integers(-50, 50)))
        ins = [act("x", (B, T, depth), dx, qx), wt, bias if rng.random() < 0.8 else None]
        version = {"int8": 4, "int8_per_channel": 4, "int16x8": 7}[kind]
        check("FULLY_CONNECTED", ins, [act("y", out_shape, dx, qo)], opts, [_q(rng, (B, T, depth), dx)],
              version=version)


@pytest.mark.parametrize("op", ["SOFTMAX", "TANH", "LOGISTIC"])
def test_activations(op):
    rng = np.random.default_rng({"SOFTMAX": 5, "TANH": 6, "LOGISTIC": 7}[op])
    for k in range(N_CASES):
        shape = tuple(int(v) for v in rng.integers(1, 9, size=int(rng.integers(1, 4))))
        qx = _qp(rng, np.int8, 0.01, 0.5)
        qo = {"SOFTMAX": (1 / 256, -128), "TANH": (1 / 128, 0), "LOGISTIC": (1 / 256, -128)}[op]
        opts = {"beta": float(rng.choice([1.0, 1.0, 0.5, 2.0]))} if op == "SOFTMAX" else {}
        check(op, [act("x", shape, np.int8, qx)], [act("y", shape, np.int8, qo)], opts, [_q(rng, shape)],
              version=2)
        if k < 3:
            check(op, [act("x", shape, np.float32)], [act("y", shape, np.float32)], opts,
                  [(rng.normal(size=shape) * 3).astype(np.float32)], rtol=2e-6 if op == "SOFTMAX" else 0.0)


def test_quantize_and_dequantize():
    rng = np.random.default_rng(8)
    for _ in range(N_CASES):
        shape = tuple(int(v) for v in rng.integers(1, 12, size=int(rng.integers(1, 4))))
        for dt in (np.int8, np.int16):
            q = _qp(rng, dt)
            if rng.random() < 0.5:  # a power-of-two scale: half-way values are exact ties
                q = (2.0 ** -int(rng.integers(3, 9)), q[1])
                x = ((rng.integers(-300, 300, size=shape) + 0.5) * q[0]).astype(np.float32)
            else:
                x = (rng.normal(size=shape) * 200 * q[0]).astype(np.float32)
            check("QUANTIZE", [act("x", shape, np.float32)], [act("y", shape, dt, q)], {}, [x],
                  version=2 if dt == np.int8 else 4)
            check("DEQUANTIZE", [act("x", shape, dt, q)], [act("y", shape, np.float32)], {}, [_q(rng, shape, dt)],
                  version=2 if dt == np.int8 else 4)
        for src, dst in ((np.int8, np.int8), (np.int16, np.int8), (np.int8, np.int16), (np.int16, np.int16)):
            qi, qo = _qp(rng, src), _qp(rng, dst)
            check("QUANTIZE", [act("x", shape, src, qi)], [act("y", shape, dst, qo)], {}, [_q(rng, shape, src)],
                  version=4)


def test_data_movement():
    rng = np.random.default_rng(9)
    for _ in range(N_CASES):
        dt = [np.int8, np.float32][int(rng.integers(2))]
        q = _qp(rng) if dt == np.int8 else None
        shape = tuple(int(v) for v in rng.integers(1, 6, size=3))

        def x(sh=shape, dt=dt):
            return _q(rng, sh) if dt == np.int8 else rng.normal(size=sh).astype(np.float32)

        ax = int(rng.integers(-3, 3))
        a = ax % 3
        cat = tuple(s * 2 if d == a else s for d, s in enumerate(shape))
        check("CONCATENATION", [act("a", shape, dt, q), act("b", shape, dt, q)], [act("y", cat, dt, q)],
              {"axis": ax, "fused_activation_function": "NONE"}, [x(), x()])
        first = int(rng.integers(0, 3))  # the interpreter takes contiguous axes only
        axes = np.arange(first, int(rng.integers(first + 1, 4)), dtype=np.int32)
        check("REVERSE_V2", [act("x", shape, dt, q), const("axes", axes)], [act("y", shape, dt, q)], {}, [x()])
        begin = np.array([int(rng.integers(0, s)) for s in shape], np.int32)
        size = np.array([int(rng.integers(1, s - b + 1)) if rng.random() < 0.7 else -1
                         for s, b in zip(shape, begin, strict=True)], np.int32)
        out = tuple(int(s - b) if z < 0 else int(z) for s, b, z in zip(shape, begin, size, strict=True))
        check("SLICE", [act("x", shape, dt, q), const("begin", begin), const("size", size)],
              [act("y", out, dt, q)], {}, [x()])
        perm = rng.permutation(3).astype(np.int32)
        check("TRANSPOSE", [act("x", shape, dt, q), const("perm", perm)],
              [act("y", tuple(shape[p] for p in perm), dt, q)], {}, [x()])
        new = (int(np.prod(shape)),) if rng.random() < 0.5 else (shape[0], -1)
        out = (int(np.prod(shape)),) if len(new) == 1 else (shape[0], int(np.prod(shape[1:])))
        check("RESHAPE", [act("x", shape, dt, q), const("shape", np.array(new, np.int32))], [act("y", out, dt, q)],
              {}, [x()])
        check("EXPAND_DIMS", [act("x", shape, dt, q), const("axis", np.array([ax], np.int32))],
              [act("y", np.expand_dims(np.zeros(shape), ax % 4 if ax >= 0 else ax).shape, dt, q)], {}, [x()])
        sq = shape[:1] + (1,) + shape[1:]
        check("SQUEEZE", [act("x", sq, dt, q)], [act("y", shape, dt, q)], {"squeeze_dims": [1]}, [x(sq)])
        n = int(rng.integers(1, 4))
        sp = tuple(s * n if d == a else s for d, s in enumerate(shape))
        check("SPLIT", [const("axis", np.array(ax, np.int32)), act("x", sp, dt, q)], [act(f"y{k}", shape, dt, q)
              for k in range(n)], {"num_splits": n}, [x(sp)])
        sizes = [shape[a], sp[a] - shape[a]] if n > 1 else [sp[a]]
        outs = [act(f"y{k}", tuple(z if d == a else s for d, s in enumerate(shape)), dt, q)
                for k, z in enumerate(sizes)]
        check("SPLIT_V", [act("x", sp, dt, q), const("sizes", np.array(sizes, np.int32)),
                          const("axis", np.array(ax, np.int32))], outs, {"num_splits": len(sizes)}, [x(sp)])
        pk = np.stack([np.zeros(shape)] * 2, axis=a).shape
        check("PACK", [act("a", shape, dt, q), act("b", shape, dt, q)], [act("y", pk, dt, q)],
              {"values_count": 2, "axis": a}, [x(), x()])
        check("UNPACK", [act("x", shape, dt, q)],
              [act(f"y{k}", shape[:a] + shape[a + 1:], dt, q) for k in range(shape[a])], {"num": shape[a], "axis": a},
              [x()])
        idx = rng.integers(0, shape[a], size=int(rng.integers(1, 5))).astype(np.int32)
        gshape = shape[:a] + (idx.size,) + shape[a + 1:]
        check("GATHER", [act("x", shape, dt, q), const("idx", idx)], [act("y", gshape, dt, q)], {"axis": a}, [x()])
        # STRIDED_SLICE over begin / end / strides and masks
        b = np.array([int(rng.integers(-s, s)) for s in shape], np.int32)
        e = np.array([int(rng.integers(-s, s + 1)) for s in shape], np.int32)
        st = np.array([int(rng.choice([1, 1, 2, -1])) for _ in shape], np.int32)
        opts = {"begin_mask": int(rng.integers(8)), "end_mask": int(rng.integers(8)),
                "shrink_axis_mask": int(rng.integers(8)) if rng.random() < 0.3 else 0}
        st = np.where((opts["shrink_axis_mask"] >> np.arange(3)) & 1, 1, st).astype(np.int32)  # shrunk: stride 1
        ref = np.zeros(shape)
        sl = []
        for d in range(3):
            bb = None if opts["begin_mask"] >> d & 1 else int(b[d])
            if opts["shrink_axis_mask"] >> d & 1:
                sl.append(bb if bb is not None else 0)
            else:
                sl.append(slice(bb, None if opts["end_mask"] >> d & 1 else int(e[d]), int(st[d])))
        try:
            out = ref[tuple(sl)].shape
        except IndexError:
            continue
        if 0 in out:
            continue
        check("STRIDED_SLICE", [act("x", shape, dt, q), const("b", b), const("e", e), const("s", st)],
              [act("y", out, dt, q)], opts, [x()], version=2 if dt == np.int8 else 1)


def test_ops_fusedrnn_does_not_compute_run_on_the_interpreter(monkeypatch):
    rng = np.random.default_rng(10)
    shape = (2, 3, 4)
    q = (0.05, 3)
    ins = [act("x", shape, np.int8, q), const("axes", np.array([1], np.int32))]
    out = [act("y", (2, 1, 4), np.int8, (0.04, -2))]
    xs = [_q(rng, shape)]
    check("MEAN", ins, out, {"keep_dims": True}, xs, version=2, native=False)  # integer MEAN: the interpreter's
    content = litert.single_op_model("MEAN", ins, out, {"keep_dims": True}, version=2)
    model = litert.load(content)
    assert model.delegated == set()
    model(*xs)
    assert model.delegated == {"MEAN"}
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)  # as if the package were not installed
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)
    with pytest.raises(UnsupportedFeatureError, match=r"op 0 \(MEAN\).*int8 MEAN|op 0 \(MEAN\).*INT8 MEAN"):
        litert.load(content)(*xs)


def test_concatenation_of_differently_quantized_int8_is_refused_as_the_interpreter_does():
    shape = (2, 3)
    ins = [act("a", shape, np.int8, (0.1, 0)), act("b", shape, np.int8, (0.2, 0))]
    content = litert.single_op_model("CONCATENATION", ins, [act("y", (2, 6), np.int8, (0.1, 0))],
                                     {"axis": 1, "fused_activation_function": "NONE"}, version=2)
    with pytest.raises((ValueError, RuntimeError), match="scale"):
        interpreter_outputs(content, [np.zeros(shape, np.int8)] * 2)
    with pytest.raises(FileFormatError, match="equal parameters"):
        litert.load(content)(np.zeros(shape, np.int8), np.zeros(shape, np.int8))


def _while_model() -> bytes:
    """x -> ADD(x, x) -> WHILE(i < 3: i += 1, v = v + v) -> y: a loop with its cond and body subgraphs, as the TF
    converter writes Keras 3 recurrent layers (and any GRU)."""
    import flatbuffers

    from fusedrnn.targets.litert.schema import schema

    s = schema()
    m = s.ModelT()
    m.version, m.buffers, m.operatorCodes = 3, [s.BufferT()], []

    def code(name: str) -> int:
        for k, oc in enumerate(m.operatorCodes):
            if oc.builtinCode == getattr(s.BuiltinOperator, name):
                return k
        oc = s.OperatorCodeT()
        oc.builtinCode = oc.deprecatedBuiltinCode = getattr(s.BuiltinOperator, name)
        oc.version = 1
        m.operatorCodes.append(oc)
        return len(m.operatorCodes) - 1

    def tensor(g, name, type_name, shape, data=None):
        t = s.TensorT()
        t.name, t.type, t.shape = name, getattr(s.TensorType, type_name), list(shape)
        b = s.BufferT()
        if data is not None:
            b.data = list(np.asarray(data).tobytes())
        m.buffers.append(b)
        t.buffer = len(m.buffers) - 1
        g.tensors.append(t)
        return len(g.tensors) - 1

    def op(g, name, ins, outs, opts=None):
        o = s.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = code(name), list(ins), list(outs)
        if opts is not None:
            o.builtinOptionsType, o.builtinOptions = opts
        g.operators.append(o)

    def graph():
        g = s.SubGraphT()
        g.tensors, g.operators = [], []
        return g

    main, cond, body = graph(), graph(), graph()
    x = tensor(main, "x", "FLOAT32", (2,))
    x2 = tensor(main, "x2", "FLOAT32", (2,))
    i0 = tensor(main, "i0", "INT32", (), np.array(0, np.int32))
    i_out, y = tensor(main, "i_out", "INT32", ()), tensor(main, "y", "FLOAT32", (2,))
    add = s.AddOptionsT()
    op(main, "ADD", [x, x], [x2], (s.BuiltinOptions.AddOptions, add))
    w = s.WhileOptionsT()
    w.condSubgraphIndex, w.bodySubgraphIndex = 1, 2
    op(main, "WHILE", [i0, x2], [i_out, y], (s.BuiltinOptions.WhileOptions, w))
    main.inputs, main.outputs = [x], [y]
    ci, cv = tensor(cond, "i", "INT32", ()), tensor(cond, "v", "FLOAT32", (2,))
    n, c = tensor(cond, "n", "INT32", (), np.array(3, np.int32)), tensor(cond, "c", "BOOL", ())
    op(cond, "LESS", [ci, n], [c])
    cond.inputs, cond.outputs = [ci, cv], [c]
    bi, bv = tensor(body, "i", "INT32", ()), tensor(body, "v", "FLOAT32", (2,))
    one = tensor(body, "one", "INT32", (), np.array(1, np.int32))
    bi2, bv2 = tensor(body, "i2", "INT32", ()), tensor(body, "v2", "FLOAT32", (2,))
    op(body, "ADD", [bi, one], [bi2], (s.BuiltinOptions.AddOptions, s.AddOptionsT()))
    op(body, "ADD", [bv, bv], [bv2], (s.BuiltinOptions.AddOptions, s.AddOptionsT()))
    body.inputs, body.outputs = [bi, bv], [bi2, bv2]
    m.subgraphs = [main, cond, body]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_a_while_loop_runs_on_the_interpreter_with_its_subgraphs(monkeypatch):
    content = _while_model()
    x = np.array([0.25, -1.5], np.float32)
    model = litert.load(content)
    y = model(x)
    np.testing.assert_array_equal(y, interpreter_outputs(content, [x])[0])
    np.testing.assert_array_equal(y, x * 2 * 8)  # ADD, then three doublings
    assert model.delegated == {"WHILE"}  # the ADD before it ran on fusedrnn
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)
    with pytest.raises(UnsupportedFeatureError, match=r"op 1 \(WHILE\).*not installed"):
        litert.load(content)(x)

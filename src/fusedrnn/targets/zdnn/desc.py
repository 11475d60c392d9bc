"""``zdnn_tensor_desc`` and the descriptor functions: pre-transformed -> transformed dims, concatenated RNN gate
descriptors, quantized descriptors, ``getsize_ztensor`` and the transformed-descriptor verifier.

Transformed dims are always (dim4, dim3, dim2, dim1) = (N, H, W, C) (HWCK kernels: (H, W, C, K)).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ShapeError
from . import machine as _m
from .constants import (
    CONCAT_LAYOUTS,
    GATES,
    PRE_LAYOUT_NDIMS,
    PREV_LAYER_BIDIR,
    RNN_TYPE_GRU,
    RNN_TYPE_LSTM,
    USAGE_BIASES,
    USAGE_HIDDEN_BIASES,
    USAGE_HIDDEN_WEIGHTS,
    USAGE_WEIGHTS,
    DataFormat,
    DataLayout,
    DataType,
    QuantizedTransformType,
    concat_prev_layer,
    concat_rnn_type,
    concat_usage,
)
from .status import Status, report

L, F, T = DataLayout, DataFormat, DataType
PAGE = 4096
STICK = 128


def padded(x: int) -> int:
    """``PADDED(x)``: x rounded up to a multiple of 64."""
    return -(-int(x) // 64) * 64


def ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


@dataclass
class TensorDesc:
    """``zdnn_tensor_desc``: layout, format, type and dims (dim4 outermost ... dim1 innermost)."""

    layout: int = 0
    format: int = 0
    type: int = 0
    dim4: int = 1
    dim3: int = 1
    dim2: int = 1
    dim1: int = 1

    @property
    def dims(self) -> tuple[int, int, int, int]:
        """(dim4, dim3, dim2, dim1)."""
        return (self.dim4, self.dim3, self.dim2, self.dim1)

    def shape(self) -> tuple[int, ...]:
        """The user-visible shape of a pre-transformed descriptor (outermost first, ``ndims`` entries)."""
        n = PRE_LAYOUT_NDIMS.get(_enum(DataLayout, self.layout), 4)
        return self.dims[4 - n:]

    def copy(self) -> TensorDesc:
        return TensorDesc(self.layout, self.format, self.type, *self.dims)


def _enum(cls, v):
    try:
        return cls(int(v))
    except (ValueError, TypeError):
        return None


def init_pre_transformed_desc(layout: int, type: int, pre_tfrmd_desc: TensorDesc | None = None,  # noqa: A002
                              *dims: int) -> TensorDesc:
    """Fill ``pre_tfrmd_desc`` (a new one when None) with layout, type and the layout's dims (outermost first);
    dims the layout does not use are left alone (1 in a new descriptor). Returns the descriptor."""
    d = TensorDesc() if pre_tfrmd_desc is None else pre_tfrmd_desc
    lay = _enum(DataLayout, layout)
    n = PRE_LAYOUT_NDIMS.get(lay, 0)
    if n:
        if len(dims) < n:
            raise ShapeError(f"dims: layout {lay.name} needs {n} dims (outermost first), got {dims!r}")
        vals = [int(v) for v in dims[:n]]
        for name, v in zip(("dim4", "dim3", "dim2", "dim1")[4 - n:], vals, strict=True):
            setattr(d, name, v)
    d.layout = int(layout)
    d.type = int(type)
    return d


def _set(out: TensorDesc, layout, fmt, typ, dims) -> None:
    out.layout, out.format, out.type = layout, fmt, typ
    out.dim4, out.dim3, out.dim2, out.dim1 = (int(v) for v in dims)


def transformed_dims(pre: TensorDesc) -> tuple[int, int, int, int]:
    """The transformed (dim4, dim3, dim2, dim1) of a valid non-concatenated pre-transformed descriptor."""
    lay = DataLayout(pre.layout)
    d4, d3, d2, d1 = pre.dims
    if lay == L.ZDNN_1D:
        return (1, 1, 1, d1)
    if lay == L.ZDNN_2D:
        return (1, 1, d2, d1)
    if lay == L.ZDNN_2DS:
        return (d2, 1, 1, d1)
    if lay == L.ZDNN_3D:
        return (1, d3, d2, d1)
    if lay == L.ZDNN_3DS:
        return (d3, 1, d2, d1)
    if lay == L.ZDNN_4DS:
        return (d4, 1, d2, d1 if d3 == 1 else d3 * padded(d1))
    if lay == L.ZDNN_NCHW:
        return (d4, d2, d1, d3)
    return (d4, d3, d2, d1)  # 4D, NHWC, HWCK


def generate_transformed_desc(pre_tfrmd_desc: TensorDesc, tfrmd_desc: TensorDesc) -> Status:
    """Fill ``tfrmd_desc`` from ``pre_tfrmd_desc``. INVALID_LAYOUT for concatenated/unknown layouts,
    INVALID_TYPE for quantized-only (INT8) or unknown types; FP32/FP16/BFLOAT -> DLFLOAT16, INT32 -> BINARY_INT32."""
    where = "generate_transformed_desc"
    lay = _enum(DataLayout, pre_tfrmd_desc.layout)
    if lay not in PRE_LAYOUT_NDIMS:
        return report(Status.ZDNN_INVALID_LAYOUT, where)
    typ = _enum(DataType, pre_tfrmd_desc.type)
    if typ in (T.FP32, T.FP16, T.BFLOAT):
        out_type = T.ZDNN_DLFLOAT16
    elif typ == T.INT32:
        out_type = T.ZDNN_BINARY_INT32
    else:
        return report(Status.ZDNN_INVALID_TYPE, where)
    if lay == L.ZDNN_HWCK:
        _set(tfrmd_desc, L.ZDNN_HWCK, F.ZDNN_FORMAT_4DKERNEL, out_type, transformed_dims(pre_tfrmd_desc))
    else:
        _set(tfrmd_desc, L.ZDNN_NHWC, F.ZDNN_FORMAT_4DFEATURE, out_type, transformed_dims(pre_tfrmd_desc))
    return report(Status.ZDNN_OK, where)


QUANTIZED_PRE_LAYOUTS = (L.ZDNN_1D, L.ZDNN_2D, L.ZDNN_2DS, L.ZDNN_3D, L.ZDNN_3DS, L.ZDNN_4D, L.ZDNN_NHWC)
QUANTIZED_PRE_TYPES = {
    QuantizedTransformType.QUANTIZED_DLFLOAT16: ((T.FP16, T.FP32, T.BFLOAT), T.ZDNN_DLFLOAT16,
                                                 F.ZDNN_FORMAT_4DFEATURE),
    QuantizedTransformType.QUANTIZED_INT8: ((T.INT8, T.FP16, T.FP32, T.BFLOAT), T.ZDNN_BINARY_INT8,
                                            F.ZDNN_FORMAT_4DFEATURE),
    QuantizedTransformType.QUANTIZED_WEIGHTS_INT8: ((T.INT8,), T.ZDNN_BINARY_INT8, F.ZDNN_FORMAT_4DWEIGHTS),
}


def generate_quantized_transformed_desc(pre_tfrmd_desc: TensorDesc, transform_type: int,
                                        tfrmd_desc: TensorDesc) -> Status:
    """Fill ``tfrmd_desc`` for a quantized ztensor (layout NHWC; 4DWEIGHTS for QUANTIZED_WEIGHTS_INT8), checking
    as libzdnn does: the pre-transformed layout (INVALID_LAYOUT; the dims are written once it passes), the type
    among FP32, FP16, BFLOAT, INT8 whatever the transform type (INVALID_TYPE), then the transform type
    (INVALID_TRANSFORM_TYPE). The API reference pairs each transform type with its own pre-transformed types
    (QUANTIZED_WEIGHTS_INT8 with INT8 only); libzdnn does not, and neither does this function."""
    where = "generate_quantized_transformed_desc"
    lay = _enum(DataLayout, pre_tfrmd_desc.layout)
    if lay not in QUANTIZED_PRE_LAYOUTS:
        return report(Status.ZDNN_INVALID_LAYOUT, where)
    tfrmd_desc.dim4, tfrmd_desc.dim3, tfrmd_desc.dim2, tfrmd_desc.dim1 = transformed_dims(pre_tfrmd_desc)
    if _enum(DataType, pre_tfrmd_desc.type) not in (T.FP32, T.FP16, T.BFLOAT, T.INT8):
        return report(Status.ZDNN_INVALID_TYPE, where)
    tfrmd_desc.layout = L.ZDNN_NHWC
    qt = _enum(QuantizedTransformType, transform_type)
    if qt is None:
        return report(Status.ZDNN_INVALID_TRANSFORM_TYPE, where)
    _, out_type, fmt = QUANTIZED_PRE_TYPES[qt]
    _set(tfrmd_desc, L.ZDNN_NHWC, fmt, out_type, transformed_dims(pre_tfrmd_desc))
    return report(Status.ZDNN_OK, where)


_USAGES = (USAGE_WEIGHTS, USAGE_HIDDEN_WEIGHTS, USAGE_BIASES, USAGE_HIDDEN_BIASES)


def concat_info_valid(info: int) -> bool:
    """The concat info's RNN type and usage are known (all libzdnn looks at; PREV_LAYER is BIDIR or not)."""
    info = int(info)
    return concat_rnn_type(info) in (RNN_TYPE_LSTM, RNN_TYPE_GRU) and concat_usage(info) in _USAGES


def generate_transformed_desc_concatenated(pre_tfrmd_desc: TensorDesc, info: int,
                                           tfrmd_desc: TensorDesc) -> Status:
    """Fill ``tfrmd_desc`` for RNN gate tensors concatenated as ``info`` (RNN_TYPE | PREV_LAYER | USAGE).

    The pre-transformed descriptor is one gate: weights 3DS (dirs, rows, h), biases 2DS (dirs, h). Result: 4DFEATURE
    (dirs, 1, rows', G*PADDED(h)) [biases (dirs, 1, 1, G*PADDED(h))], rows' = 2*PADDED(rows/2) for
    USAGE_WEIGHTS|PREV_LAYER_BIDIR (layout BIDIR_FICO / BIDIR_ZRH), else rows (FICO / ZRH).

    Checked in libzdnn's order (the API reference lists the layout first): the type (FP32, FP16, BFLOAT; else
    INVALID_TYPE), an odd dim2 of PREV_LAYER_BIDIR weights (INVALID_SHAPE), the usage with its layout (2DS for
    biases, 3DS for weights: INVALID_LAYOUT; another usage: INVALID_CONCAT_INFO; the dims are written once this
    passes), then the RNN type (INVALID_CONCAT_INFO). A PREV_LAYER other than BIDIR counts as UNI and the low byte
    is ignored, as in libzdnn.
    """
    where = "generate_transformed_desc_concatenated"
    info = int(info)
    if _enum(DataType, pre_tfrmd_desc.type) not in (T.FP32, T.FP16, T.BFLOAT):
        return report(Status.ZDNN_INVALID_TYPE, where)
    usage, rnn = concat_usage(info), concat_rnn_type(info)
    bidir_w = usage == USAGE_WEIGHTS and concat_prev_layer(info) == PREV_LAYER_BIDIR
    if bidir_w and int(pre_tfrmd_desc.dim2) & 1:
        return report(Status.ZDNN_INVALID_SHAPE, where, "PREV_LAYER_BIDIR weights need an even dim2")
    G = {RNN_TYPE_LSTM: 4, RNN_TYPE_GRU: 3}.get(rnn)
    lay = _enum(DataLayout, pre_tfrmd_desc.layout)

    def dim1(h: int) -> int:  # libzdnn's get_rnn_concatenated_dim1: h itself for an unknown RNN type
        return G * padded(h) if G else int(h)

    if usage in (USAGE_BIASES, USAGE_HIDDEN_BIASES):
        if lay != L.ZDNN_2DS:
            return report(Status.ZDNN_INVALID_LAYOUT, where)
        dims = (pre_tfrmd_desc.dim2, 1, 1, dim1(pre_tfrmd_desc.dim1))
    elif usage in (USAGE_WEIGHTS, USAGE_HIDDEN_WEIGHTS):
        if lay != L.ZDNN_3DS:
            return report(Status.ZDNN_INVALID_LAYOUT, where)
        rows = 2 * padded(int(pre_tfrmd_desc.dim2) // 2) if bidir_w else pre_tfrmd_desc.dim2
        dims = (pre_tfrmd_desc.dim3, 1, rows, dim1(pre_tfrmd_desc.dim1))
    else:
        return report(Status.ZDNN_INVALID_CONCAT_INFO, where)
    tfrmd_desc.dim4, tfrmd_desc.dim3, tfrmd_desc.dim2, tfrmd_desc.dim1 = (int(v) for v in dims)
    if G is None:
        return report(Status.ZDNN_INVALID_CONCAT_INFO, where)
    gru = rnn == RNN_TYPE_GRU
    if bidir_w:
        layout = L.ZDNN_BIDIR_ZRH if gru else L.ZDNN_BIDIR_FICO
    else:
        layout = L.ZDNN_ZRH if gru else L.ZDNN_FICO
    _set(tfrmd_desc, layout, F.ZDNN_FORMAT_4DFEATURE, T.ZDNN_DLFLOAT16, dims)
    return report(Status.ZDNN_OK, where)


def cells_per_stick(type: int, format: int) -> int:  # noqa: A002
    t = _enum(DataType, type)
    if t == T.ZDNN_BINARY_INT8:
        return 64 if int(format) == F.ZDNN_FORMAT_4DWEIGHTS else 128
    if t in (T.ZDNN_BINARY_INT32, T.ZDNN_BINARY_FP32):
        return 32
    return 64


def getsize_ztensor(tfrmd_desc: TensorDesc) -> int:
    """Bytes of the transformed tensor: dim4 * dim3 * ceil(sticks/32) * ceil(dim1/cells_per_stick) * 4096, sticks =
    dim2 (ceil(dim2/2) for 4DWEIGHTS int8, two rows per stick)."""
    d = tfrmd_desc
    cps = cells_per_stick(d.type, d.format)
    weights = _enum(DataType, d.type) == T.ZDNN_BINARY_INT8 and int(d.format) == F.ZDNN_FORMAT_4DWEIGHTS
    sticks = ceil_div(d.dim2, 2) if weights else d.dim2
    return int(d.dim4) * int(d.dim3) * ceil_div(sticks, 32) * ceil_div(d.dim1, cps) * PAGE


_FORMAT_LAYOUTS = {
    F.ZDNN_FORMAT_4DFEATURE: (L.ZDNN_NHWC,) + CONCAT_LAYOUTS,
    F.ZDNN_FORMAT_4DKERNEL: (L.ZDNN_HWCK,),
    F.ZDNN_FORMAT_4DWEIGHTS: (L.ZDNN_NHWC,),
}
_FORMAT_TYPES = {
    F.ZDNN_FORMAT_4DFEATURE: (T.ZDNN_DLFLOAT16, T.ZDNN_BINARY_INT8, T.ZDNN_BINARY_INT32),
    F.ZDNN_FORMAT_4DKERNEL: (T.ZDNN_DLFLOAT16,),
    F.ZDNN_FORMAT_4DWEIGHTS: (T.ZDNN_BINARY_INT8,),
}


def verify_transformed_desc(d: TensorDesc) -> Status:
    """INVALID_FORMAT (unknown format), INVALID_LAYOUT (layout not valid for the format), INVALID_TYPE (type not
    valid for the format), INVALID_SHAPE (a dim 0 or above get_max_for_dim, or size above the max tensor size)."""
    fmt = _enum(DataFormat, d.format)
    if fmt not in _FORMAT_LAYOUTS:
        return Status.ZDNN_INVALID_FORMAT
    if _enum(DataLayout, d.layout) not in _FORMAT_LAYOUTS[fmt]:
        return Status.ZDNN_INVALID_LAYOUT
    if _enum(DataType, d.type) not in _FORMAT_TYPES[fmt]:
        return Status.ZDNN_INVALID_TYPE
    for i, v in enumerate((d.dim1, d.dim2, d.dim3, d.dim4), start=1):
        if int(v) <= 0 or int(v) > _m.get_max_for_dim(i):
            return Status.ZDNN_INVALID_SHAPE
    if getsize_ztensor(d) > _m.get_nnpa_max_tensor_size():
        return Status.ZDNN_INVALID_SHAPE
    return Status.ZDNN_OK


def verify_pre_transformed_desc(d: TensorDesc, types=(T.FP32, T.FP16, T.BFLOAT, T.INT32)) -> Status:
    if _enum(DataLayout, d.layout) not in PRE_LAYOUT_NDIMS:
        return Status.ZDNN_INVALID_LAYOUT
    if _enum(DataType, d.type) not in types:
        return Status.ZDNN_INVALID_TYPE
    return Status.ZDNN_OK


def gates_of(layout: int) -> int:
    """Number of gates of a concatenated layout (0 otherwise)."""
    return GATES.get(_enum(DataLayout, layout), 0)

"""Data transformation: ``transform_ztensor`` (+ saturation), ``transform_quantized_ztensor``,
``transform_origtensor``, ``reshape_ztensor``, ``getrange_ztensor``, and the cell read/write helpers the
operations use.

DLFLOAT16 conversion is the numerics core's VCRNF model (round half away from zero, flush to zero, NINF);
FP16 and BFLOAT inputs are widened exactly to FP32 first, which gives the same single rounding as zDNN's
VCNF / widen-then-VCRNF paths. Padding cells are written as 0 (zDNN leaves them as found; see zdnn.md 2.7).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ...errors import BufferLayoutError, DTypeError, ShapeError
from ...numerics.dlfloat16 import dlf16_to_bf16, dlf16_to_fp16, dlf16_to_fp32, fp32_to_dlf16_flags
from . import machine as _m
from . import stick
from .constants import DataFormat, DataLayout, DataType, NNPAFunction, QuantizedTransformType
from .desc import (
    QUANTIZED_PRE_LAYOUTS,
    TensorDesc,
    _enum,
    cells_per_stick,
    gates_of,
    getsize_ztensor,
    padded,
    transformed_dims,
    verify_pre_transformed_desc,
    verify_transformed_desc,
)
from .status import Status, report
from .ztensor import ZTensor, access, buffer_ok, byte_view, quantized_transform_type

L, F, T = DataLayout, DataFormat, DataType
NINF = 0x7FFF
STICK_SW_THRESHOLD = 2048
FLOAT_PRE = (T.FP32, T.FP16, T.BFLOAT)


# ---- cells <-> buffer -----------------------------------------------------------------------------------------
def _itemsize(tf: TensorDesc) -> int:
    t = _enum(DataType, tf.type)
    return {T.ZDNN_DLFLOAT16: 2, T.ZDNN_BINARY_INT8: 1, T.ZDNN_BINARY_INT32: 4, T.ZDNN_BINARY_FP32: 4}[t]


def write_cells(zt: ZTensor, cells: np.ndarray) -> None:
    """Stickify transformed-shape cells (N, H, W, C) into ``zt.buffer`` (whole image; padding 0)."""
    tf = zt.transformed_desc
    buf = access(zt, getsize_ztensor(tf), writes=True)
    fmt = _enum(DataFormat, tf.format)
    if fmt == F.ZDNN_FORMAT_4DKERNEL:
        img = stick.kernel_to_image(cells)
    elif fmt == F.ZDNN_FORMAT_4DWEIGHTS:
        img = stick.weights_to_image(cells)
    else:
        stick.feature_to_image(cells, cells_per_stick(tf.type, tf.format), out=buf)
        return
    buf[: img.size] = img


def read_cells(zt: ZTensor) -> np.ndarray:
    """The transformed-shape cells (N, H, W, C) of ``zt.buffer`` (uint16 DLFLOAT16 codes, int8 or int32)."""
    tf = zt.transformed_desc
    buf = access(zt, getsize_ztensor(tf))
    fmt = _enum(DataFormat, tf.format)
    if fmt == F.ZDNN_FORMAT_4DKERNEL:
        return stick.kernel_from_image(buf, tf.dims)
    if fmt == F.ZDNN_FORMAT_4DWEIGHTS:
        return stick.weights_from_image(buf, tf.dims)
    cells = stick.feature_from_image(buf, tf.dims, _itemsize(tf), cells_per_stick(tf.type, tf.format))
    return cells.view(np.uint16) if _itemsize(tf) == 2 else cells


def read_values(zt: ZTensor) -> np.ndarray:
    """DLFLOAT16 cells of ``zt`` decoded to float32 (N, H, W, C); NINF reads as NaN."""
    return dlf16_to_fp32(read_cells(zt))


def write_values(zt: ZTensor, values: np.ndarray, *, saturate: bool = False):
    """Round float32/float64 values (N, H, W, C) to DLFLOAT16 into ``zt``; returns the conversion flags."""
    v = np.asarray(values)
    v = v if v.dtype in (np.float32, np.float64) else v.astype(np.float32)
    codes, flags = fp32_to_dlf16_flags(v, saturate=saturate)  # float64 is rounded once, directly
    write_cells(zt, codes)
    return flags


# ---- logical (pre-transformed) <-> transformed arrangement ----------------------------------------------------
def to_transformed(pre: TensorDesc, a: np.ndarray) -> np.ndarray:
    """Arrange an array of the pre-transformed shape as the transformed (N, H, W, C) cells (4DS bidir: each direction
    at columns d*PADDED(h), zero padding between)."""
    lay = _enum(DataLayout, pre.layout)
    dims = transformed_dims(pre)
    if lay == L.ZDNN_NCHW:
        return np.ascontiguousarray(a.reshape(pre.dims).transpose(0, 2, 3, 1))
    if lay == L.ZDNN_4DS and pre.dim3 != 1:
        ts, dirs, b, h = pre.dims
        out = np.zeros((ts, 1, b, dirs, padded(h)), a.dtype)
        out[:, 0, :, :, :h] = a.reshape(ts, dirs, b, h).transpose(0, 2, 1, 3)
        return out.reshape(dims)
    return a.reshape(dims)


def from_transformed(pre: TensorDesc, cells: np.ndarray) -> np.ndarray:
    """Inverse of :func:`to_transformed`: the pre-transformed-shape array."""
    lay = _enum(DataLayout, pre.layout)
    if lay == L.ZDNN_NCHW:
        return np.ascontiguousarray(cells.transpose(0, 3, 1, 2))
    if lay == L.ZDNN_4DS and pre.dim3 != 1:
        ts, dirs, b, h = pre.dims
        v = cells.reshape(ts, b, dirs, padded(h))[..., :h]
        return np.ascontiguousarray(v.transpose(0, 2, 1, 3))
    return cells.reshape(pre.shape())


def concat_to_transformed(pre: TensorDesc, tf: TensorDesc, gates: list[np.ndarray]) -> np.ndarray:
    """Per-gate arrays (dirs, rows, h) or (dirs, h) -> the (dirs, 1, rows', G*PADDED(h)) concatenated arrangement;
    BIDIR_* weights put row r >= rows/2 at PADDED(rows/2) + r - rows/2. Everything else is 0."""
    G = len(gates)
    weights = _enum(DataLayout, pre.layout) == L.ZDNN_3DS
    dirs = pre.dim3 if weights else pre.dim2
    rows = pre.dim2 if weights else 1
    h = pre.dim1
    ph = padded(h)
    out = np.zeros((dirs, tf.dim2, G, ph), gates[0].dtype)
    bidir = _enum(DataLayout, tf.layout) in (L.ZDNN_BIDIR_FICO, L.ZDNN_BIDIR_ZRH)
    for g, a in enumerate(gates):
        a = a.reshape(dirs, rows, h)
        if bidir:
            half = rows // 2
            out[:, :half, g, :h] = a[:, :half]
            out[:, padded(half) : padded(half) + half, g, :h] = a[:, half:]
        else:
            out[:, :rows, g, :h] = a
    return out.reshape(dirs, 1, tf.dim2, G * ph)


def concatenated_dims(pre: TensorDesc, layout: int) -> tuple[int, int, int, int] | None:
    """The transformed dims a concatenated ``layout`` gives the one-gate pre-transformed descriptor ``pre``."""
    G = gates_of(layout)
    weights = _enum(DataLayout, pre.layout) == L.ZDNN_3DS
    dirs, rows, h = (pre.dim3, pre.dim2, pre.dim1) if weights else (pre.dim2, 1, pre.dim1)
    if _enum(DataLayout, layout) in (L.ZDNN_BIDIR_FICO, L.ZDNN_BIDIR_ZRH):
        if not weights or rows % 2:
            return None
        rows = 2 * padded(rows // 2)
    return (dirs, 1, rows, G * padded(h))


C_DTYPES = {T.FP32: np.float32, T.FP16: np.float16, T.BFLOAT: np.uint16, T.INT8: np.int8, T.INT32: np.int32}
"""How C reads a pre-transformed type's elements from a ``void *`` buffer (BFLOAT as its 16-bit codes)."""


def c_elements(data, pre_type: DataType, n: int, name: str, *, writes: bool = False):
    """C's ``void *`` data: ``data`` itself when it is a NumPy array of exactly ``n`` elements or a sequence (read
    by value), else the first ``n`` elements of the pre-transformed type in the bytes of a C-like buffer at least
    that large (a bigger malloc-style NumPy array of any dtype, ``bytearray``, ``memoryview``, ``bytes``)."""
    if isinstance(data, np.ndarray) and data.size == n:
        return data
    view = byte_view(data)
    if view is None:
        if isinstance(data, np.ndarray):
            raise BufferLayoutError(f"{name}: expected a C-contiguous buffer (zDNN reads and writes it as one block), "
                                    f"got an array of byte strides {data.strides}")
        return data
    dt = np.dtype(C_DTYPES[pre_type])
    need = n * dt.itemsize
    if view.nbytes < need:
        raise ShapeError(f"{name}: expected {n} elements ({need} bytes) for the pre-transformed descriptor, got "
                         f"{view.nbytes} bytes")
    if writes and not view.flags.writeable:
        raise BufferLayoutError(f"{name}: expected a writable buffer, got a read-only one")
    return view[:need].view(dt)


def _pre_floats(data, pre_type: DataType, n: int, name: str) -> np.ndarray:
    """User data of a float pre-type as exact float32 values (FP16/BFLOAT widened); also returns FP16 non-finites."""
    a = np.asarray(c_elements(data, pre_type, n, name))
    if a.size != n:
        raise ShapeError(f"{name}: expected {n} elements for the pre-transformed descriptor, got shape {a.shape}")
    if pre_type == T.FP32:
        return np.asarray(a, np.float32).reshape(-1)
    if pre_type == T.FP16:
        h = a.view(np.float16) if a.dtype == np.uint16 else np.asarray(a, np.float16)
        return h.astype(np.float32).reshape(-1)
    if a.dtype == np.uint16:
        codes = a
    elif a.dtype == ml_dtypes.bfloat16:
        codes = a.view(np.uint16)
    else:
        codes = np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    return (codes.astype(np.uint32).reshape(-1) << 16).view(np.float32)


def _check_data_count(data: tuple, want: int) -> None:
    if len(data) != want:
        raise ShapeError(f"data: expected {want} data array(s) for this layout, got {len(data)}")


# ---- transform_ztensor ----------------------------------------------------------------------------------------
_FEATURE_TF_LAYOUTS = (L.ZDNN_NHWC, L.ZDNN_FICO, L.ZDNN_ZRH, L.ZDNN_BIDIR_FICO, L.ZDNN_BIDIR_ZRH)
_FEATURE_PRE_LAYOUTS = (L.ZDNN_1D, L.ZDNN_2D, L.ZDNN_2DS, L.ZDNN_3D, L.ZDNN_3DS, L.ZDNN_4D, L.ZDNN_4DS, L.ZDNN_NHWC,
                        L.ZDNN_NCHW)


def _transform_checks(zt: ZTensor, where: str, saturation: bool) -> Status:
    """libzdnn's ``verify_descriptors_transform_ztensor`` in its order: the transformed format; for 4DFEATURE the
    transformed layout, type (DLFLOAT16 only: a BINARY_INT32 ztensor is INVALID_TYPE) and the pre-transformed
    layout; for 4DKERNEL the type, then HWCK transformed and pre-transformed layouts (saturation
    included: libzdnn saturates HWCK tensors too); the pre-transformed type (FP32, FP16 or BFLOAT: INT32 and INT8
    data are INVALID_TYPE); the dims (0 or above the maximum:
    INVALID_SHAPE). Then the buffer (INVALID_BUFFER) and the state (INVALID_STATE); then what the transform itself
    checks: a concatenated layout needs 2DS/3DS data and no saturation (INVALID_LAYOUT) and as many directions as
    dim4 (INVALID_SHAPE); other layouts need the dims the pre-transformed descriptor gives (INVALID_SHAPE, the
    emulator's guard: libzdnn would read the data by the transformed dims)."""
    pre, tf = zt.pre_transformed_desc, zt.transformed_desc
    fmt = _enum(DataFormat, tf.format)
    if fmt == F.ZDNN_FORMAT_4DFEATURE:
        if _enum(DataLayout, tf.layout) not in _FEATURE_TF_LAYOUTS:
            return Status.ZDNN_INVALID_LAYOUT
        if tf.type != T.ZDNN_DLFLOAT16:
            return Status.ZDNN_INVALID_TYPE
        if _enum(DataLayout, pre.layout) not in _FEATURE_PRE_LAYOUTS:
            return Status.ZDNN_INVALID_LAYOUT
    elif fmt == F.ZDNN_FORMAT_4DKERNEL:
        if tf.type != T.ZDNN_DLFLOAT16:
            return Status.ZDNN_INVALID_TYPE
        if _enum(DataLayout, tf.layout) != L.ZDNN_HWCK or _enum(DataLayout, pre.layout) != L.ZDNN_HWCK:
            return Status.ZDNN_INVALID_LAYOUT
    else:
        return Status.ZDNN_INVALID_FORMAT
    if _enum(DataType, pre.type) not in FLOAT_PRE:
        return Status.ZDNN_INVALID_TYPE
    st = verify_transformed_desc(tf)
    if st != Status.ZDNN_OK:
        return st
    if not buffer_ok(zt, getsize_ztensor(tf), writes=True):
        return Status.ZDNN_INVALID_BUFFER
    if zt.is_transformed:
        return Status.ZDNN_INVALID_STATE
    G = gates_of(tf.layout)
    if G:
        lay = _enum(DataLayout, pre.layout)
        if saturation or lay not in (L.ZDNN_2DS, L.ZDNN_3DS):
            return Status.ZDNN_INVALID_LAYOUT
        if (pre.dim3 if lay == L.ZDNN_3DS else pre.dim2) != tf.dim4:
            return Status.ZDNN_INVALID_SHAPE
        if concatenated_dims(pre, tf.layout) is None:
            return Status.ZDNN_INVALID_SHAPE  # PREV_LAYER_BIDIR weights with an odd dim2
        if tuple(tf.dims) != concatenated_dims(pre, tf.layout) and not _packable(zt, G):
            return Status.ZDNN_INVALID_SHAPE
    elif tuple(tf.dims) != transformed_dims(pre):
        return Status.ZDNN_INVALID_SHAPE
    return Status.ZDNN_OK


def _gate_desc(pre: TensorDesc) -> TensorDesc:
    """libzdnn's per-gate, per-direction ztensor of a concatenated transform: 2D (rows, h) or 1D (h), DLFLOAT16."""
    rows = pre.dim2 if _enum(DataLayout, pre.layout) == L.ZDNN_3DS else 1
    return TensorDesc(L.ZDNN_NHWC, F.ZDNN_FORMAT_4DFEATURE, T.ZDNN_DLFLOAT16, 1, 1, int(rows), int(pre.dim1))


def _packable(zt: ZTensor, G: int) -> bool:
    """A concatenated ztensor whose pre-transformed rows or hidden size changed after descriptor generation:
    libzdnn writes each gate's slices as images of the pre-transformed dims, back to back (slice-major); the
    emulator does too when they fit in the buffer and the layout is not BIDIR (else INVALID_SHAPE, where libzdnn
    would write past the buffer)."""
    pre, tf = zt.pre_transformed_desc, zt.transformed_desc
    if _enum(DataLayout, tf.layout) in (L.ZDNN_BIDIR_FICO, L.ZDNN_BIDIR_ZRH):
        return False
    need = getsize_ztensor(_gate_desc(pre)) * int(tf.dim4) * G
    return need <= min(int(zt.buffer_size), byte_view(zt.buffer).nbytes)


def _write_packed(zt: ZTensor, vals: list[np.ndarray]) -> object:
    """The slice-major gate images of :func:`_packable` (the region they cover zeroed first, as libzdnn's
    memset); returns the combined conversion flags."""
    pre, tf = zt.pre_transformed_desc, zt.transformed_desc
    gd = _gate_desc(pre)
    size = getsize_ztensor(gd)
    dirs, G = int(tf.dim4), len(vals)
    buf = byte_view(zt.buffer)
    buf[: size * dirs * G] = 0
    over = inv = False
    for d in range(dirs):
        for g, v in enumerate(vals):
            part = ZTensor(transformed_desc=gd, buffer=buf[(d * G + g) * size:(d * G + g + 1) * size],
                           buffer_size=size)
            f = write_values(part, v.reshape(dirs, gd.dim2, gd.dim1)[d].reshape(1, 1, gd.dim2, gd.dim1))
            over, inv = over or f.overflow, inv or f.invalid
    return type("Flags", (), {"overflow": over, "invalid": inv})()


def _transform(zt: ZTensor, data: tuple, saturation: bool, where: str) -> Status:
    st = _transform_checks(zt, where, saturation)
    if st != Status.ZDNN_OK:
        return report(st, where)
    pre, tf = zt.pre_transformed_desc, zt.transformed_desc
    ptype = DataType(pre.type)
    G = gates_of(tf.layout)
    _check_data_count(data, G or 1)
    n = int(np.prod(pre.shape()))
    if G:
        vals = [_pre_floats(d, ptype, n, f"data[{g}]") for g, d in enumerate(data)]
        if tuple(tf.dims) != concatenated_dims(pre, tf.layout):
            flags = _write_packed(zt, vals)
            arranged = None
        else:
            arranged = concat_to_transformed(pre, tf, vals)
    else:
        arranged = to_transformed(pre, _pre_floats(data[0], ptype, n, "data").reshape(pre.shape()))
    if arranged is not None:
        byte_view(zt.buffer)[: getsize_ztensor(tf)] = 0
        flags = write_values(zt, arranged, saturate=saturation and ptype != T.FP16)
    bad = flags.overflow or flags.invalid
    if bad and (not saturation or ptype == T.FP16):
        return report(Status.ZDNN_CONVERT_FAILURE, where)
    zt.is_transformed = True
    return report(Status.ZDNN_ELEMENT_RANGE_VIOLATION if bad else Status.ZDNN_OK, where)


def transform_ztensor(ztensor: ZTensor, *data) -> Status:
    """Convert and stickify user data into ``ztensor`` (one array; FICO: 4 arrays f, i, c, o; ZRH: 3 arrays z, r,
    h). Overflow, Inf or NaN give CONVERT_FAILURE (buffer written, not marked transformed); underflow flushes to
    zero silently."""
    return _transform(ztensor, data, False, "transform_ztensor")


def transform_ztensor_with_saturation(ztensor: ZTensor, *data) -> Status:
    """As :func:`transform_ztensor`, clamping finite FP32/BFLOAT values to ±DLF16_MAX first; Inf/NaN give NINF and
    ELEMENT_RANGE_VIOLATION (tensor transformed); FP16 Inf/NaN stay CONVERT_FAILURE. One array: 4DFEATURE, or
    4DKERNEL (HWCK) as libzdnn (the API reference names 4DFEATURE only)."""
    return _transform(ztensor, data, True, "transform_ztensor_with_saturation")


# ---- transform_quantized_ztensor ------------------------------------------------------------------------------
def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, np.floor(x + np.float32(0.5)), np.ceil(x - np.float32(0.5))).astype(np.float32)


def dlf16_value(x: float) -> float:
    """``x`` as the hardware sees a parameter: rounded to DLFLOAT16 (NaN for NINF)."""
    return float(dlf16_to_fp32(fp32_to_dlf16_flags(np.float32(x))[0]))


def quantize_to_int8(values: np.ndarray, rec_scale: float, offset: float, clip_min: int, clip_max: int) -> np.ndarray:
    """The TRANSFORM TOC 6 model: q = clip(round(x * rs + off), clip_min, clip_max) with rs, off rounded to
    DLFLOAT16 and FP32 arithmetic; rounding half away from zero (unspecified in zDNN; its tests allow ±1)."""
    rs, off = np.float32(dlf16_value(rec_scale)), np.float32(dlf16_value(offset))
    q = _round_half_away(values.astype(np.float32) * rs + off)
    return np.clip(q, clip_min, clip_max).astype(np.int8)


def _quantized_transform_checks(zt: ZTensor) -> Status:
    """libzdnn's order: the buffer (INVALID_BUFFER), the state (INVALID_STATE), NHWC transformed and a quantizable
    pre-transformed layout (INVALID_LAYOUT), the transformed dims (INVALID_SHAPE), then by format: 4DFEATURE
    DLFLOAT16 takes FP32/FP16/BFLOAT data, 4DFEATURE INT8 also INT8, 4DWEIGHTS INT8 takes INT8 only (else
    INVALID_TYPE), another format is INVALID_FORMAT; last the emulator's guard that the pre-transformed dims give
    the transformed ones (INVALID_SHAPE: libzdnn would read the data by the transformed dims)."""
    pre, tf = zt.pre_transformed_desc, zt.transformed_desc
    if not buffer_ok(zt, getsize_ztensor(tf), writes=True):
        return Status.ZDNN_INVALID_BUFFER
    if zt.is_transformed:
        return Status.ZDNN_INVALID_STATE
    if _enum(DataLayout, tf.layout) != L.ZDNN_NHWC or _enum(DataLayout, pre.layout) not in QUANTIZED_PRE_LAYOUTS:
        return Status.ZDNN_INVALID_LAYOUT
    for i, v in enumerate((tf.dim1, tf.dim2, tf.dim3, tf.dim4), start=1):
        if int(v) <= 0 or int(v) > _m.get_max_for_dim(i):
            return Status.ZDNN_INVALID_SHAPE
    if getsize_ztensor(tf) > _m.get_nnpa_max_tensor_size():
        return Status.ZDNN_INVALID_SHAPE
    fmt, ttype, ptype = _enum(DataFormat, tf.format), _enum(DataType, tf.type), _enum(DataType, pre.type)
    if fmt == F.ZDNN_FORMAT_4DFEATURE:
        allowed = {T.ZDNN_DLFLOAT16: FLOAT_PRE, T.ZDNN_BINARY_INT8: FLOAT_PRE + (T.INT8,)}.get(ttype, ())
    elif fmt == F.ZDNN_FORMAT_4DWEIGHTS:
        allowed = (T.INT8,) if ttype == T.ZDNN_BINARY_INT8 else ()
    else:
        return Status.ZDNN_INVALID_FORMAT
    if ptype not in allowed:
        return Status.ZDNN_INVALID_TYPE
    if tuple(tf.dims) != transformed_dims(pre):
        return Status.ZDNN_INVALID_SHAPE
    return Status.ZDNN_OK


def transform_quantized_ztensor(ztensor: ZTensor, saturation_control: bool, clip_min: int, clip_max: int,
                                data) -> Status:
    """Transform into a quantized ztensor: QUANTIZED_DLFLOAT16 (plain DLFLOAT16, metadata only), QUANTIZED_INT8
    (INT8 copied; float data quantized with the ztensor's rec_scale/offset and clipped), QUANTIZED_WEIGHTS_INT8
    (INT8 only, 4DWEIGHTS interleaving)."""
    where = "transform_quantized_ztensor"
    zt = ztensor
    pre, tf = zt.pre_transformed_desc, zt.transformed_desc
    st = _quantized_transform_checks(zt)
    if st != Status.ZDNN_OK:
        return report(st, where)
    qt = quantized_transform_type(zt)
    ptype = _enum(DataType, pre.type)
    n = int(np.prod(pre.shape()))
    if qt == QuantizedTransformType.QUANTIZED_DLFLOAT16:
        vals = to_transformed(pre, _pre_floats(data, ptype, n, "data").reshape(pre.shape()))
        sat = bool(saturation_control) and ptype == T.FP32
        flags = write_values(zt, vals, saturate=sat)
        if flags.overflow or flags.invalid:
            if not sat:
                return report(Status.ZDNN_CONVERT_FAILURE, where)
            zt.is_transformed = True
            return report(Status.ZDNN_ELEMENT_RANGE_VIOLATION, where)
        zt.is_transformed = True
        return report(Status.ZDNN_OK, where)
    if ptype == T.INT8:
        a = np.asarray(c_elements(data, ptype, n, "data"))
        if a.size != n:
            raise ShapeError(f"data: expected {n} elements, got shape {a.shape}")
        if a.dtype != np.int8:
            raise DTypeError(f"data: expected int8 values for pre-transformed type INT8, got {a.dtype}")
        q = a.reshape(pre.shape())
    else:
        if int(clip_min) >= int(clip_max):
            return report(Status.ZDNN_INVALID_CLIPPING_VALUE, where)
        if not _m.parmblk_fmts_installed(1):  # TRANSFORM TOC 6 (STICK_INT8) exists on Telum II only
            return report(Status.ZDNN_UNAVAILABLE_FUNCTION, where)
        rs, off = dlf16_value(zt.rec_scale), dlf16_value(zt.offset)
        if rs == 0 or np.isnan(rs) or np.isnan(off):
            return report(Status.ZDNN_FUNC_RC_F001, where)
        vals = _pre_floats(data, ptype, n, "data").reshape(pre.shape())
        if ptype == T.FP16:  # zDNN widens FP16 through DLFLOAT16 (cnvt_1_fp16_to_fp32) before TOC 6
            vals = dlf16_to_fp32(fp32_to_dlf16_flags(vals)[0])
        q = quantize_to_int8(vals, zt.rec_scale, zt.offset, int(clip_min), int(clip_max))
    byte_view(zt.buffer)[: getsize_ztensor(tf)] = 0
    write_cells(zt, q.reshape(transformed_dims(pre)))
    zt.is_transformed = True
    return report(Status.ZDNN_OK, where)


# ---- transform_origtensor -------------------------------------------------------------------------------------
def _hw_unstick(pre: TensorDesc, tf: TensorDesc) -> bool:
    """zDNN's NNPA-TRANSFORM unstickify path (Telum II, FP32, NHWC, not NCHW, dim3*dim2*dim1 > 2048)."""
    return (_m.functions_installed(NNPAFunction.NNPA_TRANSFORM) and pre.type == T.FP32
            and _enum(DataLayout, pre.layout) != L.ZDNN_NCHW and tf.dim3 * tf.dim2 * tf.dim1 > STICK_SW_THRESHOLD)


_OUT_DTYPES = {T.FP32: (np.float32,), T.FP16: (np.float16, np.uint16), T.BFLOAT: (ml_dtypes.bfloat16, np.uint16),
               T.INT32: (np.int32,)}


def transform_origtensor(ztensor: ZTensor, out_buf) -> Status:
    """Unstickify ``ztensor`` into ``out_buf`` (a writable array of the pre-transformed type: float32, float16,
    bfloat16 (or uint16 codes), int32, with the pre-transformed element count; written in C order; or any writable
    C-like buffer at least as large, written as C writes it, :func:`c_elements`).
    NINF or an FP16 overflow gives CONVERT_FAILURE (ELEMENT_RANGE_VIOLATION on the hardware path); values are
    written anyway."""
    where = "transform_origtensor"
    zt = ztensor
    pre, tf = zt.pre_transformed_desc, zt.transformed_desc
    st = verify_pre_transformed_desc(pre, types=FLOAT_PRE + (T.INT32,))
    if st != Status.ZDNN_OK:
        return report(st, where)
    if _enum(DataFormat, tf.format) != F.ZDNN_FORMAT_4DFEATURE:
        return report(Status.ZDNN_INVALID_FORMAT, where)
    if _enum(DataLayout, tf.layout) != L.ZDNN_NHWC:
        return report(Status.ZDNN_INVALID_LAYOUT, where)
    want = T.ZDNN_BINARY_INT32 if pre.type == T.INT32 else T.ZDNN_DLFLOAT16
    if tf.type != want:
        return report(Status.ZDNN_INVALID_TYPE, where)
    if not buffer_ok(zt, getsize_ztensor(tf)):
        return report(Status.ZDNN_INVALID_BUFFER, where)
    if not zt.is_transformed:
        return report(Status.ZDNN_INVALID_STATE, where)
    if tuple(tf.dims) != transformed_dims(pre) or verify_transformed_desc(tf) != Status.ZDNN_OK:
        return report(Status.ZDNN_INVALID_SHAPE, where)  # descriptors that disagree (zDNN would misread memory)
    ptype = DataType(pre.type)
    out = np.asarray(c_elements(out_buf, ptype, int(np.prod(pre.shape())), "out_buf", writes=True))
    if out.dtype not in [np.dtype(d) for d in _OUT_DTYPES[ptype]]:
        raise DTypeError(f"out_buf: expected dtype {[np.dtype(d).name for d in _OUT_DTYPES[ptype]]} for "
                         f"pre-transformed type {ptype.name}, got {out.dtype}")
    n = int(np.prod(pre.shape()))
    if out.size != n:
        raise ShapeError(f"out_buf: expected {n} elements {pre.shape()}, got shape {out.shape}")
    if not (out.flags.writeable and out.flags.c_contiguous):
        raise BufferLayoutError(f"out_buf: expected a writable C-contiguous array (zDNN writes it as one block), got "
                                f"{'a read-only' if not out.flags.writeable else 'a strided'} array of byte strides "
                                f"{out.strides}")
    cells = from_transformed(pre, read_cells(zt))
    flat = out.reshape(-1)
    if ptype == T.INT32:
        flat[...] = cells.reshape(-1)
        return report(Status.ZDNN_OK, where)
    bad = bool(np.any((cells & 0x7FFF) == NINF))
    if ptype == T.FP32:
        flat[...] = dlf16_to_fp32(cells).reshape(-1)
    elif ptype == T.FP16:
        h, flags = dlf16_to_fp16(cells)
        flat[...] = np.asarray(h).reshape(-1).view(out.dtype) if out.dtype == np.uint16 else np.asarray(h).reshape(-1)
        bad = bad or flags.overflow or flags.invalid
    else:
        flat.view(np.uint16)[...] = dlf16_to_bf16(cells).reshape(-1)
    if bad:
        hw = _hw_unstick(pre, tf)
        return report(Status.ZDNN_ELEMENT_RANGE_VIOLATION if hw else Status.ZDNN_CONVERT_FAILURE, where)
    return report(Status.ZDNN_OK, where)


# ---- getrange, reshape ----------------------------------------------------------------------------------------
def getrange_ztensor(ztensor: ZTensor) -> tuple[Status, float, float]:
    """(status, min, max) over the DLFLOAT16 values: min is at most -0.0, max at least 0.0 (zDNN's convention)."""
    where = "getrange_ztensor"
    tf = ztensor.transformed_desc
    if tf is None or tf.type != T.ZDNN_DLFLOAT16 or _enum(DataFormat, tf.format) != F.ZDNN_FORMAT_4DFEATURE:
        return report(Status.ZDNN_INVALID_TYPE, where), 0.0, 0.0
    if not buffer_ok(ztensor, getsize_ztensor(tf)):
        return report(Status.ZDNN_INVALID_BUFFER, where), 0.0, 0.0
    v = read_values(ztensor)
    v = v[~np.isnan(v)]
    lo = float(min(v.min(), np.float32(-0.0))) if v.size and v.min() < 0 else -0.0
    hi = float(max(v.max(), np.float32(0.0))) if v.size and v.max() > 0 else 0.0
    return report(Status.ZDNN_OK, where), lo, hi


def reshape_ztensor(src: ZTensor, dest: ZTensor) -> Status:
    """Copy ``src``'s cells into ``dest`` in ``dest``'s shape (same element count, both NHWC or both HWCK; the cell
    codes are copied unchanged). As libzdnn: equal dims copy the whole image; HWCK tensors reshape when dim1 stays
    (libzdnn copies their sticks) and are refused with INVALID_FORMAT when it changes (libzdnn's untransform path
    takes 4DFEATURE only); the API reference says NHWC to NHWC only."""
    where = "reshape_ztensor"
    s, d = src.transformed_desc, dest.transformed_desc
    if int(np.prod(s.dims)) != int(np.prod(d.dims)):
        return report(Status.ZDNN_INVALID_SHAPE, where)
    st = verify_transformed_desc(d)
    if st == Status.ZDNN_INVALID_SHAPE:
        return report(st, where)
    if s.layout != d.layout or _enum(DataLayout, s.layout) not in (L.ZDNN_NHWC, L.ZDNN_HWCK):
        return report(Status.ZDNN_INVALID_LAYOUT, where)
    for pre in (src.pre_transformed_desc, dest.pre_transformed_desc):
        st = verify_pre_transformed_desc(pre)
        if st != Status.ZDNN_OK:
            return report(st, where)
    if not src.is_transformed or dest.is_transformed:
        return report(Status.ZDNN_INVALID_STATE, where)
    fmt = _enum(DataFormat, s.format)
    if fmt not in (F.ZDNN_FORMAT_4DFEATURE, F.ZDNN_FORMAT_4DKERNEL) or int(d.format) != int(s.format):
        return report(Status.ZDNN_INVALID_FORMAT, where)
    if fmt == F.ZDNN_FORMAT_4DKERNEL and d.dim1 != s.dim1:
        # libzdnn's last resort (untransform + transform) refuses a 4DKERNEL tensor
        return report(Status.ZDNN_INVALID_FORMAT, where)
    if d.type != s.type or verify_transformed_desc(d) != Status.ZDNN_OK:
        return report(Status.ZDNN_INVALID_TYPE, where)
    if not buffer_ok(src, getsize_ztensor(s)) or not buffer_ok(dest, getsize_ztensor(d), writes=True):
        return report(Status.ZDNN_INVALID_BUFFER, where)
    if tuple(d.dims) == tuple(s.dims):  # libzdnn copies the whole image, padding included
        n = getsize_ztensor(s)
        byte_view(dest.buffer)[:n] = byte_view(src.buffer)[:n]
        dest.is_transformed = True
        return report(Status.ZDNN_OK, where)
    cells = read_cells(src).reshape(-1).reshape(d.dims)
    if d.dim1 != s.dim1 and s.type == T.ZDNN_DLFLOAT16 and np.any((cells & 0x7FFF) == NINF):
        # a different dim1 goes through untransform + transform, which fails on NINF cells
        return report(Status.ZDNN_CONVERT_FAILURE, where)
    byte_view(dest.buffer)[: getsize_ztensor(d)] = 0
    write_cells(dest, cells)
    dest.is_transformed = True
    return report(Status.ZDNN_OK, where)

"""``mli_status`` return codes (MLI 2.0 ``include/mli_types.h``; the documented order, OK = 0), and how a kernel
comes to return one: a failed check raises :class:`MliCheckFailed` (:func:`require`, :func:`fail`) and the kernel
wrapper (:func:`mli_kernel`) returns its status."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from enum import IntEnum

from .tensors import as_v2


class Status(IntEnum):
    """What an MLI kernel returns. Kernels of :mod:`fusedrnn.mli` return these instead of raising."""

    MLI_STATUS_OK = 0
    MLI_STATUS_BAD_TENSOR = 1  # invalid tensor (rank, shape vs strides, capacity of an input, ...)
    MLI_STATUS_SHAPE_MISMATCH = 2  # shapes or ranks not compatible with the function
    MLI_STATUS_INCOMPATEBLE_TENSORS = 3  # other tensor parameters not compatible (quantization, zero points)
    MLI_STATUS_BAD_FUNC_CFG = 4  # invalid configuration structure
    MLI_STATUS_NOT_ENGH_MEM = 5  # output (or intermediate buffer) capacity too small
    MLI_STATUS_NOT_SUPPORTED = 6  # combination not implemented
    MLI_STATUS_SPEC_PARAM_MISMATCH = 7  # configuration does not match the specialization
    MLI_STATUS_ARGUMENT_ERROR = 8  # a by-reference parameter is None
    MLI_STATUS_LENGTH_ERROR = 9
    MLI_STATUS_SIZE_MISMATCH = 10
    MLI_STATUS_RANK_MISMATCH = 11
    MLI_STATUS_TYPE_MISMATCH = 12  # element types do not match the function specialization
    MLI_STATUS_MEM_BANK_MISMATCH = 13
    MLI_STATUS_MISALIGNMENT_ERROR = 14


MLI_STATUS_OK = Status.MLI_STATUS_OK
MLI_STATUS_BAD_TENSOR = Status.MLI_STATUS_BAD_TENSOR
MLI_STATUS_SHAPE_MISMATCH = Status.MLI_STATUS_SHAPE_MISMATCH
MLI_STATUS_INCOMPATEBLE_TENSORS = Status.MLI_STATUS_INCOMPATEBLE_TENSORS
MLI_STATUS_BAD_FUNC_CFG = Status.MLI_STATUS_BAD_FUNC_CFG
MLI_STATUS_NOT_ENGH_MEM = Status.MLI_STATUS_NOT_ENGH_MEM
MLI_STATUS_NOT_SUPPORTED = Status.MLI_STATUS_NOT_SUPPORTED
MLI_STATUS_SPEC_PARAM_MISMATCH = Status.MLI_STATUS_SPEC_PARAM_MISMATCH
MLI_STATUS_ARGUMENT_ERROR = Status.MLI_STATUS_ARGUMENT_ERROR
MLI_STATUS_LENGTH_ERROR = Status.MLI_STATUS_LENGTH_ERROR
MLI_STATUS_SIZE_MISMATCH = Status.MLI_STATUS_SIZE_MISMATCH
MLI_STATUS_RANK_MISMATCH = Status.MLI_STATUS_RANK_MISMATCH
MLI_STATUS_TYPE_MISMATCH = Status.MLI_STATUS_TYPE_MISMATCH
MLI_STATUS_MEM_BANK_MISMATCH = Status.MLI_STATUS_MEM_BANK_MISMATCH
MLI_STATUS_MISALIGNMENT_ERROR = Status.MLI_STATUS_MISALIGNMENT_ERROR


class MliCheckFailed(Exception):
    """Internal: raised by a check, turned into the returned status by the kernel wrapper."""

    def __init__(self, status: Status, message: str):
        super().__init__(f"{status.name}: {message}")
        self.status = status
        self.message = message


def fail(status: Status, message: str):
    raise MliCheckFailed(status, message)


def require(cond: bool, status: Status, message: str) -> None:
    if not cond:
        fail(status, message)


def mli_kernel(body: Callable[..., None], *fixed, name: str | None = None,
               doc: str | None = None) -> Callable[..., Status]:
    """An MLI kernel: ``body(*fixed, *args, **kwargs)`` whose :class:`MliCheckFailed` becomes the returned status
    (MLI_STATUS_OK on success). As a decorator it wraps one kernel body; with ``fixed`` leading arguments (the
    flavour) it makes one kernel of a family named ``name`` with docstring ``doc``, taking the remaining
    parameters of ``body`` (also by keyword). MLI 1.x tensors (:class:`~.tensors.TensorV1`) reach the body as
    their 2.0 views, so bodies compare ``el_type`` with 2.0's numbers only."""

    @functools.wraps(body)
    def kernel(*args, **kwargs):
        try:
            body(*fixed, *map(as_v2, args), **{k: as_v2(v) for k, v in kwargs.items()})
        except MliCheckFailed as e:
            return e.status
        return Status.MLI_STATUS_OK

    if fixed:
        sig = inspect.signature(body)
        kernel.__signature__ = sig.replace(parameters=list(sig.parameters.values())[len(fixed):],
                                           return_annotation=Status)
    if name is not None:
        kernel.__name__ = kernel.__qualname__ = name
    if doc is not None:
        kernel.__doc__ = doc
    return kernel


def define_kernels(namespace: dict, body: Callable[..., None], prefix: str, flavours: Mapping[str, tuple],
                   doc: str) -> list[str]:
    """A family of kernels sharing one body and docstring: ``prefix + suffix`` = :func:`mli_kernel` ``(body,
    *fixed)`` for each ``suffix: fixed`` of ``flavours``, defined in ``namespace`` (the module's ``globals()``);
    returns their names."""
    names = [prefix + suffix for suffix in flavours]
    for name, fixed in zip(names, flavours.values(), strict=True):
        namespace[name] = mli_kernel(body, *fixed, name=name, doc=doc)
    return names

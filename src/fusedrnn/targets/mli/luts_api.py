"""``mli_krn_{tanh,sigm}_get_lut_size`` / ``_create_lut`` (MLI 2.0): tables built from the generator formula."""

from __future__ import annotations

from .luts import Lut, create_lut, lut_size
from .status import Status


def krn_tanh_get_lut_size() -> int:
    """Bytes of the tanh table (344 int16 entries)."""
    return lut_size("tanh")


def krn_sigm_get_lut_size() -> int:
    """Bytes of the sigmoid table (320 int16 entries)."""
    return lut_size("sigm")


def krn_tanh_create_lut(lut: Lut) -> Status:
    """Fill ``lut`` with the tanh table (Q.5 input, offset 172, Q15 output)."""
    return create_lut(lut, "tanh")


def krn_sigm_create_lut(lut: Lut) -> Status:
    """Fill ``lut`` with the sigmoid table (Q.4 input, offset 160, Q15 output)."""
    return create_lut(lut, "sigm")

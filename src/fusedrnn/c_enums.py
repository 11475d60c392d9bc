"""C enumerations of the SDK APIs as IntEnums: ``typedef enum { A, B, C } name_t;`` becomes an IntEnum named after
the C type whose members keep their C names, and each member is also a module constant, so that code ported from C
reads the same (``RnnAct.RNN_ACT_TANH == RNN_ACT_TANH == 1``)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum


def c_enum(name: str, doc: str, module: str, members: str | Mapping[str, int]) -> type[IntEnum]:
    """IntEnum ``name`` of ``module`` (pass ``__name__``; it makes the enum picklable): ``members`` is either the
    space-separated C names in declaration order (values 0, 1, 2, ... as C numbers them) or a name -> value map."""
    values = {m: i for i, m in enumerate(members.split())} if isinstance(members, str) else dict(members)
    enum = IntEnum(name, values, module=module)
    enum.__doc__ = doc
    return enum


def export_members(namespace: dict, *enums: type[IntEnum]) -> list[str]:
    """Make every member of ``enums`` a constant of ``namespace`` (a module's ``globals()``) under its C name;
    returns the names, in order, for the module's ``__all__``."""
    names = []
    for enum in enums:
        for member in enum:
            namespace[member.name] = member
            names.append(member.name)
    return names

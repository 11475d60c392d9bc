"""A seeded byte mutator for the fuzz tests of the readers (shared by test_safety.py and test_litert_hostile.py)."""

from __future__ import annotations

import random


def mutate(rng: random.Random, blob: bytes, region: list[int] | None = None) -> bytes:
    """Bit flips, byte overwrites, deletions, insertions or a truncation, at positions of ``region`` (default:
    anywhere)."""
    b = bytearray(blob)
    kind = rng.random()
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        if not b:
            break
        p = rng.choice(region) if region else rng.randrange(len(b))
        if p >= len(b):
            continue
        if kind < 0.55:
            b[p] ^= 1 << rng.randrange(8)
        elif kind < 0.7:
            b[p] = rng.randrange(256)
        elif kind < 0.8:
            del b[p]
        elif kind < 0.9:
            b.insert(p, rng.randrange(256))
        else:
            del b[p:]
    return bytes(b)

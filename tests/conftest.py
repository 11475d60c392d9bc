"""Shared test fixtures: locating ../shared (conformance data) and skipping cleanly without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("KERAS_BACKEND", "torch")

# Property tests draw the same examples on every run (CI must not turn red on a seed it never saw before);
# HYPOTHESIS_PROFILE=explore draws fresh ones.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = (PROJECT_ROOT / ".." / "shared").resolve()


@pytest.fixture(scope="session")
def quark_kernel(tmp_path_factory):
    """Quark's own ExtendedLSTM kernel, built once per test session from the amd-quark wheel (about 15 s of CPU),
    or skip."""
    from fusedrnn.targets.quark import reference

    try:
        return reference.build(tmp_path_factory.mktemp("quark_kernel"))
    except reference.OracleUnavailable as e:
        pytest.skip(f"Quark's kernel unavailable: {e}")


def shared_dir(*parts: str) -> Path:
    """SHARED/<parts>, or skip the calling test when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"conformance data not found: {p} (expected the shared/ folder at ../shared relative to the "
                    f"project root {PROJECT_ROOT})")
    return p

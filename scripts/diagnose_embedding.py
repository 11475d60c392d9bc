"""Build the speaker-embedding-like model of the diagnosis tests at full size (3 LSTMs, 40 -> 256, dense, ReLU, L2
norm) with mel-like calibration and evaluation data, and write them where ``fusedrnn diagnose`` can read them:

    python scripts/diagnose_embedding.py OUT_DIR
    fusedrnn diagnose OUT_DIR/encoder.onnx --data OUT_DIR/eval.npz --calibration OUT_DIR/cal.npz \\
        -t mli2-sa8 -t litert-int8x16 --methods --goal 0.99 --report OUT_DIR/diagnosis.html
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from diagnosis_models import embedding_model, mel_like  # noqa: E402


def main(out: str) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(embedding_model(hidden=256, inputs=40, layers=3), folder / "encoder.onnx")
    np.savez(folder / "cal.npz", mels=mel_like(80, 16, seed=1))
    np.savez(folder / "eval.npz", mels=mel_like(80, 16, seed=2))
    print(f"wrote encoder.onnx, cal.npz and eval.npz to {folder}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "embedding")

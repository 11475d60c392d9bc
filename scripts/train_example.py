"""Train and export fusedrnn's bundled example: an LSTM classifier of scikit-learn's handwritten digits.

Retrain (needs the ``example`` extra: torch and scikit-learn)::

    python scripts/train_example.py

Each 8x8 digit image is read as a sequence of 8 rows (8 timesteps of 8 features, pixels scaled to [0, 1]); a
one-layer LSTM (hidden size 64) reads the rows and a dense head maps its last hidden state to 10 logits. Seeds are
fixed and the held-out test split (25 %, stratified) is the one shipped.

The ONNX model is written with ``onnx.helper`` (torch.onnx is not used), opset 14::

    x [batch, 8, 8] --Transpose(1, 0, 2)--> [8, batch, 8] --LSTM--> Y_h [1, batch, 64]
      --Squeeze(0)--> [batch, 64] --Gemm(transB=1)--> logits [batch, 10]

The LSTM weights are converted from PyTorch's gate order (i, f, g, o) to ONNX's (i, o, f, c) with
``fusedrnn.conventions``; B = [bias_ih | bias_hh]. The script checks the exported model in onnxruntime against
the torch model (max |delta| < 1e-5) and writes

* ``src/fusedrnn/data/digits_lstm.onnx`` - the model;
* ``src/fusedrnn/data/digits_test.npz`` - the test split: ``x`` float32 [N, 8, 8], ``y`` int64 [N].
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from fusedrnn import conventions

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT / "src" / "fusedrnn" / "data"
MODEL_FILE = "digits_lstm.onnx"
DATA_FILE = "digits_test.npz"

SEED = 0
HIDDEN = 64
EPOCHS = 60
BATCH = 64
LR = 5e-3
TEST_SIZE = 0.25
OPSET = 14
IR_VERSION = 8


class DigitsLSTM(torch.nn.Module):
    def __init__(self, hidden: int = HIDDEN):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, hidden, batch_first=True)
        self.head = torch.nn.Linear(hidden, 10)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.head(h[0])


def load_split():
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)  # [N, 8, 8]: 8 rows = 8 timesteps of 8 features
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=TEST_SIZE, stratify=y, random_state=SEED)


def train(x_train, y_train, epochs: int) -> DigitsLSTM:
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    model = DigitsLSTM()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    gen = torch.Generator().manual_seed(SEED)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for start in range(0, len(xt), BATCH):
            idx = order[start : start + BATCH]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        sched.step()
        if (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1:3d}  train loss {total / len(xt):.4f}")
    model.eval()
    return model


def to_onnx(model: DigitsLSTM) -> onnx.ModelProto:
    """The ONNX graph of ``model``, written by hand (weights in ONNX gate order)."""
    lstm, head = model.lstm, model.head
    H = lstm.hidden_size

    def arr(t):
        return t.detach().cpu().numpy().astype(np.float32)

    def onnx_order(a):  # torch (i, f, g, o) -> ONNX (i, o, f, c) along the gate axis
        return conventions.convert(a, "lstm", "torch", "onnx", axis=0)

    W = onnx_order(arr(lstm.weight_ih_l0))[None]  # [1, 4H, 8]
    R = onnx_order(arr(lstm.weight_hh_l0))[None]  # [1, 4H, H]
    B = np.concatenate([onnx_order(arr(lstm.bias_ih_l0)), onnx_order(arr(lstm.bias_hh_l0))])[None]  # [1, 8H]
    inits = [
        numpy_helper.from_array(W, "lstm_W"),
        numpy_helper.from_array(R, "lstm_R"),
        numpy_helper.from_array(B, "lstm_B"),
        numpy_helper.from_array(np.array([0], np.int64), "squeeze_axes"),
        numpy_helper.from_array(arr(head.weight), "head_W"),  # [10, H]
        numpy_helper.from_array(arr(head.bias), "head_b"),  # [10]
    ]
    nodes = [
        helper.make_node("Transpose", ["x"], ["x_tm"], name="to_time_major", perm=[1, 0, 2]),
        helper.make_node("LSTM", ["x_tm", "lstm_W", "lstm_R", "lstm_B"], ["", "lstm_Y_h"], name="lstm",
                         hidden_size=H, direction="forward"),
        helper.make_node("Squeeze", ["lstm_Y_h", "squeeze_axes"], ["h_last"], name="last_hidden"),
        helper.make_node("Gemm", ["h_last", "head_W", "head_b"], ["logits"], name="head", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializer=inits,
        doc_string="8x8 digit images (rows as timesteps, pixels in [0, 1]) -> 10 class logits",
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                          producer_name="fusedrnn scripts/train_example.py")
    m.doc_string = (f"fusedrnn example: one-layer LSTM (hidden size {H}) classifier of scikit-learn's digits; "
                    "retrain with `python scripts/train_example.py`")
    onnx.checker.check_model(m, full_check=True)
    return m


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=EPOCHS)
    p.add_argument("--out", type=Path, default=DATA_DIR, help="output folder (default: the package data folder)")
    args = p.parse_args(argv)

    x_train, x_test, y_train, y_test = load_split()
    print(f"digits: {len(x_train)} train / {len(x_test)} test samples")
    model = train(x_train, y_train, args.epochs)
    with torch.no_grad():
        ref = model(torch.from_numpy(x_test)).numpy()
    acc_torch = float(np.mean(ref.argmax(1) == y_test))

    proto = to_onnx(model)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(["logits"], {"x": x_test})[0]
    delta = float(np.max(np.abs(got - ref)))
    acc_ort = float(np.mean(got.argmax(1) == y_test))
    print(f"test accuracy: torch {acc_torch:.2%}, onnxruntime {acc_ort:.2%}; max |torch - ORT| {delta:.2e}")
    if not delta < 1e-5:
        print(f"error: the exported model differs from the torch model by {delta:.2e} (limit 1e-5)", file=sys.stderr)
        return 1

    args.out.mkdir(parents=True, exist_ok=True)
    onnx.save(proto, args.out / MODEL_FILE)
    np.savez_compressed(args.out / DATA_FILE, x=x_test.astype(np.float32), y=y_test.astype(np.int64))
    sizes = {f: (args.out / f).stat().st_size for f in (MODEL_FILE, DATA_FILE)}
    print("wrote " + ", ".join(f"{args.out / f} ({s / 1024:.1f} KiB)" for f, s in sizes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Float cell engines (LSTM, GRU, RNN, dense) over canonical weights, with storage-rounding hooks (``rounding``) and
observers (``observers``) on their named points; ``reference``: a short, readable float64 step per cell kind, the
engines' oracle; ``dispatch``: the one table of backends (compiled, rounded, NumPy) and the engine setting."""

from .activations import ACTIVATION_NAMES, Activation, parse_activations
from .dense import dense
from .gru import gru_sequence
from .lstm import lstm_sequence
from .observers import Range, RangeObserver
from .rnn import rnn_sequence
from .rounding import BF16, EXACT, FP16, POINTS, RoundingPolicy

__all__ = [
    "ACTIVATION_NAMES",
    "Activation",
    "parse_activations",
    "dense",
    "gru_sequence",
    "lstm_sequence",
    "rnn_sequence",
    "Range",
    "RangeObserver",
    "BF16",
    "EXACT",
    "FP16",
    "POINTS",
    "RoundingPolicy",
]

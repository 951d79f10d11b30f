"""Configurations of the ALBERT paper's Table 2 (V = 30000), usable with no weights and no network.

Lan et al. 2020, "ALBERT: A Lite BERT for Self-supervised Learning of Language Representations":

    model            L    H     E    FFN     sharing   paper's count
    bert-base        12   768   768  3072    none      108M
    bert-large       24   1024  1024 4096    none      334M
    bert-xlarge      24   2048  2048 8192    none      1270M
    albert-base      12   768   128  3072    all       12M
    albert-large     24   1024  128  4096    all       18M
    albert-xlarge    24   2048  128  8192    all       59M
    albert-xxlarge   12   4096  128  16384   all       233M

Head counts follow the released checkpoints (they change no parameter count).
"""

from __future__ import annotations

from compress.models.config import EncoderConfig

PAPER_VOCAB = 30000


def _bert(layers: int, hidden: int, heads: int) -> EncoderConfig:
    return EncoderConfig(
        vocab_size=PAPER_VOCAB, embedding_size=hidden, hidden_size=hidden, num_layers=layers,
        num_heads=heads, ffn_size=4 * hidden,
    )


def _albert(layers: int, hidden: int, heads: int) -> EncoderConfig:
    return EncoderConfig(
        vocab_size=PAPER_VOCAB, embedding_size=128, hidden_size=hidden, num_layers=layers,
        num_heads=heads, ffn_size=4 * hidden, sharing="all", groups=1, activation="gelu_new",
        hidden_dropout=0.0, attention_dropout=0.0,
    )


PAPER_CONFIGS: dict[str, EncoderConfig] = {
    "bert-base": _bert(12, 768, 12),
    "bert-large": _bert(24, 1024, 16),
    "bert-xlarge": _bert(24, 2048, 16),
    "albert-base": _albert(12, 768, 12),
    "albert-large": _albert(24, 1024, 16),
    "albert-xlarge": _albert(24, 2048, 16),
    "albert-xxlarge": _albert(12, 4096, 64),
}

# The parameter counts printed in the paper's Table 2, for reports to set beside ours.
PAPER_PARAMS: dict[str, str] = {
    "bert-base": "108M", "bert-large": "334M", "bert-xlarge": "1270M",
    "albert-base": "12M", "albert-large": "18M", "albert-xlarge": "59M", "albert-xxlarge": "233M",
}

# ALBERT paper Tables 3-4: ALBERT-base shape, parameters by embedding size E and sharing mode.
PAPER_ABLATION: dict[tuple[int, str], str] = {
    (768, "all"): "31M", (768, "attention"): "83M", (768, "ffn"): "57M", (768, "none"): "108M",
    (128, "all"): "12M", (128, "attention"): "64M", (128, "ffn"): "38M", (128, "none"): "89M",
}

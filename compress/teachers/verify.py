"""Numerical parity of our encoder with transformers on a real checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from compress.models.checkpoints import load_encoder
from compress.teachers.registry import load_tokenizer, resolve_teacher_dir

# Sentences of different lengths, so padding and its mask are exercised.
VERIFY_SENTENCES = (
    "A gripping, beautifully shot film.",
    "The plot wanders, the jokes fall flat, and two hours feel like four; still, the lead is superb.",
    "Not bad.",
    "An uneven but often moving portrait of a family coming apart at the seams.",
)


@dataclass(frozen=True)
class ParityResult:
    """How far our encoder is from transformers' on the same batch."""

    checkpoint: str
    source: str               # "bert" or "albert"
    max_abs_diff: float       # last hidden state, over every token that is not padding
    max_abs_diff_pooled: float
    batch_shape: tuple[int, int]


def verify_parity(name_or_dir: str) -> ParityResult:
    """Run the same batch through our encoder and ``transformers.AutoModel`` in fp32 eval mode."""
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own status line says what is loading
    directory = Path(resolve_teacher_dir(name_or_dir))
    loaded = load_encoder(directory)
    tokenizer = load_tokenizer(str(directory))
    batch = tokenizer(list(VERIFY_SENTENCES), padding=True, return_tensors="pt")
    # A run's student carries a classifier the bare AutoModel leaves out: transformers' load report
    # would list those keys on stderr for nothing, so its warnings are off for this one load.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        reference = AutoModel.from_pretrained(directory, dtype=torch.float32).eval()
    finally:
        hf_logging.set_verbosity(verbosity)
    with torch.inference_mode():
        ours = loaded.model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
        theirs = reference(**batch)
    # Outputs at padded positions are undefined (transformers masks padded queries too), so they
    # are left out; every real token counts.
    real = batch["attention_mask"].bool()
    return ParityResult(
        checkpoint=str(name_or_dir),
        source=loaded.source,
        max_abs_diff=(ours.last_hidden_state - theirs.last_hidden_state)[real].abs().max().item(),
        max_abs_diff_pooled=(ours.pooled - theirs.pooler_output).abs().max().item(),
        batch_shape=tuple(batch["input_ids"].shape),
    )

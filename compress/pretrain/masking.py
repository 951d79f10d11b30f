"""BERT's masked-LM corruption (Devlin et al. 2019), used unchanged by ALBERT: 15% of the real tokens are
chosen; of those, 80% become [MASK], 10% a random token and 10% stay as they are; the model predicts the
original token at every chosen position."""

from __future__ import annotations

from dataclasses import dataclass

import torch

IGNORE = -100  # cross_entropy's ignore_index: positions that are not predicted


@dataclass(frozen=True)
class MaskingSpec:
    """What the corruption needs from the tokenizer."""

    mask_id: int
    vocab_size: int
    special_ids: tuple[int, ...]   # never chosen ([CLS], [SEP], [PAD], ...)
    probability: float = 0.15


def mask_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor, spec: MaskingSpec,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The corrupted ids and the labels (the original id where a token was chosen, ``IGNORE`` elsewhere).

    At least one token of every sequence that has a maskable token is chosen, so no row is without a
    prediction; the choice is reproducible with the same ``generator`` state."""
    shape = input_ids.shape
    maskable = attention_mask.bool() & ~torch.isin(input_ids, torch.tensor(spec.special_ids, device=input_ids.device))
    draw = torch.rand(shape, generator=generator).to(input_ids.device)
    chosen = maskable & (draw < spec.probability)
    # A short sequence can draw nothing: choose its most likely token (the lowest draw) instead.
    empty = ~chosen.any(dim=1) & maskable.any(dim=1)
    lowest = torch.where(maskable, draw, torch.full_like(draw, 2.0)).argmin(dim=1)
    chosen[empty, lowest[empty]] = True

    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE))
    action = torch.rand(shape, generator=generator).to(input_ids.device)
    random_ids = torch.randint(spec.vocab_size, shape, generator=generator).to(input_ids.device)
    corrupted = input_ids.clone()
    corrupted[chosen & (action < 0.8)] = spec.mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    corrupted[swap] = random_ids[swap]
    return corrupted, labels

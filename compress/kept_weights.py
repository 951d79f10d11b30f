"""Which weights a training stage keeps, and the running average it may keep them from.

A stage is evaluated on dev at set points (every epoch's end, and every ``eval_every`` steps where it says); at each,
:class:`KeptWeights` is offered the trained weights and, where the stage averages them, their exponential moving
average (:class:`WeightAverage`); it keeps a copy of whichever scored best so far. The score is what the stage
selects on: the dev metric, the dev loss of a layer-wise stage, or the divergence of the student's dev answers from the
teacher's (:mod:`compress.distill.stage`), so a stage's kept weights follow a low-noise signal where it has one.
Both pieces hold plain tensors and numbers, so a checkpoint carries them and a resumed stage keeps what it had.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


class KeptState(TypedDict):
    """:class:`KeptWeights` in a checkpoint."""

    score: float
    weights: dict[str, torch.Tensor] | None
    epoch: int
    step: int
    averaged: bool
    improved: bool


@dataclass
class KeptWeights:
    """The best weights evaluated so far (a higher score is better), where they were taken, and whether the epoch under
    way has bettered them (what patience counts)."""

    score: float = -math.inf
    weights: dict[str, torch.Tensor] | None = None
    epoch: int = 0                 # the epoch (1-based) and optimizer step they were taken at
    step: int = 0
    averaged: bool = False         # the running average's weights, not the trained ones
    improved: bool = False         # bettered since the epoch began

    def offer(self, score: float, model: nn.Module, *, epoch: int, step: int, averaged: bool = False) -> bool:
        """Keep a copy of ``model``'s weights when ``score`` beats the best so far; whether it did."""
        if not score > self.score:
            return False
        self.score, self.epoch, self.step, self.averaged, self.improved = score, epoch, step, averaged, True
        self.weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return True

    def epoch_ended(self) -> bool:
        """Whether the epoch that just ended bettered the kept weights; the next starts afresh."""
        improved, self.improved = self.improved, False
        return improved

    def state(self) -> KeptState:
        return KeptState(score=self.score, weights=self.weights, epoch=self.epoch, step=self.step,
                         averaged=self.averaged, improved=self.improved)

    @classmethod
    def of(cls, state: KeptState) -> KeptWeights:
        return cls(**state)


class WeightAverage:
    """An exponential moving average of a model's trained weights, updated after every optimizer step (torch's
    :class:`~torch.optim.swa_utils.AveragedModel`): ``average = decay * average + (1 - decay) * weights``. Buffers are
    not averaged (the encoder's are constants)."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0 < decay < 1:
            raise ValueError(f"the average's decay must be in (0, 1), got {decay}.")
        self.decay = decay
        self.averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=False)

    @property
    def model(self) -> nn.Module:
        """The averaged weights as a model of the trained one's class."""
        return self.averaged.module

    def update(self, model: nn.Module) -> None:
        self.averaged.update_parameters(model)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.averaged.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.averaged.load_state_dict(state)

"""The head-importance curve (Michel et al. 2019, figure 3): accuracy with a growing share of the heads
removed and no recovery, in importance order (least important first) and in a seeded random order; and the width
curve, the same with a shrinking number of the hidden channels kept (first-order Taylor scores of the residual
stream's channels against a seeded random choice of as many).

It is drawn on the dev split (:data:`CURVE_SPLIT`), never on test: a comparison keeps the test split for judging its
models once, and a curve read 20 times on it before that would be 20 looks at the sentences that judge."""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the record (HeadCurve) is read where torch is not imported: run records, reports
    from compress.models.encoder import Encoder
    from compress.prune.importance import Importance

SHARES = tuple(i / 10 for i in range(10))   # 0%, 10%, ..., 90% of the heads removed
CURVE_SPLIT = "dev"


@dataclass
class HeadCurve:
    """Accuracy of the source on ``split`` with a share of its heads removed, least important first and at random."""

    shares_removed: list[float]
    heads: int
    seed: int
    importance: list[float]
    random: list[float]
    split: str = "test"   # the sentences it was drawn on: dev (CURVE_SPLIT); records written before it named one, test


def removal_order(importance: Importance, seed: int | None) -> list[tuple[int, int]]:
    """Every (block, head), least important first (block-normalised scores), or shuffled with ``seed``."""
    heads = [(b, h) for b, scores in enumerate(importance.heads) for h in range(len(scores))]
    if seed is not None:
        random.Random(seed).shuffle(heads)
        return heads
    return sorted(heads, key=lambda bh: (importance.heads[bh[0]][bh[1]], bh))


def without_heads(model: Encoder, removed: list[tuple[int, int]]) -> Encoder:
    from compress.prune.structure import Keep, prune_model

    config = model.config
    gone = set(removed)
    everything = Keep.everything(config)
    heads = tuple(tuple(h for h in kept if (b, h) not in gone) for b, kept in enumerate(everything.heads))
    return prune_model(model, Keep(heads, everything.neurons, everything.layers))


def head_curve(model: Encoder, importance: Importance, accuracy: Callable[[Encoder, str], float],
               seed: int) -> HeadCurve:
    """Accuracy (``accuracy(model, split)``, called 2 x 10 times on the :data:`CURVE_SPLIT` sentences, the split the
    curve records) at each share of heads removed, for both orders."""
    total = sum(len(scores) for scores in importance.heads)

    def along(order: list[tuple[int, int]]) -> list[float]:
        return [accuracy(without_heads(model, order[:round(share * total)]), CURVE_SPLIT) for share in SHARES]

    return HeadCurve(list(SHARES), total, seed, importance=along(removal_order(importance, None)),
                     random=along(removal_order(importance, seed)), split=CURVE_SPLIT)


WIDTH_SHARES = tuple(k / 12 for k in range(12, 5, -1))   # 12/12 .. 6/12 of the channels kept: 384, 352, ... 192


@dataclass
class WidthCurve:
    """Accuracy of the source on ``split`` keeping ``channels`` of its ``hidden`` channels, the highest-scoring
    (``importance``) and a random choice (``random``) of as many, with no recovery."""

    channels: list[int]
    hidden: int
    seed: int
    importance: list[float]
    random: list[float]
    split: str = CURVE_SPLIT


def without_channels(model: Encoder, kept: list[int]) -> Encoder:
    from compress.prune.structure import Keep, prune_model

    everything = Keep.everything(model.config)
    return prune_model(model, Keep(everything.heads, everything.neurons, everything.layers, tuple(sorted(kept))))


def width_curve(model: Encoder, importance: Importance, accuracy: Callable[[Encoder, str], float],
                seed: int) -> WidthCurve:
    """Accuracy (``accuracy(model, split)``, called 2 x 7 times on the :data:`CURVE_SPLIT` sentences) keeping each
    share in :data:`WIDTH_SHARES` of the hidden channels, the best scored and at random."""
    if importance.channels is None:
        raise ValueError("these importance scores hold no channel scores.")
    scores = importance.channels
    hidden = len(scores)
    best = sorted(range(hidden), key=lambda c: (-scores[c], c))
    shuffled = list(range(hidden))
    random.Random(seed).shuffle(shuffled)
    counts = [round(share * hidden) for share in WIDTH_SHARES]
    return WidthCurve(counts, hidden, seed,
                      importance=[accuracy(without_channels(model, best[:n]), CURVE_SPLIT) for n in counts],
                      random=[accuracy(without_channels(model, shuffled[:n]), CURVE_SPLIT) for n in counts])


def head_curve_png(curve: HeadCurve, teacher_name: str) -> bytes:
    """The curve as PNG bytes (a matplotlib figure of its own: no display, no pyplot state)."""
    shares = [100 * s for s in curve.shares_removed]
    return _png(shares, curve, "least important first (|dL/dxi_h|)", f"heads removed (% of {curve.heads})",
                f"{teacher_name}: heads removed without recovery")


def width_curve_png(curve: WidthCurve, teacher_name: str) -> bytes:
    """The width curve as PNG bytes."""
    return _png(curve.channels, curve, "highest first-order Taylor score",
                f"hidden channels kept (of {curve.hidden})", f"{teacher_name}: width cut without recovery",
                reverse=True)


def _png(xs: list[float] | list[int], curve: HeadCurve | WidthCurve, ranked: str, xlabel: str, title: str,
         reverse: bool = False) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), layout="tight")
    ax = fig.add_subplot()
    ax.plot(xs, [100 * a for a in curve.importance], "o-", label=ranked)
    ax.plot(xs, [100 * a for a in curve.random], "s--", label=f"random order (seed {curve.seed})")
    if reverse:
        ax.invert_xaxis()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{curve.split} accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()

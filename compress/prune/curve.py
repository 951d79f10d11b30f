"""The head-importance curve (Michel et al. 2019, figure 3): accuracy with a growing share of the heads
removed and no recovery, in importance order (least important first) and in a seeded random order.

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


def head_curve_png(curve: HeadCurve, teacher_name: str) -> bytes:
    """The curve as PNG bytes (a matplotlib figure of its own: no display, no pyplot state)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), layout="tight")
    ax = fig.add_subplot()
    shares = [100 * s for s in curve.shares_removed]
    ax.plot(shares, [100 * a for a in curve.importance], "o-", label="least important first (|dL/dxi_h|)")
    ax.plot(shares, [100 * a for a in curve.random], "s--", label=f"random order (seed {curve.seed})")
    ax.set_xlabel(f"heads removed (% of {curve.heads})")
    ax.set_ylabel(f"{curve.split} accuracy (%)")
    ax.set_title(f"{teacher_name}: heads removed without recovery")
    ax.grid(alpha=0.3)
    ax.legend()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()

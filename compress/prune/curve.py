"""The head-importance curve (Michel et al. 2019, figure 3): accuracy with a growing share of the heads
removed and no recovery, in importance order (least important first) and in a seeded random order."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compress.models.encoder import Encoder
from compress.prune.importance import Importance
from compress.prune.structure import Keep, prune_model

SHARES = tuple(i / 10 for i in range(10))   # 0%, 10%, ..., 90% of the heads removed


def removal_order(importance: Importance, seed: int | None) -> list[tuple[int, int]]:
    """Every (block, head), least important first (block-normalised scores), or shuffled with ``seed``."""
    heads = [(b, h) for b, scores in enumerate(importance.heads) for h in range(len(scores))]
    if seed is not None:
        random.Random(seed).shuffle(heads)
        return heads
    return sorted(heads, key=lambda bh: (importance.heads[bh[0]][bh[1]], bh))


def without_heads(model: Encoder, removed: list[tuple[int, int]]) -> Encoder:
    config = model.config
    gone = set(removed)
    everything = Keep.everything(config)
    heads = tuple(tuple(h for h in kept if (b, h) not in gone) for b, kept in enumerate(everything.heads))
    return prune_model(model, Keep(heads, everything.neurons, everything.layers))


def head_curve(model: Encoder, importance: Importance, accuracy: Callable[[Encoder], float],
               seed: int) -> dict[str, Any]:
    """Accuracy (``accuracy(model)``, called 2 x 10 times) at each share of heads removed, for both orders."""
    total = sum(len(scores) for scores in importance.heads)
    curves: dict[str, list[float]] = {}
    for name, order in (("importance", removal_order(importance, None)), ("random", removal_order(importance, seed))):
        curves[name] = [accuracy(without_heads(model, order[:round(share * total)])) for share in SHARES]
    return {"shares_removed": list(SHARES), "heads": total, "seed": seed, **curves}


def plot_head_curve(curve: dict[str, Any], path: Path, teacher_name: str) -> None:
    """The curve as a PNG (matplotlib, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    shares = [100 * s for s in curve["shares_removed"]]
    ax.plot(shares, [100 * a for a in curve["importance"]], "o-", label="least important first (|dL/dxi_h|)")
    ax.plot(shares, [100 * a for a in curve["random"]], "s--", label=f"random order (seed {curve['seed']})")
    ax.set_xlabel(f"heads removed (% of {curve['heads']})")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{teacher_name}: heads removed without recovery")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

"""The relaxed-ALBERT curve: test accuracy against parameters for ``albert --rank r`` from each start, with other
students as points on the same plot. One ``compress compare`` trains (or reuses) every run; the plot reads its
comparison.json.

    python benchmarks/albert_curve.py [--ranks 0 4 8 16 32 64] [--starts zero svd]
                                      [--others distilbert tinybert distilbert+prune]
                                      [--out runs/albert-curve] [--plot docs/images/albert_curve.png]
                                      [--plot-only] [--threads 2]

Starts (``--delta-init``): ``zero`` is ``albert[rank=r]`` (the last layer's block shared, deltas at zero: the
strict student plus capacity); ``svd`` is ``albert[rank=r,delta_init=svd,shared_init=average,own_norms=true]``
(the average of the layers shared, each layer's residual started at its rank-r SVD, its biases and layer norms
its own). Prints the compare command it runs, one line per point, and draws the curve to ``--plot``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from matplotlib.figure import Figure

from compress.reports.comparison_data import ShownComparison, read_comparison
from compress.runs.compare import CompareConfig, compare

STARTS = {"zero": "", "svd": "delta_init=svd,shared_init=average,own_norms=true"}


def relaxed(rank: int, start: str) -> str:
    """The method spec of the relaxed ALBERT of ``rank`` from ``start``; rank 0 from zero is plain ``albert``."""
    options = ",".join(o for o in (f"rank={rank}" if rank else "", STARTS[start]) if o)
    return f"albert[{options}]" if options else "albert"


def plot(comparison: ShownComparison, ranks: list[int], starts: list[str], out: Path) -> None:
    rows = {m.method: m for m in comparison.methods}
    fig = Figure(figsize=(8.5, 5.2), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    teacher = comparison.teacher
    if teacher is not None and teacher.accuracy is not None:
        ax.axhline(97 * teacher.accuracy, color="#999999", linestyle="--", linewidth=1, label="97% of the teacher")
    for start, color in zip(starts, ("#1f77b4", "#d62728")):
        points = [(rows[relaxed(r, start)].params / 1e6, 100 * rows[relaxed(r, start)].accuracy, r) for r in ranks
                  if relaxed(r, start) in rows and rows[relaxed(r, start)].accuracy is not None]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], "o-", color=color,
                    label=f"albert --rank r, {start} start")
            for x, y, r in points:
                ax.annotate(f"r={r}", (x, y), textcoords="offset points", xytext=(4, -11), fontsize=8, color=color)
    shown = {relaxed(r, s) for r in ranks for s in starts}
    for m in comparison.methods:
        if m.method not in shown and m.accuracy is not None and m.params is not None:
            ax.plot([m.params / 1e6], [100 * m.accuracy], "s", color="#2ca02c")
            ax.annotate(m.method, (m.params / 1e6, 100 * m.accuracy), textcoords="offset points", xytext=(5, 3),
                        fontsize=8)
    ax.set_xlabel("parameters (millions; embeddings + encoder + pooler)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"Relaxed ALBERT on {comparison.dataset.name or 'the task'}: accuracy against parameters")
    ax.grid(True, color="#e5e5e5")
    ax.legend(loc="lower right", fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[0, 4, 8, 16, 32, 64])
    parser.add_argument("--starts", nargs="+", choices=sorted(STARTS), default=["zero", "svd"])
    parser.add_argument("--others", nargs="*", default=["distilbert", "tinybert", "distilbert+prune"])
    parser.add_argument("--out", default="runs/albert-curve")
    parser.add_argument("--plot", default="docs/images/albert_curve.png")
    parser.add_argument("--plot-only", action="store_true", help="draw from the comparison.json in --out")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    methods = [relaxed(r, s) for s in args.starts for r in args.ranks] + args.others
    if args.plot_only:
        data = json.loads((Path(args.out) / "comparison.json").read_text())
    else:
        print(f"compress compare --methods '{','.join(methods)}' --threads {args.threads} --out {args.out}")
        _, result = compare(CompareConfig(methods=methods, out=args.out, threads=args.threads), progress=print)
        data = result.to_dict()
    comparison = read_comparison(data)
    for m in comparison.methods:
        print(f"{m.method:70s} {m.params / 1e6 if m.params else float('nan'):6.2f}M  "
              f"test {m.accuracy if m.accuracy is not None else float('nan'):.4f}  "
              f"retention {100 * (m.retention or float('nan')):.1f}%")
    plot(comparison, args.ranks, args.starts, Path(args.plot))
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()

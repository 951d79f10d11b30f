"""The relaxed-ALBERT curve: test accuracy against parameters for ``albert --rank r`` from each start, with other
students as points on the same plot. One ``compress compare`` trains (or reuses) every run; the plot reads its
comparison.json.

    python benchmarks/albert_curve.py [--ranks 0 4 8 16 32 64] [--starts zero svd]
                                      [--others distilbert tinybert distilbert+prune]
                                      [--out runs/albert-curve] [--plot docs/images/albert_curve.png]
                                      [--plot-only] [--threads 2]
    python benchmarks/albert_curve.py --probe [--ranks 0 16 32 64 128] [--starts svd zero]

Starts: ``svd`` is ``albert[rank=r,shared_init=average]`` (the defaults with --rank, named so that a run made
before they were is reused: the average of the layers shared, each layer's residual started at its rank-r SVD, its
biases and layer norms its own); ``zero`` is ``albert[rank=r,delta_init=zero,shared_init=last,own_norms=false]``
(the strict student plus deltas at zero, LoRA's start). At rank 0 they are the strict students sharing the
average and the last layer (plain ``albert``). Prints the compare command it runs, one line per point, and draws
the curve to ``--plot``.

``--probe`` trains nothing: it builds each start from the fine-tuned teacher at E = H (no factorized embedding, so
only the sharing and the deltas differ from the teacher) and prints its test accuracy, to show how much of the
teacher's function each start keeps before distillation.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from matplotlib.figure import Figure

from compress.registry.method import format_value
from compress.reports.comparison_data import ShownComparison, read_comparison
from compress.runs.compare import CompareConfig, compare

START_OPTIONS = {"svd": {"shared_init": "average"},
                 "zero": {"delta_init": "zero", "shared_init": "last", "own_norms": False}}
STARTS = {start: ",".join(f"{k}={format_value(v)}" for k, v in options.items())
          for start, options in START_OPTIONS.items()}


def relaxed(rank: int, start: str) -> str:
    """The method spec of the relaxed ALBERT of ``rank`` from ``start``."""
    if rank == 0:
        return "albert[shared_init=average]" if start == "svd" else "albert"
    return f"albert[rank={rank},{STARTS[start]}]"


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


def probe(ranks: list[int], starts: list[str], threads: int) -> None:
    import torch

    from compress.data.load import load_task
    from compress.methods.albert import build
    from compress.students.albert import AlbertOptions
    from compress.teachers.finetune import FinetuneConfig, finetune_teacher, tokenized_for
    from compress.training import evaluate

    torch.set_num_threads(threads)
    task = load_task("mr")
    finetuned = finetune_teacher("minilm", task, FinetuneConfig())
    test = tokenized_for(finetuned, task).dataloader("test", batch_size=128)
    teacher = finetuned.load().model.eval()
    width = teacher.config.hidden_size
    print(f"teacher: test {evaluate(teacher, test, torch.device('cpu')).accuracy:.4f}")
    for start in starts:
        for rank in ranks:
            options = AlbertOptions(embedding_size=width, rank=rank, **START_OPTIONS[start])
            student = build(teacher, options).eval()
            accuracy = evaluate(student, test, torch.device("cpu")).accuracy
            print(f"{start} start, rank {rank:3d}, E = H, untrained: test {accuracy:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[0, 4, 8, 16, 32, 64])
    parser.add_argument("--starts", nargs="+", choices=sorted(START_OPTIONS), default=["zero", "svd"])
    parser.add_argument("--others", nargs="*", default=["distilbert", "tinybert", "distilbert+prune"])
    parser.add_argument("--out", default="runs/albert-curve")
    parser.add_argument("--plot", default="docs/images/albert_curve.png")
    parser.add_argument("--plot-only", action="store_true", help="draw from the comparison.json in --out")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--probe", action="store_true", help="the untrained starts' test accuracy (trains nothing)")
    args = parser.parse_args()
    if args.probe:
        probe(args.ranks, args.starts, args.threads)
        return

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

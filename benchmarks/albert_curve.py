"""The sharing-to-teacher curve: retention of the teacher's accuracy, with its 95% interval over test sentences and
seeds, against parameters, for the strict ALBERT (rank 0), ``albert[rank=r]`` (each layer adds its own rank-r delta
to the shared blocks) and the unshared student (``albert[sharing=none]``: the factorized embedding, every layer its
own). One ``compress compare`` trains (or reuses) every run; the plot reads its comparison.json.

    python benchmarks/albert_curve.py [--ranks 0 16 48 128] [--start default|svd|zero] [--seeds 13,14,15]
                                      [--others 'albert[sharing=none]' distilbert] [--out runs/albert-curve]
                                      [--plot docs/images/albert_curve.png] [--plot-only] [--threads 2]
                                      [--repeats 30]
    python benchmarks/albert_curve.py --probe [--ranks 0 16 32 64 128] [--start svd]

Starts: ``default`` is what ``compress run albert --rank r`` builds (``albert`` at rank 0, ``albert[rank=r]``
above); ``svd`` is ``albert[rank=r,shared_init=average]`` (the average of the layers shared, each layer's residual
started at its rank-r SVD, its biases and layer norms its own; at rank 0 the strict student sharing the average);
``zero`` is ``albert[rank=r,delta_init=zero,shared_init=last,own_norms=false]`` (the strict student plus deltas at
zero, LoRA's start). Prints the compare command it runs, one line per point, and draws the curve to ``--plot``.

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
from compress.reports.comparison_data import ShownComparison, ShownMethod, read_comparison
from compress.runs.compare import compare
from compress.runs.compare_plan import CompareConfig

START_OPTIONS = {"default": {},
                 "svd": {"shared_init": "average"},
                 "zero": {"delta_init": "zero", "shared_init": "last", "own_norms": False}}
STARTS = {start: "".join(f",{k}={format_value(v)}" for k, v in options.items())
          for start, options in START_OPTIONS.items()}


def relaxed(rank: int, start: str) -> str:
    """The method spec of the relaxed ALBERT of ``rank`` from ``start``."""
    if rank == 0:
        return "albert[shared_init=average]" if start == "svd" else "albert"
    return f"albert[rank={rank}{STARTS[start]}]"


def plot(comparison: ShownComparison, ranks: list[int], start: str, out: Path) -> None:
    rows = {m.method: m for m in comparison.methods}
    fig = Figure(figsize=(8.5, 5.2), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    ax.axhline(100, color="#999999", linestyle=":", linewidth=1, label="the teacher")
    ax.axhline(97, color="#999999", linestyle="--", linewidth=1, label="97% of the teacher")

    def point(m: ShownMethod) -> tuple[float, float, float, float]:
        interval = m.retention_interval
        low, high = (interval.low, interval.high) if interval else (m.retention, m.retention)
        return m.params / 1e6, 100 * m.retention, 100 * (m.retention - low), 100 * (high - m.retention)

    curve = [(point(rows[relaxed(r, start)]), r) for r in ranks
             if relaxed(r, start) in rows and rows[relaxed(r, start)].retention is not None]
    if curve:
        xs, ys, lows, highs = zip(*(p for p, _ in curve))
        ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o-", color="#1f77b4", capsize=3,
                    label="albert, rank r (r = 0: strict sharing)")
        for (x, y, _, _), r in curve:
            ax.annotate(f"r={r}", (x, y), textcoords="offset points", xytext=(5, -12), fontsize=8, color="#1f77b4")
    shown = {relaxed(r, start) for r in ranks}
    for m in comparison.methods:
        if m.method not in shown and m.retention is not None and m.params is not None:
            x, y, low, high = point(m)
            ax.errorbar([x], [y], yerr=[[low], [high]], fmt="s", color="#2ca02c", capsize=3)
            ax.annotate(m.method, (x, y), textcoords="offset points", xytext=(6, 3), fontsize=8)
    seeds = len(comparison.context.seeds) or 1
    ax.set_xlabel("parameters (millions; embeddings + encoder + pooler)")
    ax.set_ylabel("retention (% of the teacher's test accuracy)")
    ax.set_title(f"ALBERT on {comparison.dataset.name or 'the task'}: from strict sharing to none "
                 f"({seeds} seed{'s' if seeds > 1 else ''}, 95% intervals)")
    ax.grid(True, color="#e5e5e5")
    ax.legend(loc="lower right", fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)


def probe(ranks: list[int], start: str, threads: int) -> None:
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
    for rank in ranks:
        options = AlbertOptions(embedding_size=width, rank=rank, **START_OPTIONS[start])
        student = build(teacher, options).eval()
        accuracy = evaluate(student, test, torch.device("cpu")).accuracy
        print(f"{start} start, rank {rank:3d}, E = H, untrained: test {accuracy:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[0, 16, 48, 128])
    parser.add_argument("--start", choices=sorted(START_OPTIONS), default="default")
    parser.add_argument("--others", nargs="*", default=["albert[sharing=none]", "distilbert"])
    parser.add_argument("--seeds", default="13,14,15")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--out", default="runs/albert-curve")
    parser.add_argument("--plot", default="docs/images/albert_curve.png")
    parser.add_argument("--plot-only", action="store_true", help="draw from the comparison.json in --out")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30, help="batch-1 latency calls per model (speed only)")
    parser.add_argument("--probe", action="store_true", help="the untrained starts' test accuracy (trains nothing)")
    args = parser.parse_args()
    if args.probe:
        probe(args.ranks, args.start, args.threads)
        return

    methods = [relaxed(r, args.start) for r in args.ranks] + args.others
    if args.plot_only:
        data = json.loads((Path(args.out) / "comparison.json").read_text())
    else:
        seeds = [int(s) for s in args.seeds.split(",")]
        print(f"compress compare --seeds {args.seeds} --precision {args.precision} --methods '{','.join(methods)}' "
              f"--threads {args.threads} --repeats {args.repeats} --out {args.out}")
        _, result = compare(CompareConfig(methods=methods, out=args.out, threads=args.threads, seeds=seeds,
                                          precision=args.precision, repeats=args.repeats), progress=print)
        data = result.to_dict()
    comparison = read_comparison(data)
    print(f"{'method':32s} {'params':>7s}  {'accuracy':>8s}  retention (95% interval)")
    for m in comparison.methods:
        interval = m.retention_interval
        shown = f" ({100 * interval.low:.1f} to {100 * interval.high:.1f})" if interval else ""
        print(f"{m.method:32s} {m.params / 1e6 if m.params else float('nan'):6.2f}M  "
              f"{100 * (m.accuracy or float('nan')):7.1f}%  {100 * (m.retention or float('nan')):.1f}%{shown}")
    plot(comparison, args.ranks, args.start, Path(args.plot))
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()

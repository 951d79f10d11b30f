"""The training-free curve of low-rank factorization: test accuracy of the fine-tuned teacher, factorized with no
recovery, against the share of its encoder-layer parameters kept, for each weighting (svd, fisher, activation).

    python benchmarks/lowrank_curve.py [--teacher minilm] [--dataset mr] [--keep 0.9 0.75 0.6 0.5 0.4]
                                       [--allocation energy] [--out docs/images/lowrank_curve.png]
                                       [--spectra docs/images/lowrank_spectra.png] [--spectra-only]

``--spectra`` also draws the fine-tuned teacher's singular-value spectra: the share of each matrix's weight
energy its first r singular values keep, for Q, K, V, O, FFN in and FFN out (mean over the layers), with each
shape's break-even rank marked; ``--spectra-only`` skips the curve.

"Encoder-layer parameters" are the attention and FFN components (weights, biases, layer norms), counted on the
model itself. Prints one line per point and a JSON summary; draws the curve to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from compress.data.load import load_task
from compress.methods.lowrank.options import LowRankOptions
from compress.methods.lowrank.verb import apply
from compress.models.accounting import count_parameters
from compress.registry import Context
from compress.teachers.finetune import FinetuneConfig, finetune_teacher, tokenized_for
from compress.training import evaluate


def layer_params(model: torch.nn.Module) -> int:
    count = count_parameters(model).by_component
    return count["attention"] + count["ffn"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--dataset", default="mr")
    parser.add_argument("--keep", type=float, nargs="+", default=[0.9, 0.75, 0.6, 0.5, 0.4])
    parser.add_argument("--weightings", nargs="+", default=["svd", "fisher", "activation"])
    parser.add_argument("--allocation", default="energy")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="docs/images/lowrank_curve.png")
    parser.add_argument("--spectra", default=None)
    parser.add_argument("--spectra-only", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    task = load_task(args.dataset)
    finetuned = finetune_teacher(args.teacher, task, FinetuneConfig())
    data = tokenized_for(finetuned, task)
    teacher = finetuned.load().model.eval()
    test = lambda model: evaluate(model, data.dataloader("test", batch_size=128), torch.device("cpu")).accuracy  # noqa: E731
    if args.spectra:
        _spectra(teacher, Path(args.spectra), f"{args.teacher} fine-tuned on {args.dataset}")
    if args.spectra_only:
        return
    base, base_params = test(teacher), layer_params(teacher)
    print(f"{args.teacher} on {args.dataset}: test accuracy {base:.4f}, encoder-layer parameters {base_params:,}")
    points: dict[str, list[dict[str, float]]] = {}
    for weighting in args.weightings:
        for keep in args.keep:
            start = time.perf_counter()
            options = LowRankOptions(weighting=weighting, keep=keep, allocation=args.allocation, recovery_epochs=0)
            made = apply(teacher, options, Context(data=data, task=task))
            accuracy, kept = test(made.model), layer_params(made.model) / base_params
            points.setdefault(weighting, []).append({"keep": keep, "layer_params_kept": kept, "accuracy": accuracy})
            print(f"{weighting:>10} keep {keep:.2f}: encoder-layer parameters kept {kept:.1%}, test accuracy "
                  f"{accuracy:.4f} ({accuracy / base:.1%} of the teacher) [{time.perf_counter() - start:.0f} s]")
    print(json.dumps({"teacher": args.teacher, "dataset": args.dataset, "allocation": args.allocation,
                      "teacher_accuracy": base, "points": points}, indent=1))
    _plot(points, base, Path(args.out), f"{args.teacher} on {args.dataset}, no recovery ({args.allocation} ranks)")


def _plot(points: dict[str, list[dict[str, float]]], base: float, out: Path, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for weighting, found in points.items():
        ax.plot([100 * p["layer_params_kept"] for p in found], [100 * p["accuracy"] for p in found], "o-",
                label=weighting)
    ax.axhline(100 * base, color="#333", linestyle=":", label="teacher")
    ax.axhline(97 * base, color="#999", linestyle="--", label="97% of the teacher")
    ax.set_xlabel("encoder-layer parameters kept (%)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.invert_xaxis()
    _save(fig, ax, out)


def _spectra(model: torch.nn.Module, out: Path, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from compress.methods.lowrank import matrix_label
    from compress.methods.lowrank.factorize import break_even, linear_of, matrices, weighted

    curves: dict[str, list[torch.Tensor]] = {}
    even: dict[str, int] = {}
    for m in matrices(model):
        s = weighted(linear_of(model, m).weight.detach()).singular
        label = matrix_label(m.kind, m.name)
        curves.setdefault(label, []).append((s ** 2).cumsum(0) / (s ** 2).sum())
        even[label] = break_even(m.out, m.inp)
    fig = Figure(figsize=(6.4, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for label, found in curves.items():
        energy = torch.stack(found).mean(0)
        line, = ax.plot(range(1, len(energy) + 1), 100 * energy.numpy(), label=label)
        ax.axvline(even[label], color=line.get_color(), linestyle=":", alpha=0.6)
        print(f"{label}: energy kept at rank 32/64/128/{even[label]} (break-even): "
              + " / ".join(f"{100 * float(energy[r - 1]):.0f}%" for r in (32, 64, 128, even[label])))
    ax.set_xlabel("rank r (dotted: each shape's break-even rank)")
    ax.set_ylabel("weight energy kept (%)")
    ax.set_title(f"{title}: singular-value spectra (mean over layers)")
    _save(fig, ax, out)


def _save(fig, ax, out: Path) -> None:
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()

"""The same students in two comparisons of the same seeds and data (trained two ways: fp32 and bf16), paired.

    compress compare --seeds 13,14,15 --precision fp32 --methods distilbert,albert --out runs/fp32
    compress compare --seeds 13,14,15 --precision bf16 --methods distilbert,albert --out runs/bf16
    python benchmarks/paired_comparisons.py runs/fp32 runs/bf16

For every student both comparisons hold, with the same seeds: its accuracy in each (the mean over the seeds and its
95% interval over the test sentences and the seeds, as ``compress compare`` computes it) and the paired interval of
the second minus the first (the same seed and the same test sentence on both sides), from the predictions each run
kept. A recipe change is kept where the second's accuracy lies inside the first's interval.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from compress.predictions import load_predictions
from compress.stats import Interval, accuracy_interval, difference_interval


def correct_by_seed(comparison: Path) -> dict[str, tuple[list[int], np.ndarray]]:
    """Each method's seeds and its (seeds, sentences) matrix of correct answers, from the runs the comparison lists."""
    data = json.loads((comparison / "comparison.json").read_text())
    found = {}
    for method in data["methods"]:
        rows, seeds = [], []
        for seed in method["per_seed"]:
            run = Path(seed["run_dir"])
            rows.append(load_predictions(run, json.loads((run / "metrics.json").read_text())["predictions"]).correct)
            seeds.append(seed["seed"])
        found[method["method"]] = (seeds, np.stack(rows))
    return found


def shown(interval: Interval, sign: str = "") -> str:
    return f"{100 * interval.estimate:{sign}.1f} ({100 * interval.low:{sign}.1f} to {100 * interval.high:{sign}.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path, help="the comparison of today's recipe (its out directory)")
    parser.add_argument("second", type=Path, help="the comparison of the changed recipe")
    args = parser.parse_args()
    first, second = correct_by_seed(args.first), correct_by_seed(args.second)
    print(f"| student | {args.first.name} | {args.second.name} | {args.second.name} - {args.first.name} | inside |")
    print("|---|---|---|---|---|")
    for name in (n for n in first if n in second):
        (seeds_a, a), (seeds_b, b) = first[name], second[name]
        if seeds_a != seeds_b:
            print(f"| {name} | seeds {seeds_a} | seeds {seeds_b} | not paired | |")
            continue
        before, after = accuracy_interval(a), accuracy_interval(b)
        inside = before.low <= after.estimate <= before.high
        print(f"| {name} | {shown(before)} | {shown(after)} | {shown(difference_interval(b, a), '+')} | "
              f"{'yes' if inside else 'NO'} |")


if __name__ == "__main__":
    main()

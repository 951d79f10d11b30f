"""Two runs of the same data and seed, paired sentence by sentence: the second's accuracy minus the first's on the
held-out training sentences (where both held them out), on dev and on test, each with its 95% interval.

    python benchmarks/paired_runs.py runs/tinybert-fast-13 runs/cut-fast-13

Each split's predictions are the ones each run recorded (``compress.predictions``); the interval is the paired one
``compress compare`` uses (:func:`compress.stats.difference_interval`). Runs whose splits hold other sentences (another
seed of a held-out draw, another dataset) are refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from compress.data.splits import SELECT
from compress.predictions import load_predictions
from compress.reports.records import read_run_record
from compress.stats import difference_interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args()
    records = [read_run_record(run) for run in (args.first, args.second)]
    print(f"{args.second.name} minus {args.first.name}, accuracy points (95% interval):")
    for label, split, kept in (("held-out", SELECT, "select_predictions"), ("dev", "dev", "dev_predictions"),
                               ("test", "test", "predictions")):
        names = [getattr(record, kept) for record in records]
        if not all(names):
            print(f"  {label}: not recorded by both")
            continue
        first, second = (load_predictions(run, name, split) for run, name in zip((args.first, args.second), names,
                                                                                  strict=True))
        if len(first.labels) != len(second.labels) or (first.labels != second.labels).any():
            raise SystemExit(f"the two runs' {label} sentences differ: pair runs of the same data and hold-out.")
        d = difference_interval(second.correct, first.correct)
        print(f"  {label}: {second.correct.mean():.4f} - {first.correct.mean():.4f} = {d.estimate * 100:+.2f} "
              f"({d.low * 100:+.2f} to {d.high * 100:+.2f}) over {len(first.labels):,} sentences")


if __name__ == "__main__":
    main()

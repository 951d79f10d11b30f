"""Finished runs timed against their fine-tuned teacher at batch 1, in one process, as `compress compare` times them.

    python benchmarks/run_speed.py runs/cut-13-int8 runs/distilbert-prune-int8-13 [--hold-out 2062]

Every model (the teacher in PyTorch fp32, each run as it was saved: its ONNX Runtime or OpenVINO artefact, or its
PyTorch weights) is loaded afresh for each of compare's passes and timed in rounds on the task's own speed inputs
(:func:`compress.bench.speed.timed_passes`: warm-up, medians, threads fixed). Prints each model's batch-1 latency (the
median of every round) and its speed-up over the teacher, the median over passes of the pass's teacher median divided
by the model's, with the passes' range: the number a comparison's table gives, without training anything.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from compress.bench.inputs import speed_seq_len
from compress.bench.machine import cpu_model
from compress.bench.speed import PASSES, SpeedConfig, timed_passes
from compress.bench.timing import default_threads
from compress.quantize.predictors import TorchPredictor
from compress.reports.records import read_run_record
from compress.runs.compare import run_predictor
from compress.runs.config import RunConfig, run_task
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.teachers.registry import load_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--hold-out", type=int, default=2062, help="training sentences the runs held out")
    parser.add_argument("--threads", type=int, default=default_threads())
    args = parser.parse_args()
    config = RunConfig(method="distilbert", hold_out=args.hold_out)
    finetuned = finetune_teacher(config.teacher, run_task(config), config.teacher_finetune, show_progress=False)
    data = tokenized_for(finetuned, run_task(config))
    vocab = load_tokenizer(str(finetuned.directory)).get_vocab()
    records = {run.name: (run, read_run_record(run)) for run in args.runs}

    def load() -> dict:
        return {"teacher": TorchPredictor(finetuned.load().model)} | {
            name: run_predictor(record, run, args.threads, vocab) for name, (run, record) in records.items()}

    seq_len = speed_seq_len(data)
    timings = timed_passes(load, data, seq_len, SpeedConfig(threads=args.threads))
    print(f"{cpu_model()}, {args.threads} threads, {seq_len} tokens, {PASSES} passes; batch-1 latency (median ms) and "
          "speed-up over the teacher (median of the passes, their range)")
    teacher = np.array(timings["teacher"].pass_medians)
    for name, timing in timings.items():
        ratios = teacher / np.array(timing.pass_medians)
        print(f"  {name}: {timing.latency_ms_p50:.2f} ms, {np.median(ratios):.2f}x ({ratios.min():.2f}-"
              f"{ratios.max():.2f}x)")


if __name__ == "__main__":
    main()

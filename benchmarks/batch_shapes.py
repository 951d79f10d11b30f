"""Throughput at the batch shapes a server makes, for the teacher on each runtime and for the models of run
directories, in one process: filled (every row the speed length of real tokens: what compress times by default),
real-length (test sentences, each batch padded to its longest), padded (to the split's longest) and bucketed (by
length, padded to 16, 32, 64, ... tokens) batches of ``--batch-size`` (compress.bench.batch_shapes).

    python benchmarks/batch_shapes.py                       # the fine-tuned minilm teacher on MR, every runtime
    python benchmarks/batch_shapes.py --run runs/distilbert-mr-... --run runs/distilbert-prune-int8-mr-...
    python benchmarks/batch_shapes.py --threads 2 --repeats 10 --passes 3

In each pass every model is loaded afresh for each shape (the order of models alternating pass by pass), and its
set of batches is run ``--repeats`` times: the first call meets every shape of the set new (what preparing a shape
costs a runtime that prepares per shape), the median of the others is the set's steady time; then each batch of the
set alone (the median of ``--repeats`` calls), which says where the set's time goes by padded length. Throughput is
examples over the steady set time, the median over the passes; ratios are against the fp32 teacher in PyTorch at
the same shape, in the same pass.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from compress.bench.batch_shapes import BATCH_SHAPES, batch_set, run_set
from compress.bench.inputs import speed_seq_len
from compress.bench.machine import cpu_features, cpu_model
from compress.bench.timing import fixed_threads, timed_calls
from compress.data.load import load_task
from compress.methods.quantization import quant_format
from compress.methods.quantization.verb import calibration_batches
from compress.quantize.artefacts import load_artefact, unavailable, write_artefact
from compress.quantize.predictors import Predictor, TorchPredictor
from compress.reports.records import read_run_record
from compress.runs.compare import run_predictor
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.teachers.registry import load_tokenizer

BASE = "teacher fp32 torch"
# The teacher's other runtimes: (name, method, backend); OpenVINO computes our fp32 ONNX in bf16 where the CPU has it.
TEACHER_VARIANTS = [("teacher fp32 onnxruntime", "onnx", "onnxruntime"),
                    ("teacher int8 onnxruntime", "int8", "onnxruntime"),
                    ("teacher fp32 ONNX on openvino", "onnx", "openvino"),
                    ("teacher bf16 openvino", "bf16", "openvino"),
                    ("teacher int8 openvino", "int8", "openvino")]


def _loaders(args: argparse.Namespace, finetuned, data, workdir: Path) -> dict[str, Callable[[], Predictor]]:
    """Each model's loader: the teacher in PyTorch and on every runtime here, then every --run's model."""
    model = finetuned.load().model
    calibration = calibration_batches(data, seed=13)   # as compress run calibrates
    loaders = {BASE: lambda: TorchPredictor(finetuned.load().model)}
    for name, method, backend in TEACHER_VARIANTS:
        reason = unavailable(quant_format(method), backend)
        if reason:
            print(f"skipped {name}: {reason}")
            continue
        target = workdir / f"{method}-{backend}"
        target.mkdir()
        write_artefact(quant_format(method), backend, model, target, calibration=calibration)
        loaders[name] = partial(load_artefact, target, args.threads)
    vocab = load_tokenizer(str(finetuned.directory)).get_vocab()
    for run in args.run or []:
        directory = Path(run)
        loaders[directory.name] = partial(run_predictor, read_run_record(directory), directory, args.threads, vocab)
    return loaders


def _time(predictor: Predictor, batches, repeats: int) -> dict[str, object]:
    """The set's calls (the first cold, then the steady median) and each batch's median, in ms."""
    calls = timed_calls(partial(run_set, predictor, batches), warmup=0, repeats=repeats + 1)
    per_batch = [float(np.median(timed_calls(partial(predictor, b), warmup=0, repeats=repeats)))
                 for b in batches.batches]
    return {"cold_ms": float(calls[0]), "set_ms": float(np.median(calls[1:])), "batch_ms": per_batch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--dataset", default="mr")
    parser.add_argument("--run", action="append", help="also time the model of this run directory (repeatable)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seq-len", type=int, help="the filled shape's length (default: the test split's 95th "
                                                    "percentile, as compress compare)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=4, help="batches in a set of the real, padded and bucketed "
                                                              "shapes")
    parser.add_argument("--repeats", type=int, default=10, help="steady calls of each set (after its cold one)")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    task = load_task(args.dataset)
    finetuned = finetune_teacher(args.teacher, task)
    data = tokenized_for(finetuned, task)
    seq_len = args.seq_len or speed_seq_len(data)
    sets = {shape: batch_set(data, shape, args.batch_size, seq_len, batches=args.batches) for shape in BATCH_SHAPES}
    found: dict[str, dict[str, list[dict[str, object]]]] = {}
    with tempfile.TemporaryDirectory() as tmp, fixed_threads(args.threads):
        loaders = _loaders(args, finetuned, data, Path(tmp))
        for number in range(args.passes):
            order = list(loaders) if number % 2 == 0 else list(loaders)[::-1]
            for shape, batches in sets.items():
                for name in order:
                    timed = _time(loaders[name](), batches, args.repeats)
                    found.setdefault(name, {}).setdefault(shape, []).append(timed)

    features = [k for k, v in cpu_features().items() if v]
    print(f"{finetuned.directory.name} on {args.dataset}; CPU {cpu_model()} ({', '.join(features)}); {args.threads} "
          f"threads; batches of {args.batch_size}; {args.passes} passes, each set run {args.repeats} times after a "
          f"cold call")
    for shape, batches in sets.items():
        print(f"  {shape}: {len(batches.batches)} batch(es) of padded lengths {batches.lengths}, "
              f"{batches.examples} sentences, {batches.padding:.0%} of the positions padding")
    rate = {name: {shape: [sets[shape].examples / (t["set_ms"] / 1000) for t in timed] for shape, timed in per.items()}
            for name, per in found.items()}
    print(f"\n{'model':<34}" + "".join(f"{shape + ' (ex/s, x)':>24}" for shape in BATCH_SHAPES))
    summary: dict[str, dict[str, object]] = {}
    for name, per in rate.items():
        cells = ""
        for shape in BATCH_SHAPES:
            ratios = [mine / base for mine, base in zip(per[shape], rate[BASE][shape])]   # pass by pass
            cells += f"{np.median(per[shape]):>14,.0f} {np.median(ratios):>8.2f}x"
            timed = found[name][shape]
            summary.setdefault(name, {})[shape] = {
                "examples_per_s": float(np.median(per[shape])), "ratio_to_base": float(np.median(ratios)),
                "cold_over_steady": float(np.median([t["cold_ms"] / t["set_ms"] for t in timed])),
                "batch_ms": [float(np.median(ms)) for ms in zip(*(t["batch_ms"] for t in timed))]}
        print(f"{name:<34}{cells}")
    print("\nthe cold call over a steady one (preparing each new shape), and ms per batch by padded length:")
    for name, per in summary.items():
        for shape in ("real", "bucketed"):
            lengths = sets[shape].lengths
            spent = ", ".join(f"{length}: {ms:.1f}" for length, ms in zip(lengths, per[shape]["batch_ms"]))
            print(f"  {name}, {shape}: cold {per[shape]['cold_over_steady']:.2f}x steady; {spent}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "cpu": cpu_model(), "threads": args.threads, "batch_size": args.batch_size, "seq_len": seq_len,
            "passes": args.passes, "repeats": args.repeats,
            "shapes": {s: {"lengths": b.lengths, "padding": b.padding, "examples": b.examples}
                       for s, b in sets.items()},
            "models": summary}, indent=2))


if __name__ == "__main__":
    main()

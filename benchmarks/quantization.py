"""Time PyTorch fp32 against every quantization backend on the same model and inputs, in one run.

    python benchmarks/quantization.py                      # the fine-tuned minilm teacher on MR
    python benchmarks/quantization.py --run runs/distilbert-mr-...   # the student of a run
    python benchmarks/quantization.py --threads 2 --seq-len 64 --repeats 50

Every backend is written to disk and loaded back (what is timed is what would be deployed), then
timed on the same real MR inputs cut to ``--seq-len`` tokens by ``compress.bench.speed.measure_all``,
the measurement `compress compare` uses: warm-up calls, then the median of ``--repeats`` calls at
batch 1 and at ``--batch-size``, threads fixed, one model at a time, in ``--passes`` passes
(alternating forward and reverse order) keeping each model's fastest pass per batch size. Ratios are
fp32 time / backend time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from compress.bench.machine import cpu_features, cpu_model
from compress.bench.speed import SpeedConfig, measure_all
from compress.data.load import load_task
from compress.methods.quantization import quant_format
from compress.methods.quantization.verb import calibration_batches
from compress.quantize.artefacts import load_artefact, unavailable, write_artefact
from compress.quantize.predictors import Predictor, TorchPredictor
from compress.runs.source import run_source
from compress.teachers.finetune import finetune_teacher, tokenized_for

# (method, backend) pairs timed against PyTorch fp32.
VARIANTS = [("int8", "torch"), ("bf16", "torch"), ("fp16", "torch"), ("onnx", "onnxruntime"),
            ("int8", "onnxruntime"), ("static-int8", "onnxruntime")]


def _source(args: argparse.Namespace):
    if args.run:
        source = run_source(Path(args.run))
        return source.model, source.data, f"student of {args.run}"
    task = load_task(args.dataset)
    finetuned = finetune_teacher(args.teacher, task)
    return finetuned.load().model, tokenized_for(finetuned, task), f"fine-tuned {args.teacher} on {args.dataset}"


def _variants(model, data, directory: Path, threads: int, skip_slow: bool) -> dict[str, Predictor]:
    features = cpu_features()
    predictors: dict[str, Predictor] = {"fp32 torch": TorchPredictor(model)}
    calibration = calibration_batches(data, seed=13)  # what `compress run static-int8` calibrates on
    for method, backend in VARIANTS:
        name = f"{quant_format(method).dtype} {backend}" + (" static" if method == "static-int8" else "")
        reason = unavailable(quant_format(method), backend)
        if method == "fp16" and not (features.get("avx512_fp16") or features.get("amx_fp16")) and skip_slow:
            reason = "no fp16 units on this CPU (AVX512-FP16 / AMX-FP16); pass --all to time it anyway"
        if reason:
            print(f"skipped {name}: {reason}", file=sys.stderr)
            continue
        target = directory / f"{method}-{backend}"
        target.mkdir()
        write_artefact(quant_format(method), backend, model, target, calibration=calibration)
        predictors[name] = load_artefact(target, threads)
    return predictors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--dataset", default="mr")
    parser.add_argument("--run", help="time the student of this run directory instead of the teacher")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32, help="the large batch (the small one is 1)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--passes", type=int, default=3, help="timing passes over all models; the fastest is kept")
    parser.add_argument("--all", action="store_true", help="also time fp16 on CPUs without fp16 units")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if args.repeats < 30:
        parser.error("--repeats must be at least 30 (medians of fewer calls are too noisy to compare)")

    model, data, what = _source(args)
    config = SpeedConfig(threads=args.threads, warmup=args.warmup, repeats=args.repeats,
                         batch_size=args.batch_size, batch_repeats=args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        predictors = _variants(model, data, Path(tmp), args.threads, skip_slow=not args.all)
        speeds = measure_all(predictors, data, args.seq_len, config, passes=args.passes)

    columns = {1: "latency_ms_p50", args.batch_size: "batch_ms_p50"}
    medians = {name: {b: speed[key] for b, key in columns.items()} for name, speed in speeds.items()}
    base = medians["fp32 torch"]
    print(f"{what}; CPU {cpu_model()}; {args.threads} threads; sequence length {args.seq_len}; median of "
          f"{args.repeats} calls after {args.warmup} warm-up calls, the fastest of {args.passes} passes")
    header = "".join(f"{f'batch {b} (ms)':>16}{'speed-up':>10}" for b in columns)
    print(f"{'backend':<22}{header}")
    for name, per in medians.items():
        cells = "".join(f"{per[b]:>16.2f}{base[b] / per[b]:>9.2f}x" for b in columns)
        print(f"{name:<22}{cells}")
    for b in columns:
        best = min((n for n in medians if n != "fp32 torch"), key=lambda n: medians[n][b])
        best_int8 = min((n for n in medians if n.startswith("int8")), key=lambda n: medians[n][b], default=None)
        line = f"batch {b}: best backend {best} {base[b] / medians[best][b]:.2f}x"
        if best_int8:
            line += f"; best int8 {best_int8} {base[b] / medians[best_int8][b]:.2f}x"
        print(line)
    if args.json:
        summary = {"model": what, "threads": args.threads, "seq_len": args.seq_len, "repeats": args.repeats,
                   "passes": args.passes, "median_ms": medians}
        Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

"""Time every quantization backend of ours against what a user would pick instead, on the same model and
inputs, in one run, and score each on the test split.

    python benchmarks/quantization.py                      # the fine-tuned minilm teacher on MR
    python benchmarks/quantization.py --run runs/distilbert-mr-...   # the student of a run (ours only)
    python benchmarks/quantization.py --threads 2 --seq-len 64 --repeats 50

Ours: each (method, backend) written by compress's own writer, loaded back (what is timed is what would be
deployed). The peers, for the teacher (what a user would do instead, each with its own defaults):

* transformers fp32: ``BertForSequenceClassification`` on the same checkpoint (the base of the speed-ups);
* optimum int8: the settings of optimum's ``AutoQuantizationConfig.avx512_vnni(is_static=False)`` (dynamic,
  QOperator, weights int8 symmetric per channel, activations uint8, MatMul and Add), given to ONNX Runtime's
  ``quantize_dynamic`` on our fp32 ONNX export (optimum itself needs transformers < 4.58), run by an ONNX Runtime
  session with its default options;
* OpenVINO fp32 ONNX: our fp32 ONNX export compiled by OpenVINO with only the thread count set (OpenVINO then
  picks its precision: bf16 on CPUs with bf16 units);
* OpenVINO + NNCF int8: ``nncf.quantize`` with its defaults for a transformer on our fp32 ONNX export, calibrated
  on the sentences `compress run static-int8` calibrates on, compiled with only the thread count set.

Every model is timed on the same real MR inputs cut to ``--seq-len`` tokens by ``compress.bench.speed.measure_all``,
the measurement `compress compare` uses: warm-up calls, then the median of ``--repeats`` calls at batch 1 and at
``--batch-size``, threads fixed, one model at a time, in ``--passes`` passes (alternating forward and reverse
order) keeping each model's fastest pass per batch size. Ratios are the base's time / the model's time. Accuracy
is the test split's, one sentence at a time; retention is it over the fp32 model's.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from encoder import paired_times  # benchmarks/encoder.py, beside this script

from compress.bench.inputs import INPUT_NAMES, speed_batch
from compress.bench.machine import cpu_features, cpu_model
from compress.bench.speed import SpeedConfig, measure_all
from compress.bench.timing import fixed_threads
from compress.data.load import load_task
from compress.methods.quantization import quant_format
from compress.methods.quantization.verb import calibration_batches
from compress.predictions import Predictions
from compress.quantize.artefacts import load_artefact, shape_misfit, unavailable, write_artefact
from compress.quantize.predictors import Predictor, TorchPredictor, predict_batches
from compress.runs.source import run_source
from compress.stats import ratio_quartiles
from compress.teachers.finetune import finetune_teacher, tokenized_for

# (method, backend) pairs of ours.
VARIANTS = [("int8", "torch"), ("bf16", "torch"), ("fp16", "torch"), ("fp8", "torch"), ("onnx", "onnxruntime"),
            ("int8", "onnxruntime"), ("static-int8", "onnxruntime"), ("int4", "onnxruntime"),
            ("mixed-bits", "onnxruntime"), ("onnx", "openvino"), ("bf16", "openvino"), ("int8", "openvino"),
            ("int4", "openvino")]
BASE = "transformers fp32"   # the speed-ups' base for the teacher; for a run's student, our fp32


def _source(args: argparse.Namespace):
    if args.run:
        source = run_source(Path(args.run))
        return source.model, source.data, f"student of {args.run}", None
    task = load_task(args.dataset)
    finetuned = finetune_teacher(args.teacher, task)
    return (finetuned.load().model, tokenized_for(finetuned, task), f"fine-tuned {args.teacher} on {args.dataset}",
            finetuned.directory)


@dataclass
class DefaultSession:
    """An ONNX Runtime session with its default options but the thread count (as optimum's ORTModel makes it):
    quantize_dynamic writes QOperator, optimum's format for dynamic int8."""

    session: Any
    dtype: str = "int8"
    backend: str = "onnxruntime"

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.session.run(["logits"], {k: np.asarray(inputs[k], dtype=np.int64) for k in INPUT_NAMES})[0]


@dataclass
class DefaultCompiled:
    """An OpenVINO model compiled for the CPU with only the thread count set (OpenVINO picks the rest)."""

    request: Any
    dtype: str
    backend: str = "openvino"

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.array(self.request.infer({k: np.asarray(inputs[k], dtype=np.int64) for k in INPUT_NAMES})["logits"])



def _peers(model, checkpoint: Path, calibration, directory: Path, threads: int) -> dict[str, Predictor]:
    """What a user would run instead of ours (see the module's docstring); OpenVINO's where it is installed."""
    import onnxruntime as ort
    from encoder import TransformersPredictor
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import BertForSequenceClassification

    from compress.quantize.onnx_backend import export_onnx
    from compress.quantize.openvino_backend import openvino_available, sentences

    peers: dict[str, Predictor] = {
        BASE: TransformersPredictor(BertForSequenceClassification.from_pretrained(checkpoint).eval())}
    fp32 = directory / "peer-fp32.onnx"
    export_onnx(model, fp32)
    optimum = directory / "peer-optimum-int8.onnx"
    quantize_dynamic(str(fp32), str(optimum), weight_type=QuantType.QInt8, per_channel=True, reduce_range=False,
                     op_types_to_quantize=["MatMul", "Add"], extra_options={"WeightSymmetric": True,
                                                                            "ActivationSymmetric": False})
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    peers["optimum int8 (avx512_vnni)"] = DefaultSession(ort.InferenceSession(str(optimum), options,
                                                                              providers=["CPUExecutionProvider"]))
    reason = openvino_available()
    if reason:
        print(f"skipped the OpenVINO peers: {reason}", file=sys.stderr)
        return peers
    import nncf  # imported by openvino_available() with their telemetry declined
    import openvino as ov

    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": threads}
    peers["OpenVINO fp32 ONNX"] = DefaultCompiled(
        core.compile_model(core.read_model(str(fp32)), "CPU", config).create_infer_request(), "fp32")
    with contextlib.redirect_stdout(io.StringIO()):
        items = sentences(calibration)  # subset_size: its default, 300, would take all 256 anyway, with a warning
        quantized = nncf.quantize(core.read_model(str(fp32)), nncf.Dataset(items),
                                  model_type=nncf.ModelType.TRANSFORMER, subset_size=len(items))
    peers["OpenVINO + NNCF int8"] = DefaultCompiled(core.compile_model(quantized, "CPU", config).create_infer_request(),
                                                    "int8")
    return peers


def _variants(model, data, directory: Path, threads: int, skip_slow: bool, calibration) -> dict[str, Predictor]:
    features = cpu_features()
    predictors: dict[str, Predictor] = {"fp32 torch": TorchPredictor(model)}
    for method, backend in VARIANTS:
        name = f"{quant_format(method).dtype} {backend}" + (" static" if method == "static-int8" else "")
        reason = unavailable(quant_format(method), backend) or shape_misfit(quant_format(method), backend, model.config)
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


def _best(medians, retention, ours, peers, batch: int) -> tuple[str, str | None]:
    """Our fastest model at ``batch`` of those keeping 99% of fp32's accuracy, and the peers' (None: no peers)."""
    kept = [n for n in medians if retention[n] >= 0.99]
    mine = min((n for n in kept if n in ours), key=lambda n: medians[n][batch])
    peer = min((n for n in kept if n in peers), key=lambda n: medians[n][batch], default=None)
    return mine, peer


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

    model, data, what, checkpoint = _source(args)
    calibration = calibration_batches(data, seed=13)  # what `compress run static-int8` calibrates on
    config = SpeedConfig(threads=args.threads, warmup=args.warmup, repeats=args.repeats,
                         batch_size=args.batch_size, batch_repeats=args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        ours = _variants(model, data, Path(tmp), args.threads, not args.all, calibration)
        peers = _peers(model, checkpoint, calibration, Path(tmp), args.threads) if checkpoint else {}
        predictors = {**ours, **peers}
        accuracy = {name: Predictions.of(*predict_batches(p, data.dataloader("test", batch_size=1))).metrics().accuracy
                    for name, p in predictors.items()}
        speeds = measure_all(predictors, data, args.seq_len, config, passes=args.passes)
        columns = {1: "latency_ms_p50", args.batch_size: "batch_ms_p50"}
        medians = {name: {b: speed[key] for b, key in columns.items()} for name, speed in speeds.items()}
        retention = {name: acc / accuracy["fp32 torch"] for name, acc in accuracy.items()}
        best = {b: _best(medians, retention, ours, peers, b) for b in columns}
        # Our best against the best peer, call for call: the ratio's median and quartiles over pairs of calls.
        with fixed_threads(args.threads):
            paired = {b: ratio_quartiles(*reversed(paired_times(ours[mine], peers[peer],
                                                                speed_batch(data, b, args.seq_len), 3 * args.repeats)))
                      for b, (mine, peer) in best.items() if peer}

    base_name = BASE if BASE in medians else "fp32 torch"
    base = medians[base_name]
    print(f"{what}; CPU {cpu_model()}; {args.threads} threads; sequence length {args.seq_len}; median of "
          f"{args.repeats} calls after {args.warmup} warm-up calls, the fastest of {args.passes} passes; speed-ups "
          f"against {base_name}; accuracy on the {len(data.splits['test'])} test sentences, one at a time")
    header = "".join(f"{f'batch {b} (ms)':>15}{'speed-up':>9}" for b in columns)
    print(f"{'model':<28}{'':<5}{header}{'accuracy':>10}{'retention':>10}")
    for name, per in medians.items():
        cells = "".join(f"{per[b]:>15.2f}{base[b] / per[b]:>8.2f}x" for b in columns)
        who = "peer" if name in peers else "ours"
        print(f"{name:<28}{who:<5}{cells}{accuracy[name]:>10.2%}{retention[name]:>10.1%}")
    for b, (mine, peer) in best.items():
        line = f"batch {b}: our fastest at >= 99% retention is {mine}, {medians[mine][b]:.2f} ms"
        if peer:
            ratio, q1, q3 = paired[b]
            line += (f"; the fastest peer at >= 99% is {peer}, {medians[peer][b]:.2f} ms; ours runs at "
                     f"{ratio:.3f}x its speed, call for call (quartiles {q1:.3f} to {q3:.3f} over "
                     f"{3 * args.repeats} pairs)")
        print(line)
    if args.json:
        summary = {"model": what, "cpu": cpu_model(), "threads": args.threads, "seq_len": args.seq_len,
                   "repeats": args.repeats, "passes": args.passes, "median_ms": medians, "accuracy": accuracy,
                   "peers": list(peers), "paired_speed_ratio": {b: list(r) for b, r in paired.items()}}
        Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

"""Does timing one runtime slow the next? Each model's batch-1 latency timed alone against the same model inside the
interleaved rounds `compress compare` times its speed-ups with, in one process.

    python benchmarks/contamination.py                     # the fine-tuned minilm teacher on MR, 2 threads
    python benchmarks/contamination.py --rounds 15 --threads 2

The models: the teacher in PyTorch (fp32), its dynamic int8 in PyTorch and in ONNX Runtime, and its fp32 ONNX export
in ONNX Runtime, each written by compress's own writer and loaded back. "Alone" times one model's rounds one after
another with nothing else run between them; "in rounds" is ``compress.bench.speed.latency_rounds`` over all of them
(every model once a round, the order alternating), as a comparison runs it. Both take the median over the rounds of
each round's median of calls. A ratio (in rounds / alone) above 1 is time another runtime took from this one: ONNX
Runtime's worker threads spin after a call waiting for the next, on the cores the next model needs. Printed once
with ONNX Runtime's default (spinning) and once with spinning turned off (``session.intra_op.allow_spinning`` 0,
what compress's sessions use), in one process. The goal is every ratio within 5% of 1.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from compress.bench.inputs import speed_batch
from compress.bench.machine import cpu_model
from compress.bench.speed import SpeedConfig, latency_rounds
from compress.bench.timing import fixed_threads, time_call
from compress.data.load import load_task
from compress.methods.quantization import quant_format
from compress.quantize.artefacts import load_artefact, write_artefact
from compress.quantize.predictors import OrtPredictor, Predictor, TorchPredictor
from compress.teachers.finetune import finetune_teacher, tokenized_for

VARIANTS = (("int8", "torch"), ("int8", "onnxruntime"), ("onnx", "onnxruntime"))


def alone(predictor: Predictor, batch, rounds: int, calls: int, threads: int) -> float:
    """The median over ``rounds`` of a round's median batch-1 latency, nothing else timed in between (ms)."""
    with fixed_threads(threads):
        return statistics.median(time_call(partial(predictor, batch), batch_size=1, warmup=1, repeats=calls).p50_ms
                                 for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seq-len", type=int, default=46)
    args = parser.parse_args()

    task = load_task("mr")
    finetuned = finetune_teacher(args.teacher, task, show_progress=False)
    data = tokenized_for(finetuned, task)
    teacher = finetuned.load().model.eval()
    config = SpeedConfig(threads=args.threads, repeats=args.repeats)
    calls = max(5, args.repeats // 3)   # as latency_rounds times each model in a round
    one = speed_batch(data, 1, args.seq_len)
    print(f"CPU: {cpu_model()}; {args.threads} threads; batch 1 at {args.seq_len} tokens; {args.rounds} rounds of "
          f"{calls} calls; ms are medians over the rounds")
    with tempfile.TemporaryDirectory() as tmp:
        built: dict[str, Path] = {}
        for method, backend in VARIANTS:
            target = Path(tmp) / f"{method}-{backend}"
            target.mkdir()
            write_artefact(quant_format(method), backend, teacher, target)
            built[f"{method} {backend}"] = target
        for spinning in (True, False):
            predictors: dict[str, Predictor] = {"teacher torch fp32": TorchPredictor(teacher)}
            for name, target in built.items():
                predictor = load_artefact(target, args.threads)
                if isinstance(predictor, OrtPredictor):
                    predictor = OrtPredictor(predictor.path, args.threads, predictor.dtype, spinning=spinning)
                predictors[name] = predictor
            rounds = latency_rounds(predictors, data, args.seq_len, config, rounds=args.rounds)
            print(f"\nONNX Runtime workers {'spinning (its default)' if spinning else 'not spinning'}:")
            print(f"{'model':24} {'alone ms':>9} {'in rounds ms':>13} {'ratio':>7}")
            for name, predictor in predictors.items():
                time.sleep(1.0)   # whatever ran before has gone idle
                by_itself = alone(predictor, one, args.rounds, calls, args.threads)
                inside = statistics.median(rounds[name])
                print(f"{name:24} {by_itself:9.3f} {inside:13.3f} {inside / by_itself:7.3f}")


if __name__ == "__main__":
    main()

"""Does timing one runtime slow the next? Each model's batch-1 latency right after another model against right after
itself, and alone against inside the passes `compress compare` times its speed-ups with.

    python benchmarks/contamination.py                     # the fine-tuned minilm teacher on MR, 2 threads
    python benchmarks/contamination.py --switch-rounds 40 --repeats 6

The models: the teacher in PyTorch (fp32), its dynamic int8 in PyTorch and in ONNX Runtime, and its fp32 ONNX export
in ONNX Runtime and (where installed) OpenVINO, each written by compress's own writer and loaded back. Printed with ONNX Runtime's workers as a
comparison sets them (not spinning) and, for contrast, spinning (its default), in one process.

1. After another model / after itself: rounds of every model in alternating order, as a pass of the comparison
   times them; in each round a model's calls are timed right after the model before it ran, then again right after
   themselves, tens of milliseconds apart, so the machine's drift cannot come between the two. The ratio (the median
   over the rounds, with its quartiles) is what the model run before took from this one: ONNX Runtime's workers
   spin-wait after a call, on the cores the next model needs. Shown with no untimed call before the timed ones and
   with the comparison's warm-up (``ROUND_WARMUP``).
2. Alone against in the passes: one pass of ``compress.bench.speed.timed_passes`` over all the models (loaded
   afresh), then the same pass over each model by itself, ``--repeats`` times, both spinning settings in each
   repeat; the ratio is the median of the repeats' (in the passes / alone). Passes are seconds to minutes apart, so
   this one carries the machine's drift (on a shared 2-core VM its repeats spread by +-15%): it bounds large
   effects, the first measures small ones.

The goal is every ratio within 5% of 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from functools import partial
from pathlib import Path

import numpy as np

from compress.bench.inputs import speed_batch
from compress.bench.machine import cpu_model
from compress.bench.speed import ROUND_WARMUP, ROUNDS, SpeedConfig, timed_passes
from compress.bench.timing import fixed_threads, timed_calls
from compress.data.load import load_task
from compress.methods.quantization import quant_format
from compress.quantize.artefacts import load_artefact, unavailable, write_artefact
from compress.quantize.predictors import Predictor, TorchPredictor
from compress.teachers.finetune import finetune_teacher, tokenized_for

VARIANTS = (("int8", "torch"), ("int8", "onnxruntime"), ("onnx", "onnxruntime"), ("onnx", "openvino"))
TEACHER = "teacher torch fp32"


WARMUPS = (0, ROUND_WARMUP)   # untimed calls before a model's timed ones: none, and as a comparison's rounds


def switch_ratios(predictors: dict[str, Predictor], one, rounds: int, calls: int, warmup: int,
                  threads: int) -> dict[str, tuple[list[float], list[float]]]:
    """Each model's median batch-1 latency right after another model ran, and again right after (after itself),
    in each of ``rounds`` rounds of every model in alternating order: two blocks tens of milliseconds apart, so
    the machine's drift cannot come between them."""
    measured: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in predictors}
    order = list(predictors)
    with fixed_threads(threads):
        for number in range(rounds):
            for name in order if number % 2 == 0 else order[::-1]:
                for block in measured[name]:
                    block.append(float(np.median(timed_calls(partial(predictors[name], one), warmup=warmup,
                                                             repeats=calls))))
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=6, help="repeats of (one pass of all, each one alone)")
    parser.add_argument("--calls", type=int, default=30, help="SpeedConfig.repeats (a round times a third)")
    parser.add_argument("--seq-len", type=int, default=46)
    parser.add_argument("--switch-rounds", type=int, default=40, help="rounds of after another / after itself")
    args = parser.parse_args()

    task = load_task("mr")
    finetuned = finetune_teacher(args.teacher, task, show_progress=False)
    data = tokenized_for(finetuned, task)
    config = SpeedConfig(threads=args.threads, repeats=args.calls, batch_repeats=5)
    calls = max(5, args.calls // 3)   # as a comparison's rounds time each model
    print(f"CPU: {cpu_model()}; {args.threads} threads; batch 1 at {args.seq_len} tokens; a pass is {ROUNDS} rounds "
          f"of {calls} calls; {args.repeats} repeats; ms are the medians of the repeats' pass medians")
    with tempfile.TemporaryDirectory() as tmp:
        built: dict[str, Path] = {}
        teacher = finetuned.load().model.eval()
        for method, backend in VARIANTS:
            if unavailable(quant_format(method), backend):   # OpenVINO is an optional extra
                continue
            target = Path(tmp) / f"{method}-{backend}"
            target.mkdir()
            write_artefact(quant_format(method), backend, teacher, target)
            built[f"{method} {backend}"] = target
        del teacher

        def load(names: list[str], spinning: bool) -> dict[str, Predictor]:
            return {name: TorchPredictor(finetuned.load().model) if name == TEACHER else
                    load_artefact(built[name], args.threads, spinning=spinning) for name in names}

        names = [TEACHER, *built]
        settings = (False, True)   # ONNX Runtime's workers: not spinning (compare), spinning (its default)
        one = speed_batch(data, 1, args.seq_len)
        for spinning in settings:
            print(f"\nAfter another model / after itself, {args.switch_rounds} rounds of all of them in one process, "
                  f"ONNX Runtime's workers {'spinning' if spinning else 'not spinning'}:")
            print(f"{'model':24} {'after itself ms':>15} " + " ".join(f"{f'warm-up {w}':>22}" for w in WARMUPS))
            predictors = load(names, spinning)
            switches = {warmup: switch_ratios(predictors, one, args.switch_rounds, calls, warmup, args.threads)
                        for warmup in WARMUPS}
            for name in names:
                itself = statistics.median(switches[ROUND_WARMUP][name][1])
                cells = []
                for warmup in WARMUPS:
                    ratios = [o / i for o, i in zip(*switches[warmup][name])]
                    q1, median, q3 = np.percentile(ratios, [25, 50, 75])
                    cells.append(f"{median:.3f} ({q1:.3f}-{q3:.3f})")
                print(f"{name:24} {itself:15.3f} " + " ".join(f"{c:>22}" for c in cells))
            del predictors

        inside = {(spin, name): [] for spin in settings for name in names}
        alone = {(spin, name): [] for spin in settings for name in names}
        for repeat in range(args.repeats):   # both settings in every repeat: the machine's drift falls on both
            for spinning in settings if repeat % 2 == 0 else settings[::-1]:
                timed = timed_passes(partial(load, names, spinning), data, args.seq_len, config, passes=1)
                for name, timing in timed.items():
                    inside[spinning, name].append(timing.pass_medians[0])
                for name in names[repeat % len(names):] + names[:repeat % len(names)]:
                    timing = timed_passes(partial(load, [name], spinning), data, args.seq_len, config, passes=1)[name]
                    alone[spinning, name].append(timing.pass_medians[0])
            print(f"repeat {repeat + 1}/{args.repeats} done", file=sys.stderr)
        for spinning in settings if args.repeats else ():
            print(f"\nAlone / in a pass of all of them, {args.repeats} repeats, ONNX Runtime's workers "
                  f"{'spinning' if spinning else 'not spinning'}:")
            print(f"{'model':24} {'alone ms':>9} {'in rounds ms':>13} {'ratio':>7} {'IQR of the repeats':>19}")
            for name in names:
                ratios = [i / a for i, a in zip(inside[spinning, name], alone[spinning, name])]
                q1, q3 = np.percentile(ratios, [25, 75])
                print(f"{name:24} {statistics.median(alone[spinning, name]):9.3f} "
                      f"{statistics.median(inside[spinning, name]):13.3f} {statistics.median(ratios):7.3f} "
                      f"{q1:9.3f} to {q3:.3f}")

if __name__ == "__main__":
    main()

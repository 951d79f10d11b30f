"""Does timing one runtime slow the next? Each model's batch-1 latency right after another model against right after
itself, and alone in a process of its own against inside the rounds `compress compare` times its speed-ups with.

    python benchmarks/contamination.py                     # the fine-tuned minilm teacher on MR, 2 threads
    python benchmarks/contamination.py --switch-rounds 40 --loads 4 --rounds 10

The models: the teacher in PyTorch (fp32), its dynamic int8 in PyTorch and in ONNX Runtime, and its fp32 ONNX export
in ONNX Runtime and (where installed) OpenVINO, each written by compress's own writer and loaded back. Printed with
ONNX Runtime's workers as a comparison sets them (not spinning) and, for contrast, spinning (its default).

1. After another model / after itself: rounds of every model in alternating order, as a pass of the comparison
   times them; in each round a model's calls are timed right after the model before it ran, then again right after
   themselves, tens of milliseconds apart, so the machine's drift cannot come between the two. The ratio (the median
   over the rounds, with its quartiles) is what the model run before took from this one: ONNX Runtime's workers
   spin-wait after a call, on the cores the next model needs. Shown with no untimed call before the timed ones and
   with the comparison's warm-up (``ROUND_WARMUP``).
2. Alone against in the rounds: one process loads every model and times the comparison's rounds
   (``compress.bench.speed.timed_round``, the code a pass runs); beside it, one process per model loads that model
   alone and times the same round of it. They take turns, one process working at a time: a round of all of them,
   then each model alone (the order reversed every other round), so a model's two medians are a second apart and
   the machine's drift, which moves a shared VM by 15% between passes a minute apart, cannot come between them; a
   tenth of a second between turns lets what one process left running stop before the next starts, so the
   models that contaminate one alone are those run before it in its own process: none.
   ``--loads`` sets of processes, each loading afresh as a pass does, ``--rounds`` rounds each; the ratio
   (in the rounds / alone) is the median over all rounds, with its 95% interval (order statistics), its quartiles
   and the lowest and highest load's median. ``--switch-rounds 0`` leaves out the first.

The goal is every ratio within 5% of 1.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from compress.bench.inputs import speed_batch
from compress.bench.machine import cpu_model
from compress.bench.speed import ROUND_WARMUP, SpeedConfig, pass_orders, round_calls, timed_round
from compress.bench.timing import fixed_threads, timed_calls
from compress.data.load import load_task
from compress.methods.quantization import quant_format
from compress.models.checkpoints import load_encoder
from compress.quantize.artefacts import load_artefact, unavailable, write_artefact
from compress.quantize.predictors import Predictor, TorchPredictor
from compress.stats import median_interval
from compress.teachers.finetune import finetune_teacher, tokenized_for

VARIANTS = (("int8", "torch"), ("int8", "onnxruntime"), ("onnx", "onnxruntime"), ("onnx", "openvino"))
TEACHER = "teacher torch fp32"
WARMUPS = (0, ROUND_WARMUP)   # untimed calls before a model's timed ones: none, and as a comparison's rounds
SETTINGS = (False, True)      # ONNX Runtime's workers: not spinning (compare), spinning (its default)
TURN_PAUSE = 0.1              # seconds between one process's turn and the next's


def load_models(teacher: Path, built: dict[str, Path], names: list[str], threads: int,
                spinning: bool) -> dict[str, Predictor]:
    """The named models, loaded afresh: the teacher from its checkpoint, every other one from its artefact."""
    return {name: TorchPredictor(load_encoder(teacher).model) if name == TEACHER else
            load_artefact(built[name], threads, spinning=spinning) for name in names}


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


def round_worker(conn: Connection, teacher: Path, built: dict[str, Path], names: list[str], threads: int,
                 spinning: bool, one: dict[str, np.ndarray], calls: int) -> None:
    """A process of its own: loads ``names``, then times one round of them (in the order it is sent) each time
    it is asked, sending back each model's median; stops when sent None."""
    predictors = load_models(teacher, built, names, threads, spinning)
    with fixed_threads(threads):
        timed_round(predictors, names, one, calls)   # untimed: the first calls of a fresh load
        conn.send("ready")
        while (order := conn.recv()) is not None:
            conn.send({name: float(np.median(ms)) for name, ms in timed_round(predictors, order, one, calls).items()})


def alone_ratios(teacher: Path, built: dict[str, Path], names: list[str], threads: int, spinning: bool,
                 one: dict[str, np.ndarray], calls: int, loads: int, rounds: int) -> dict[str, list[list[float]]]:
    """Per load and round, each model's median in the rounds of all of them over its median alone, each timed by a
    process of its own, taking turns (see the module's text)."""
    context = multiprocessing.get_context("spawn")
    ratios: dict[str, list[list[float]]] = {name: [] for name in names}
    for load, order in enumerate(pass_orders(names, loads)):
        conns: dict[str, Connection] = {}
        processes = []
        for group, members in {"all": names, **{name: [name] for name in names}}.items():
            conns[group], there = context.Pipe()
            processes.append(context.Process(target=round_worker, daemon=True,
                                             args=(there, teacher, built, members, threads, spinning, one, calls)))
            processes[-1].start()
        for conn in conns.values():
            assert conn.recv() == "ready"
        for name in names:
            ratios[name].append([])
        for number in range(rounds):
            round_order = order if number % 2 == 0 else order[::-1]
            medians: dict[str, dict[str, float]] = {}
            for group in ["all", *round_order] if number % 2 == 0 else [*round_order, "all"]:
                time.sleep(TURN_PAUSE)   # what the process before left running (spinning workers) has stopped
                conns[group].send(round_order if group == "all" else [group])
                medians[group] = conns[group].recv()
            for name in names:
                ratios[name][-1].append(medians["all"][name] / medians[name][name])
        for conn in conns.values():
            conn.send(None)
        for process in processes:
            process.join()
        print(f"load {load + 1}/{loads} done", file=sys.stderr)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=30, help="SpeedConfig.repeats (a round times a third)")
    parser.add_argument("--seq-len", type=int, default=46)
    parser.add_argument("--switch-rounds", type=int, default=40, help="rounds of after another / after itself")
    parser.add_argument("--loads", type=int, default=4, help="sets of processes of alone / in the rounds")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of alone / in the rounds per load")
    args = parser.parse_args()

    task = load_task("mr")
    finetuned = finetune_teacher(args.teacher, task, show_progress=False)
    data = tokenized_for(finetuned, task)
    calls = round_calls(SpeedConfig(threads=args.threads, repeats=args.calls))
    one = speed_batch(data, 1, args.seq_len)
    print(f"CPU: {cpu_model()}; {args.threads} threads; batch 1 at {args.seq_len} tokens; a round times each model "
          f"{calls} times after {ROUND_WARMUP} untimed calls")
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
        names = [TEACHER, *built]
        for spinning in SETTINGS if args.switch_rounds else ():
            print(f"\nAfter another model / after itself, {args.switch_rounds} rounds of all of them in one process, "
                  f"ONNX Runtime's workers {'spinning' if spinning else 'not spinning'}:")
            print(f"{'model':24} {'after itself ms':>15} " + " ".join(f"{f'warm-up {w}':>22}" for w in WARMUPS))
            predictors = load_models(finetuned.directory, built, names, args.threads, spinning)
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

        for spinning in SETTINGS if args.loads and args.rounds else ():
            ratios = alone_ratios(finetuned.directory, built, names, args.threads, spinning, one, calls,
                                  args.loads, args.rounds)
            print(f"\nIn the rounds / alone, {args.loads} loads of {args.rounds} rounds, each model alone in a process "
                  f"of its own, ONNX Runtime's workers {'spinning' if spinning else 'not spinning'}:")
            print(f"{'model':24} {'ratio':>7} {'95% interval':>15} {'quartiles':>15} {'loads lowest-highest':>21}")
            for name in names:
                every = [ratio for load in ratios[name] for ratio in load]
                q1, median, q3 = np.percentile(every, [25, 50, 75])
                interval = median_interval(every)
                per_load = [float(np.median(load)) for load in ratios[name]]
                print(f"{name:24} {median:7.3f} {interval.low:7.3f}-{interval.high:.3f} {q1:7.3f}-{q3:.3f} "
                      f"{min(per_load):13.3f}-{max(per_load):.3f}")


if __name__ == "__main__":
    main()

"""What a candidate costs before it is trained: its parameters, bytes and FLOPs from its shape, its speed measured on
an untrained model of that shape (weights do not change how long dense kernels take), and the seconds a training
step of each of its trained steps takes here.

Speed: the model of the candidate's shape (random weights; the teacher's vocabulary, so the task's own inputs fit:
a pruned vocabulary changes the table, not the time), made as its last step makes models (quantization's artefacts
on every backend it runs on, loaded back from their files: :attr:`compress.registry.Transform.probe`), timed as
`compress compare` times (batch-1 latency p50, throughput at batch 32, the same threads and inputs), the fastest
backend kept. The results are kept in the search directory, keyed by the structure and the CPU, so a resumed search
does not time again. A structure not timed yet is placed by a fit of its kind's speed against FLOPs over those timed
(:class:`SpeedFit`), as a training step not timed is interpolated between those that were (:func:`interpolate`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from compress.bench.machine import cpu_model, package_versions
from compress.bench.speed import SpeedConfig, measure_speed
from compress.bench.timing import fixed_threads
from compress.data.batching import TokenizedTask, make_dataloader
from compress.distill.layer_maps import LayerMap
from compress.distill.objective import DistillationObjective, teacher_runs_live
from compress.distill.recipe import LossTerm, Recipe, Stage
from compress.distill.teacher_targets import zero_targets
from compress.models.accounting import count_parameters, flops_per_sequence
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.paths import atomic_write_text, cache_dir, locked
from compress.quantize.predictors import TorchPredictor
from compress.registry import Context, StudentMethod, Transform
from compress.search.space import Candidate
from compress.train_config import TrainConfig
from compress.training import autocast, make_optimizer

# Objectives a search can minimize, and the measurement each reads.
OBJECTIVES = ("latency", "throughput", "size")


@dataclass(frozen=True)
class Footprint:
    """A candidate's size from its shape alone."""

    params: int
    size_bytes: int
    flops: int


def footprint(candidate: Candidate, seq_len: int) -> Footprint:
    """Parameters, stored bytes (as its last step stores them) and FLOPs per sequence of ``candidate``'s shape."""
    shape, last = candidate.shape, candidate.methods[-1]
    count = count_parameters(shape)
    if isinstance(last, Transform) and last.size is not None:
        size = last.size(last.make_options(candidate.pipeline.steps[-1].options), shape)
    else:
        size = 4 * (count.backbone + count.classifier)
    return Footprint(count.backbone, size, flops_per_sequence(shape, seq_len))


@dataclass(frozen=True)
class Timed:
    """A structure's speed, measured: its fastest backend's batch-1 latency and batch throughput."""

    latency_ms: float
    throughput: float
    backend: str
    seconds: float = 0.0    # what timing it took: a later search that reuses it charges its budget as much

    def objective(self, minimize: str) -> float:
        """Less is better: milliseconds at batch 1, or milliseconds per example at batch 32."""
        return self.latency_ms if minimize == "latency" else 1000 / self.throughput


def structure_key(candidate: Candidate, teacher: EncoderConfig) -> str:
    """What its speed depends on: the shape (the teacher's vocabulary) and how its last step runs models."""
    last = candidate.methods[-1]
    runs_as = str(candidate.pipeline.steps[-1]) if isinstance(last, Transform) and last.probe else "torch"
    shape = candidate.shape.replace(vocab_size=teacher.vocab_size).to_dict()
    return json.dumps({"shape": shape, "runs_as": runs_as}, sort_keys=True)


# The runtimes whose versions decide a structure's speed: probes timed under others are not reused.
RUNTIMES = ("torch", "onnxruntime", "openvino", "nncf")


class Probes:
    """Speed and training-step times measured for searches, kept under the cache root per CPU, threads, sequence
    length, calls, runtime versions and tokenized task (``search-probes/KEY.json``): every search of the same task on
    the same machine reuses what another timed, whatever its directory. What a search reuses is charged to its
    budget at what it cost when it was measured (:attr:`charged`, once per entry and search), so a search run again
    spends its budget as the first did and decides as it did, in a fraction of the time."""

    def __init__(self, data: TokenizedTask, seq_len: int, threads: int, repeats: int,
                 batch_shape: str = "filled") -> None:
        self.data, self.seq_len = data, seq_len
        # Batch-1 calls as a comparison times them; a few large batches (a structure's throughput is a ranking, not a
        # result: the finals measure it again), shaped as the search's throughput is.
        self.speed = SpeedConfig(threads=threads, repeats=repeats, batch_repeats=3, batch_shape=batch_shape)
        self.context = {"cpu": cpu_model(), "threads": threads, "seq_len": seq_len, "repeats": repeats,
                        "versions": package_versions(RUNTIMES), "task": data.cache_key} | \
            ({"batch_shape": batch_shape} if batch_shape != "filled" else {})   # filled: as probes were before shapes
        digest = hashlib.sha256(json.dumps(self.context, sort_keys=True).encode()).hexdigest()[:20]
        self.path = cache_dir() / "search-probes" / f"{digest}.json"
        self.timed, self.steps, self.step_costs, self.step_points = self._read()
        self.writable = False   # set once the search owns its directory: nothing is written before
        self.served: set[str] = set()   # the entries this search has measured or been charged for
        self.charged = {"speed probes": 0.0, "step timing": 0.0}   # reused entries' costs, not yet on the clock
        self.interpolated: set[str] = set()   # training steps this search estimated between timed ones

    def _read(self) -> tuple[dict[str, Timed], dict[str, float], dict[str, float], dict[str, StepPoint]]:
        """What the shared file holds for this context (nothing when it is absent, unreadable or of another one):
        the structures' speeds, the training steps' seconds, what timing each step took, and each step's kind and
        FLOPs (what an interpolation reads)."""
        try:
            saved = json.loads(self.path.read_text())
            if saved.get("context") != self.context:
                return {}, {}, {}, {}
            return {k: Timed(**v) for k, v in saved.get("timed", {}).items()}, \
                {k: float(v) for k, v in saved.get("steps", {}).items()}, \
                {k: float(v) for k, v in saved.get("step_costs", {}).items()}, \
                {k: StepPoint(str(v[0]), float(v[1])) for k, v in saved.get("step_points", {}).items()}
        except (OSError, ValueError, TypeError, AttributeError, IndexError):
            return {}, {}, {}, {}

    def _save(self) -> None:
        """Add what this search measured to the shared file, keeping what other searches added meanwhile."""
        if not self.writable:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with locked(self.path):
            timed, steps, costs, points = self._read()
            self.timed, self.steps, self.step_costs = timed | self.timed, steps | self.steps, costs | self.step_costs
            self.step_points = points | self.step_points
            atomic_write_text(self.path, json.dumps({"context": self.context, "steps": self.steps,
                                                     "step_costs": self.step_costs,
                                                     "step_points": {k: list(v) for k, v in self.step_points.items()},
                                                     "timed": {k: asdict(v) for k, v in self.timed.items()}},
                                                    indent=1))

    def _serve(self, key: str, category: str, cost: float) -> None:
        """Charge a reused entry's cost once per search (an entry this search measured is already on its clock)."""
        if key not in self.served:
            self.served.add(key)
            self.charged[category] += cost

    def take_charged(self) -> dict[str, float]:
        """The reused entries' costs not yet put on the search's clock, by category (and none left after)."""
        taken, self.charged = self.charged, dict.fromkeys(self.charged, 0.0)
        return taken

    def known(self, candidate: Candidate, teacher: EncoderConfig) -> Timed | None:
        return self.timed.get(structure_key(candidate, teacher))

    def time(self, candidate: Candidate, teacher: EncoderConfig, minimize: str,
             backends: set[str] | None = None) -> Timed:
        """The speed of ``candidate``'s structure on its fastest backend of ``backends`` (None: every one it runs
        on), measured once per structure."""
        key = structure_key(candidate, teacher)
        if key not in self.timed:
            start = time.perf_counter()
            timed = self._measure(candidate, teacher, minimize, backends)
            self.timed[key] = replace(timed, seconds=time.perf_counter() - start)
            self.served.add(key)
            self._save()
        self._serve(key, "speed probes", self.timed[key].seconds)
        return self.timed[key]

    def _measure(self, candidate: Candidate, teacher: EncoderConfig, minimize: str,
                 backends: set[str] | None) -> Timed:
        torch.manual_seed(0)
        model = Encoder(candidate.shape.replace(vocab_size=teacher.vocab_size)).eval()
        last, step = candidate.methods[-1], candidate.pipeline.steps[-1]
        found = []
        with tempfile.TemporaryDirectory(prefix="compress-probe-") as tmp:
            if isinstance(last, Transform) and last.probe is not None:
                context = Context(data=self.data, threads=self.speed.threads, workdir=Path(tmp))
                makers = last.probe(model, last.make_options(step.options), context)
            else:
                makers = {"torch": lambda: TorchPredictor(model)}
            for backend, make in makers.items():
                if backends is None or backend in backends or not backends & set(makers):
                    measured = measure_speed(make(), self.data, self.seq_len, self.speed)
                    found.append(Timed(measured["latency_ms_p50"], measured["throughput"], backend))
        return min(found, key=lambda t: t.objective(minimize))

    def step_seconds(self, student: EncoderConfig, teacher: EncoderConfig, method: StudentMethod | Transform,
                     options: Any, precision: str, batch_size: int) -> float:
        """Seconds of one training step of a model of shape ``student`` distilled from one of shape ``teacher`` on
        a batch of the task's training examples, with the loss terms ``method`` trains with, in ``precision``; 0 for
        a method that trains nothing. Measured once per shape, method and precision."""
        stage = training_stage(method, options, teacher)
        return 0.0 if stage is None else self.step_seconds_of(student, teacher, stage, precision, batch_size)


    def finetune_seconds(self, teacher: EncoderConfig, batch_size: int) -> float:
        """Seconds of one step of the teacher's fine-tuning (cross-entropy with the gold labels, fp32, as
        :mod:`compress.teachers.finetune` trains), on a model of its shape; measured once per shape."""
        stage = Stage("fine-tune", [LossTerm("hard_ce")])
        return self.step_seconds_of(teacher, teacher, (stage, Recipe("teacher", [stage], LayerMap("uniform"))),
                                    "fp32", batch_size)

    def step_seconds_of(self, student: EncoderConfig, teacher: EncoderConfig, stage: tuple[Any, Any], precision: str,
                        batch_size: int) -> float:
        """Seconds of one training step: timed once per shape, or interpolated in FLOPs between two this search has
        timed (or been charged for) of the same kind (:func:`step_point`) whose FLOPs bracket it, at no cost. Only
        what this search was served is read, so a search run again estimates as it did."""
        key = json.dumps({"student": student.to_dict(), "teacher": teacher.to_dict(), "stage": stage[0].to_dict(),
                          "precision": precision, "batch": batch_size}, sort_keys=True, default=str)
        if key not in self.served:
            point = step_point(student, teacher, stage, precision, batch_size, self.seq_len)
            between = interpolate(point, [(self.step_points[k].flops, self.steps[k]) for k in self.served
                                          if k in self.step_points and self.step_points[k].kind == point.kind])
            if between is not None:
                self.interpolated.add(key)
                return between
            self.step_points[key] = point
        if key not in self.steps:
            start = time.perf_counter()
            self.steps[key] = _time_steps(student, teacher, stage, self.data, precision, batch_size,
                                          self.speed.threads)
            self.step_costs[key] = time.perf_counter() - start
            self.served.add(key)
            self._save()
        self._serve(key, "step timing", self.step_costs.get(key, 0.0))
        return self.steps[key]

    def prime(self, steps: Iterable[tuple[EncoderConfig, EncoderConfig, tuple[Any, Any]]], precision: str,
              batch_size: int) -> int:
        """Time, of each kind of training step among ``steps`` (student, teacher, stage), the one of fewest FLOPs, the
        median one and the one of most, in that order, so that every other step of the kind is interpolated between
        timed ones; return the number of kinds. The walk asks for estimates in the order of its objective, smallest
        model first, so each would otherwise lie beyond all timed before it (in a 20-minute throughput search, 360 of
        the 360 steps timed after a kind's first)."""
        kinds: dict[str, dict[float, tuple[EncoderConfig, EncoderConfig, tuple[Any, Any]]]] = {}
        for student, teacher, stage in steps:
            point = step_point(student, teacher, stage, precision, batch_size, self.seq_len)
            kinds.setdefault(point.kind, {}).setdefault(point.flops, (student, teacher, stage))
        for members in kinds.values():
            flops = sorted(members)
            for f in dict.fromkeys((flops[0], flops[len(flops) // 2], flops[-1])):
                self.step_seconds_of(*members[f], precision, batch_size)
        return len(kinds)


class SpeedFit:
    """Per kind: speed ~ a + b * FLOPs, least squares over the structures timed so far, less the most it has
    overestimated one of them (so an untimed structure is timed before the walk passes it over); orders the untimed
    ones."""

    def __init__(self) -> None:
        self.points: dict[str, list[tuple[float, float]]] = {}

    def add(self, kind: str, flops: float, value: float) -> None:
        self.points.setdefault(kind, []).append((flops, value))

    def estimate(self, kind: str, flops: float) -> float | None:
        points = self.points.get(kind, [])
        if len({x for x, _ in points}) < 2:
            return None
        x, y = np.array(points).T
        slope, intercept = np.polyfit(x, y, 1)
        over = max(0.0, float(np.max(intercept + slope * x - y)))
        return float(max(intercept + slope * flops - over, 0.5 * min(y)))


class StepPoint(NamedTuple):
    """A training step's kind (all it is timed with but the student's size) and its student's FLOPs per sequence."""

    kind: str
    flops: float


def step_point(student: EncoderConfig, teacher: EncoderConfig, stage: tuple[Any, Any], precision: str,
               batch_size: int, seq_len: int) -> StepPoint:
    """Steps of one kind differ only in how much the student computes: the same loss terms, precision and batch, a
    student built the same way (sharing, factorized embeddings or matrices; its layers' count and widths are what
    FLOPs stand for, its vocabulary changes a step by a few milliseconds of the optimizer's), and the same teacher
    where it runs on every batch, else the same width and depth of the cached outputs its terms read."""
    read = teacher.to_dict() if teacher_runs_live(stage[0]) else \
        {"hidden_size": teacher.hidden_size, "num_layers": teacher.num_layers, "num_labels": teacher.num_labels}
    built = {"sharing": student.sharing, "groups": student.groups, "factorized": student.factorized,
             "word_rank": bool(student.word_rank), "delta_rank": bool(student.delta_rank),
             "low_rank": any(r for ranks in (student.attention_ranks or ()) + (student.ffn_ranks or ()) for r in ranks)}
    kind = json.dumps({"teacher": read, "stage": stage[0].to_dict(), "precision": precision,
                       "batch": batch_size, "student": built}, sort_keys=True, default=str)
    return StepPoint(hashlib.sha256(kind.encode()).hexdigest()[:16], float(flops_per_sequence(student, seq_len)))


def interpolate(point: StepPoint, timed: list[tuple[float, float]]) -> float | None:
    """The seconds at ``point``'s FLOPs on the line between the nearest timed (FLOPs, seconds) on each side of it, or
    None where none is on one side (outside what was timed, a step is timed, not extrapolated)."""
    below = max(((f, t) for f, t in timed if f <= point.flops), default=None)
    above = min(((f, t) for f, t in timed if f >= point.flops), default=None)
    if below is None or above is None:
        return None
    (f0, t0), (f1, t1) = below, above
    return t0 if f1 == f0 else t0 + (t1 - t0) * (point.flops - f0) / (f1 - f0)


def training_recipe(method: StudentMethod | Transform, options: Any, given: EncoderConfig) -> Recipe | None:
    """The recipe a step trains with, given a model of shape ``given`` (the teacher, for a student), or None."""
    if isinstance(method, StudentMethod):
        return method.recipe(options)
    return method.recovery(options, given) if method.recovery is not None else None


def training_stage(method: StudentMethod | Transform, options: Any, given: EncoderConfig) -> tuple[Any, Any] | None:
    """The (stage, recipe) of the stage a step trains with that reads the most (the costliest step), or None."""
    recipe = training_recipe(method, options, given)
    if recipe is None or not recipe.stages:
        return None
    return max(recipe.stages, key=lambda s: len(s.terms)), recipe


def _time_steps(student: EncoderConfig, teacher: EncoderConfig, stage: tuple[Any, Any], data: TokenizedTask,
                precision: str, batch_size: int, threads: int, steps: int = 4) -> float:
    """The median seconds of ``steps`` training steps (after one untimed) on real training batches (their token ids
    folded into a vocabulary a step before pruned: the lookups cost the same whatever rows they read)."""
    stage_, recipe = stage
    torch.manual_seed(0)
    model, reference = Encoder(student.replace(vocab_size=teacher.vocab_size)), Encoder(teacher)
    objective = DistillationObjective(stage_, reference, model, recipe.layer_map)
    optimizer = make_optimizer(model, list(objective.projections.parameters()), TrainConfig())   # as a run trains
    loader = make_dataloader(data.splits["train"], data.collator, batch_size=batch_size, shuffle=True, seed=0)
    batches = list(itertools.islice(loader, steps + 1))
    device = torch.device("cpu")
    times = []
    with fixed_threads(threads):
        model.train()
        for index in range(steps + 1):
            batch = dict(batches[index % len(batches)])
            batch["input_ids"] = batch["input_ids"] % teacher.vocab_size
            if objective.targets is not None:   # a run reads the teacher's outputs from their cache
                batch |= zero_targets(objective.targets, teacher, batch)
            start = time.perf_counter()
            with autocast(precision, device):
                loss, _ = objective(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            times.append(time.perf_counter() - start)
    return float(sorted(times[1:])[len(times[1:]) // 2])

"""The walk over a search's candidates (stages 2 and 3 of :mod:`compress.search.search`) and its finals.

A candidate is *kept* when its selection retention cannot be told below the bar: the upper end of its paired interval
(the candidate and the teacher on the same dev sentences, :mod:`compress.stats`) reaches ``min_retention``. It *missed
the bar* when that upper end lies below it: then it, every pipeline that extends it and every candidate that
compresses at least as much are ruled out. One seed on about a thousand dev sentences is one draw with an
interval of a few points; the screen drops only what that draw shows is below the bar, and the finals decide with
every seed.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from compress.data.splits import SELECT
from compress.distill.teacher_logits import teacher_logits
from compress.errors import CompressError
from compress.interrupts import raise_if_interrupted
from compress.models.config import EncoderConfig
from compress.predictions import Predictions, load_predictions
from compress.quantize.predictors import predict_batches
from compress.registry import Context, StudentMethod, Transform
from compress.reports.records import RunRecord, read_run_record
from compress.runs.compare import _run_or_reuse, completed_run, run_dir_of, run_predictor, stopped_by_bar
from compress.runs.compare import compare as run_compare
from compress.runs.compare_plan import CompareConfig, plan_runs, plan_seeds, run_config_of
from compress.runs.executors import run_step
from compress.runs.paired import method_evidence, method_intervals, teacher_interval
from compress.search.ledger import DISAGREEMENT, CandidateRecord, Final, SearchRecord, write_record
from compress.search.probe import Probes, Timed, footprint, structure_key, training_recipe, training_stage
from compress.search.report import resolution_line
from compress.search.resolution import selection_resolution
from compress.search.space import Candidate, Space, compresses_at_least
from compress.stats import pass_speedup
from compress.task_metrics import resolve_metric
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.teachers.registry import load_tokenizer

# What the search's wall time went to (search.json's ``seconds``); the rest is its own work: enumerating the space,
# fitting, deciding, writing the ledger and the report.
SAVE_EVERY_S = 30.0   # search.json is written at least this often while candidates are left for want of budget
TIME_CATEGORIES = ("teacher", "training", "evaluation and timing", "speed probes", "step timing", "finals")
# A run's seconds over its training steps' (a dev pass every epoch, the test pass, timing, saving) until a run of
# the same method has been measured here; and the seconds of a run that trains nothing (quantization's builds,
# timings and one-sentence-at-a-time scoring: 31 s a run in the default comparison on the AVX-512 EPYC).
EVAL_SHARE = 1.15
UNTRAINED_RUN_S = 30.0
# Speed probes (timing untrained structures) take at most this share of the budget; past it, the structures not timed
# yet are ordered by the fit of those timed. A 45-minute search that timed 917 structures one after another spent
# its whole budget probing and trained one candidate.
PROBE_SHARE = 0.10
PROBE_REPORT_S = 30.0   # while probing, a line of progress at least this often


def format_seconds(seconds: float) -> str:
    minutes = seconds / 60
    return f"{seconds:.0f} s" if seconds < 120 else f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


class Clock:
    """The budget spent, by what it went to, over this invocation and the ones before it (a resumed search): wall
    time, plus what the work this search reused from others cost when it was done (:meth:`charge`)."""

    def __init__(self, before: dict[str, float], spent_before: float, start: float, reused_before: float = 0.0) -> None:
        self.start, self.before = start, spent_before
        self.seconds = {name: before.get(name, 0.0) for name in TIME_CATEGORIES}
        self.reused = reused_before   # of the budget spent: work reused, charged at its first cost

    def charge(self, category: str, seconds: float) -> None:
        """Put work another search (or comparison) did, and this one reuses, on the budget at what it cost then."""
        self.seconds[category] += seconds
        self.reused += seconds
        self.before += seconds

    @contextmanager
    def on(self, category: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[category] += time.perf_counter() - start

    @property
    def spent(self) -> float:
        return self.before + time.perf_counter() - self.start


# --- estimates -----------------------------------------------------------------------------------


def trained_steps(candidate: Candidate, teacher: EncoderConfig) -> list[tuple[Any, Any, EncoderConfig, EncoderConfig]]:
    """(method, options, the shape it is given, the shape it gives) of every step of ``candidate``: the shapes the
    space found it with, else each made here (a step whose shape the data decide keeps its input's, the last step
    the candidate's shape)."""
    shape, steps = teacher, []
    for index, (step, method) in enumerate(zip(candidate.pipeline.steps, candidate.methods)):
        options = method.make_options(step.options)
        if candidate.shapes:
            shape, after = candidate.shapes[index], candidate.shapes[index + 1]
        elif index == len(candidate.methods) - 1:
            after = candidate.shape
        elif isinstance(method, StudentMethod):
            after = method.student_config(teacher, options)
        else:
            after = method.shape(options, shape, Context()) if method.shape is not None else shape
        steps.append((method, options, shape, after))
        shape = after
    return steps


def trains_nothing(candidate: Candidate, teacher: EncoderConfig) -> bool:
    """Whether no step of ``candidate`` trains (the teacher quantized, its vocabulary pruned, exported): its one run
    takes seconds, not the minutes of a distillation or a recovery."""
    return all(training_recipe(method, options, given) is None
               for method, options, given, _ in trained_steps(candidate, teacher))


def step_estimates(candidate: Candidate, teacher: EncoderConfig, probes: Probes, precision: str, batch_size: int,
                   examples: int) -> list[float]:
    """Per step of ``candidate``: the seconds of its training steps (every epoch of every stage at the step time
    measured here for its shapes), 0 for a step that trains nothing."""
    steps_per_epoch = math.ceil(examples / batch_size)
    found = []
    for method, options, given, made in trained_steps(candidate, teacher):
        recipe = training_recipe(method, options, given)
        seconds = probes.step_seconds(made, given, method, options, precision, batch_size) if recipe else 0.0
        found.append(sum(stage.epochs for stage in recipe.stages) * steps_per_epoch * seconds if recipe else 0.0)
    return found


def prime_steps(found: list[Candidate], teacher: EncoderConfig, probes: Probes, precision: str,
                batch_size: int) -> int:
    """Time the few training steps every other of the space's is interpolated between (:meth:`Probes.prime`): the
    last step of each candidate (the space holds every pipeline's prefixes, so every step is one's last); return the
    number of kinds."""
    steps = []
    for candidate in found:
        method, options, given, made = trained_steps(candidate, teacher)[-1]
        if (stage := training_stage(method, options, given)) is not None:
            steps.append((made, given, stage))
    return probes.prime(steps, precision, batch_size)


def least_training(found: list[Candidate], teacher: EncoderConfig, probes: Probes, precision: str, batch_size: int,
                   examples: int) -> tuple[float, str] | None:
    """The estimated seconds and the text of the cheapest first step that trains, over every candidate (what one
    full training costs at least); None when nothing trains."""
    firsts = {str(c.pipeline.steps[0]): c.prefix(1) for c in found}
    costs = [(step_estimates(first, teacher, probes, precision, batch_size, examples)[0] * EVAL_SHARE, first.text)
             for first in firsts.values()]
    costs = [cost for cost in costs if cost[0] > 0]
    return min(costs) if costs else None


# --- the candidates' state ---------------------------------------------------------------------------


@dataclass
class State:
    """A candidate and what the search knows of it."""

    candidate: Candidate
    record: CandidateRecord
    kind: str                      # how its last step runs models (structures of one kind are fitted together)
    timed: Timed | None = None


def _kind(candidate: Candidate) -> str:
    last = candidate.methods[-1]
    return str(candidate.pipeline.steps[-1]) if isinstance(last, Transform) and last.probe else "torch"


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


@dataclass(frozen=True)
class Screen:
    """A trained step's selection retention with its paired interval, against the bar."""

    score: float          # in the search's metric
    retention: float
    low: float
    high: float

    def below(self, min_retention: float) -> bool:
        return self.high < min_retention


class Walk:
    """The walk over the candidates, then the finals (see :mod:`compress.search.search`)."""

    def __init__(self, config: Any, space: Space, found: list[Candidate], probes: Probes, record: SearchRecord,
                 clock: Clock, out: Path, task: Any, say: Callable[[str], None], show_progress: bool,
                 precision: str, teacher: EncoderConfig, compare_config: CompareConfig) -> None:
        self.config, self.space, self.probes, self.record, self.clock = config, space, probes, record, clock
        self.out, self.task, self.say, self.show_progress = out, task, say, show_progress
        self.precision, self.teacher, self.compare_config = precision, teacher, compare_config
        self.states = []
        resumed = {c.text: c for c in record.candidates}   # what an interrupted run of this search found
        for candidate in found:
            size = footprint(candidate, probes.seq_len)
            self.states.append(State(candidate, resumed.get(candidate.text) or CandidateRecord(
                candidate.text, size.params, size.size_bytes, size.flops, candidate.trains), _kind(candidate)))
        record.candidates = [s.record for s in self.states]
        for state in self.states:   # timed by an interrupted run of this search: on its clock already
            if state.record.latency_ms is not None:
                probes.served.add(structure_key(state.candidate, teacher))
        self.fit = SpeedFit()
        # By kind, the backends that were fastest on one of its structures: the least and the most costly structure
        # of a kind are timed on every backend, the others only on those.
        self.winners: dict[str, set[str]] = {}
        self.kept: list[State] = []
        self.failed: list[Candidate] = []        # the steps (pipelines) that missed the bar
        self.runs: dict[str, tuple[Path, RunRecord]] = {}   # by pipeline text, first seed
        self.complete: set[tuple[str, int]] = set()   # (run, seed) found complete in the directory
        self.trained = max((s.record.order or 0 for s in self.states), default=0)
        # By method, from its runs trained here: a run's seconds over its estimated training steps, and the seconds
        # of a run that trains nothing.
        self.factor: dict[str, float] = {}
        self.untrained: dict[str, float] = {}
        self.probes_spent = False                 # speed probes took their share of the budget (may_probe)
        # The best objective that missed the bar on its mean, and its candidate (next_position bisects above it).
        self.floor: tuple[float, str] | None = None
        self.cheap: dict[int, bool] = {}          # by candidate index: whether it trains nothing (trains_nothing)
        self.cheap_left = True                    # one may lie above the floor (next_position)
        # The sentences it selects on: training examples its task holds out (nothing trains or picks an epoch on
        # them), or dev where it holds none out.
        self.evidence = SELECT if SELECT in task.splits else "dev"
        self.metric = resolve_metric(config.metric, regression=task.regression, classes=task.num_labels)
        self.least_training_s: float | None = None   # the cheapest full training of a first step (search.py sets it)
        self.last_report = time.perf_counter()    # the last line of probing progress
        self.saved_at = time.perf_counter()       # search.json's last write

    @property
    def examples(self) -> int:
        return len(self.task.splits["train"])

    # -- the teacher and the bar ----------------------------------------------------------------

    def prepare(self) -> None:
        """The fine-tuned teacher (cached), its predictions on the selection sentences and on dev (cached), the bar,
        and how finely the selection sentences resolve a retention near it."""
        with self.clock.on("teacher"):
            self.finetuned = finetune_teacher(self.config.teacher, self.task, self.config.teacher_finetune,
                                              device=self.config.device, show_progress=self.show_progress,
                                              metric=self.config.metric)   # as its runs' teacher picks
            self.data = tokenized_for(self.finetuned, self.task)
            self.vocab = load_tokenizer(str(self.finetuned.directory)).get_vocab()
            model = self.finetuned.load().model
            fingerprint = self.finetuned.record["fingerprint"]
            teacher = {split: Predictions.of(teacher_logits(model, self.data, split, fingerprint, torch.device("cpu"),
                                                            show_progress=False), self.data.splits[split]["labels"])
                       for split in {self.evidence, "dev"}}
        self.teacher_selection = teacher[self.evidence]
        score = teacher_interval(self.teacher_selection, self.metric)
        self.record.teacher_dev_accuracy = score["estimate"]
        self.bar = self.config.min_retention * score["estimate"]
        self.record.bar = self.bar
        self.record.resolution = selection_resolution(self.teacher_selection, self.metric, self.config.min_retention,
                                                      DISAGREEMENT)
        self.say(resolution_line(self.record, len(self.teacher_selection.labels)))
        # A stage stops once its dev score (what a stage evaluates each epoch, in the metric) cannot reach the bar's
        # share of the teacher's dev score less the interval's reach: what a candidate's interval could still carry
        # to the bar (the teacher's own half-width, wider than a paired one).
        dev = teacher_interval(teacher["dev"], self.metric)
        stop_below = self.config.min_retention * dev["estimate"] - (dev["high"] - dev["low"]) / 2
        self.stop_below = stop_below if stop_below > 0 else None   # a bar no score falls below stops nothing

    # -- objective ------------------------------------------------------------------------------

    def objective(self, state: State) -> float | None:
        """Less is better; None while a speed objective has neither a measurement nor a fit for it."""
        if self.config.minimize == "size":
            return float(state.record.size_bytes)
        if state.timed is not None:
            return state.timed.objective(self.config.minimize)
        return self.fit.estimate(state.kind, state.record.flops)

    def time_structure(self, state: State, every_backend: bool = False) -> None:
        with self.clock.on("speed probes"):
            start = time.perf_counter()
            state.timed = self.probes.time(state.candidate, self.teacher, self.config.minimize,
                                           None if every_backend else self.winners.get(state.kind))
            state.record.seconds += time.perf_counter() - start
        self._charge_probes()
        state.record.latency_ms, state.record.throughput = state.timed.latency_ms, state.timed.throughput
        state.record.backend, state.record.fidelity = state.timed.backend, "timed"
        state.record.objective = state.timed.objective(self.config.minimize)
        self.fit.add(state.kind, state.record.flops, state.record.objective)
        self.winners.setdefault(state.kind, set()).add(state.timed.backend)

    def _seed_fits(self) -> None:
        """Time the structures every kind's fit starts from: its least and its most costly (by FLOPs)."""
        by_kind: dict[str, list[State]] = {}
        for state in self.states:
            by_kind.setdefault(state.kind, []).append(state)
        for states in by_kind.values():
            ends = (min(states, key=lambda s: s.record.flops), max(states, key=lambda s: s.record.flops))
            for state in {id(s): s for s in ends}.values():
                if not self.may_probe():
                    return
                self.time_structure(state, every_backend=True)
                self.probing_progress()

    # -- the walk -------------------------------------------------------------------------------

    def run(self) -> None:
        self.say(f"search: {len(self.states)} candidates, minimize {self.config.minimize} keeping "
                 f"{self.config.min_retention:.0%} of the teacher's selection {self.metric.title}, budget "
                 f"{format_seconds(self.config.budget_s)}")
        self.prepare()
        if self.config.minimize == "size":
            for state in self.states:
                state.record.objective = float(state.record.size_bytes)
        else:
            self._seed_fits()
        # By objective, then (a tie: one structure with or without a pruned vocabulary) the shorter pipeline.
        order = sorted((math.inf if (key := self.objective(state)) is None else key, len(state.candidate.methods), i)
                       for i, state in enumerate(self.states))
        while order:
            key, steps, index = order.pop(self.next_position(order))
            state = self.states[index]
            if self.least_training_s is not None and self.config.budget_s - self.clock.spent < self.least_training_s:
                self.say(f"the {format_seconds(self.config.budget_s - self.clock.spent)} left of the budget cannot "
                         f"hold any training (the cheapest: about {format_seconds(self.least_training_s)}): the walk "
                         "ends here")
                for _, _, left_index in [(key, steps, index), *order]:
                    self.states[left_index].record.reason = "the budget ended before it was reached"
                break
            enough = self.enough()
            if enough is not None and key >= (self.objective(enough) or math.inf):
                self._not_reached(order + [(key, steps, index)], enough)
                break
            if (reason := self.ruled_out(state)) is not None:   # before timing it: no need to know its speed
                state.record.status, state.record.reason = "ruled out", reason
                continue
            if self.config.minimize != "size" and state.timed is None and self.may_probe():
                self.time_structure(state)
                self.probing_progress()
                bisect.insort(order, (self.objective(state) or math.inf, steps, index))
                continue
            try:
                self.consider(state)
            except CompressError as e:   # a candidate its steps cannot make (a shape a step refuses): the next one
                raise_if_interrupted(e)
                state.record.status, state.record.reason = "failed", str(e)
                self.say(f"    failed: {e}")
            if state.record.status in ("below", "kept") and not self.met_bar(state) and \
                    (self.floor is None or key > self.floor[0]):   # below the bar on its mean: bisect above it
                self.floor = (key, state.candidate.text)
            # search.json after every candidate trained; one only left for want of budget (a reason, nothing to
            # resume from) waits for the next save: each save writes every candidate (1.8 MB for 3,209), and
            # saving after each of the 1,580 left in the first 90-minute search took minutes of its budget.
            if state.record.order is not None or time.perf_counter() - self.saved_at >= SAVE_EVERY_S:
                self.save()

    def next_position(self, order: list[tuple[float, int, int]]) -> int:
        """Where in ``order`` (sorted by objective) the walk goes next: the best candidate until one misses the bar;
        after a miss, while none has met the bar, the best above the miss that trains nothing (the teacher quantized:
        seconds to make, and likely to meet it), so the walk soon holds a model that meets the bar; then the candidate
        nearest the geometric middle between the best objective that missed (the floor) and the best that met the
        bar (or, while none has, the worst objective left), a bisection that reaches the bar's edge in a few
        trainings where walking up from the most compressed spent a 90-minute size search on ten that missed; once
        nothing lies between, the best above the floor (the walk as before, from there); and once nothing is left
        above the floor, what is below it."""
        if self.floor is None:
            return 0
        floor, first = self.floor[0], (lambda entry: entry[0])
        low = bisect.bisect_right(order, floor, key=first)
        best = min((m for s in self.kept if self.met_bar(s) and (m := self.objective(s)) is not None), default=None)
        if best is None and self.cheap_left:
            cheap = next((i for i in range(low, len(order)) if self.trains_nothing(order[i][2])), None)
            if cheap is not None:
                return cheap
            self.cheap_left = False   # the floor only rises: none will lie above it again (no scan each step)
        high = bisect.bisect_left(order, best, lo=low, key=first) if best is not None else len(order)
        finite = bisect.bisect_left(order, math.inf, lo=low, hi=high, key=first)   # untimed, unfitted ones last
        if finite > low:
            middle = math.sqrt(max(floor, 1e-12) * (best if best is not None else order[finite - 1][0]))
            near = bisect.bisect_left(order, middle, lo=low, hi=finite, key=first)
            return min((i for i in (near - 1, near) if low <= i < finite),
                       key=lambda i: abs(math.log(max(order[i][0], 1e-12) / middle)))
        return low if low < len(order) else 0

    def trains_nothing(self, index: int) -> bool:
        if index not in self.cheap:
            self.cheap[index] = trains_nothing(self.states[index].candidate, self.teacher)
        return self.cheap[index]

    def met_bar(self, state: State) -> bool:
        """Whether a kept candidate's selection retention (its mean on the selection sentences) meets the bar."""
        return state.record.dev_retention is not None and state.record.dev_retention >= self.config.min_retention

    def enough(self) -> State | None:
        """The last of the ``finalists`` best candidates that met the bar on their dev mean, once that many have:
        anything worse is not needed. Candidates kept only because their interval reaches the bar do not end the
        walk: it goes on to less compressed ones until enough meet it on the mean, or the budget ends."""
        met = sorted((s for s in self.kept if self.met_bar(s)), key=lambda s: self.objective(s) or math.inf)
        return met[self.config.finalists - 1] if len(met) >= self.config.finalists else None

    def finalists(self) -> list[State]:
        """The finals' candidates: the best of those that met the bar on their dev mean, then, where fewer did,
        the best of those kept because their interval reaches it."""
        ranked = sorted(self.kept, key=lambda s: (not self.met_bar(s), self.objective(s) or math.inf))
        return ranked[:self.config.finalists]

    def _not_reached(self, order: list[tuple[float, int, int]], enough: State) -> None:
        what = "larger" if self.config.minimize == "size" else "slower"
        last = self.objective(enough) or math.inf
        for key, _, index in order:
            state = self.states[index]
            if state.record.status == "not reached":
                measured = "measured" if state.timed or self.config.minimize == "size" else "estimated"
                below = "at most as large as" if self.config.minimize == "size" else "at least as fast as"
                state.record.reason = f"{measured} {what} than {enough.candidate.text}, the finals' last candidate" \
                    if key >= last or self.floor is None else f"{measured} {below} {self.floor[1]}, which missed " \
                    "the bar on its selection mean (the walk bisected above it)"

    def ruled_out(self, state: State) -> str | None:
        """Why ``state`` cannot meet the bar without training it, or None."""
        for failed in self.failed:   # a step that missed it: its own pipelines, and whatever compresses more
            if compresses_at_least(state.candidate, failed, self.space):
                return f"it compresses at least as much as {failed.text}, which missed the bar"
        for kept in self.kept:   # no better, and (by the same rule) no more accurate: nothing to learn from it
            if compresses_at_least(state.candidate, kept.candidate, self.space) and \
                    (self.objective(state) or math.inf) >= (self.objective(kept) or math.inf):
                return f"it compresses at least as much as {kept.candidate.text}, kept, and is no better"
        return None

    def may_probe(self) -> bool:
        """Whether speed probes may go on: they take at most :data:`PROBE_SHARE` of the budget; the first time they
        may not, the walk says so and goes on with the fit's estimates for the structures not timed."""
        if self.clock.seconds["speed probes"] < PROBE_SHARE * self.config.budget_s:
            return True
        if not self.probes_spent:
            self.probes_spent = True
            timed = sum(s.timed is not None for s in self.states)
            self.say(f"speed probes have taken their {PROBE_SHARE:.0%} of the budget ({timed} structures timed): the "
                     "others are ordered by the fit of those timed")
            self.record.notes.append(f"Speed probes stopped at {PROBE_SHARE:.0%} of the budget after {timed} "
                                     "structures; the candidates not timed were ordered by the fit of those timed.")
        return False

    def probing_progress(self) -> None:
        """A line every :data:`PROBE_REPORT_S` seconds while structures are timed one after another."""
        now = time.perf_counter()
        if now - self.last_report < PROBE_REPORT_S:
            return
        self.last_report = now
        timed = [s for s in self.states if s.timed is not None]
        fastest = min(timed, key=lambda s: self.objective(s) or math.inf)
        self.say(f"  probing: {len(timed)} structures timed ({format_seconds(self.clock.seconds['speed probes'])} of "
                 f"the {format_seconds(PROBE_SHARE * self.config.budget_s)} probes may take); fastest so far "
                 f"{fastest.candidate.text}, {self._shown(fastest)} untrained")

    def consider(self, state: State) -> None:
        """Leave ``state`` for want of budget, or train it (the first seed, step by step)."""
        first = ([state.candidate], self.config.seeds[:1])
        estimate = self.missing(first)
        reserve = self.missing(first, *self.finals_runs(state)) - estimate   # what the finals share with it: once
        left = self.config.budget_s - self.clock.spent
        if estimate + reserve > left:
            state.record.reason = (f"its training (about {format_seconds(estimate)}) and the finals (about "
                                   f"{format_seconds(reserve)}) did not fit the {format_seconds(left)} left")
            return
        if state.record.order is None:   # a candidate an interrupted run of this search took keeps its place
            self.trained += 1
            state.record.order = self.trained
        best = min(self.kept, key=lambda s: self.objective(s) or math.inf) if self.kept else None
        settled = sum(s.record.status != "not reached" for s in self.states)
        self.say(f"[{state.record.order}] {state.candidate.text}: {self._shown(state)}, about "
                 f"{format_seconds(estimate)} to train; {settled} of {len(self.states)} candidates settled, "
                 f"{format_seconds(left)} of the budget left; best kept so far: "
                 f"{best.candidate.text if best else 'none'}")
        self.train(state)

    def _shown(self, state: State) -> str:
        value = self.objective(state)
        if value is None:
            return "?"
        return f"{value / 1e6:.2f} MB" if self.config.minimize == "size" else f"{value:.3f} ms"

    def steps(self, candidate: Candidate) -> list[float]:
        with self.clock.on("step timing"):
            estimates = step_estimates(candidate, self.teacher, self.probes, self.precision, self.config.batch_size,
                                       self.examples)
        self._charge_probes()
        return estimates

    def _charge_probes(self) -> None:
        for category, seconds in self.probes.take_charged().items():
            self.clock.charge(category, seconds)

    def step_costs(self, candidate: Candidate) -> list[float]:
        """Seconds to make each step of ``candidate``: a trained step at its timed training steps scaled as this
        method's runs here were, an untrained one as long as its last run here."""
        return [seconds * self.factor.get(method.name, EVAL_SHARE) if seconds else
                self.untrained.get(method.name, UNTRAINED_RUN_S)
                for method, seconds in zip(candidate.methods, self.steps(candidate))]

    def missing(self, *wanted: tuple[list[Candidate], list[int]]) -> float:
        """Seconds to make the runs of each ``(candidates, seeds)`` of ``wanted`` that the directory does not hold
        complete yet, a run they share counted once (the reference and a candidate that starts as it does share
        their first steps, seed by seed)."""
        costs: dict[tuple[str, int], float] = {}
        for candidates, seeds in wanted:
            for candidate in candidates:
                per_step = self.step_costs(candidate)
                for step in plan_seeds(plan_runs([candidate.text]), seeds):
                    key = (step.planned.name, step.seed)
                    if key not in costs:
                        costs[key] = 0.0 if self.made(step) else per_step[len(step.planned.steps) - 1]
        return sum(costs.values())

    def made(self, step: Any) -> bool:
        """Whether the directory holds ``step`` (a seeded run of a plan) complete, as its training would make it."""
        key = (step.planned.name, step.seed)
        if key not in self.complete:
            run_dir = run_dir_of(self.out, step.planned.name, step.seed)
            parent, _, seed = (step.parent or "").rpartition("@")
            target = str(run_dir_of(self.out, parent, int(seed))) if step.parent else "teacher"
            config = run_config_of(replace(self.compare_config, stop_below=self.stop_below), step.planned, target,
                                run_dir, step.seed)
            if completed_run(run_dir, config, self.task.fingerprint) is not None:
                self.complete.add(key)
        return key in self.complete

    def finals_runs(self, state: State) -> list[tuple[list[Candidate], list[int]]]:
        """The finals' runs if ``state`` were kept: the other seeds of the finalists it would be among, and every
        seed of the reference."""
        kept = sorted([*self.kept, state], key=lambda s: (not self.met_bar(s), self.objective(s) or math.inf))
        finalists = [s.candidate for s in kept[:self.config.finalists]]
        against = next((s for s in self.states if s.candidate.text == self.config.against), None)
        return [(finalists, self.config.seeds[1:])] + ([([against.candidate], self.config.seeds)] if against else [])

    def train(self, state: State) -> None:
        """Train ``state``'s steps on the first seed (reusing finished ones), each stopped below the bar, and screen
        each step's selection retention."""
        start = time.perf_counter()
        seed = self.config.seeds[0]
        config = replace(self.compare_config, seeds=[seed], out=str(self.out), stop_below=self.stop_below)
        estimates = self.steps(state.candidate)
        parent: tuple[Path, RunRecord, bool] | None = None
        for step in plan_seeds(plan_runs([state.candidate.text]), [seed]):
            name = step.planned.name
            if name not in self.runs:
                before = time.perf_counter()
                out, fingerprint = self.out, self.task.fingerprint
                here = (run_dir_of(out, name, seed) / "metrics.json").is_file()   # a resumed search's own run
                run_dir, record, reused = run_step(
                    step, parent, lambda s, p, show_progress=self.show_progress: _run_or_reuse(
                        config, s, out, p, fingerprint, show_progress), self.config.executor, self.say)
                if not reused or not here:   # made now, or made by another search or comparison: on the budget
                    spent = time.perf_counter() - before if not reused else record.seconds
                    self._account(record, spent, step.planned.method.name, estimates[len(step.planned.steps) - 1],
                                  reused=reused)
                self.runs[name] = (run_dir, record)
            run_dir, record = self.runs[name]
            parent = (run_dir, record, True)
            screen = self.screen(run_dir, record)
            self._show(state, run_dir, screen)
            if stopped_by_bar(record) or screen.below(self.config.min_retention):
                state.record.fidelity = "partial" if stopped_by_bar(record) else "full"
                state.record.status = "below"
                said = [w for s in record.stages for w in s.get("warnings", []) if "cannot reach" in w]
                state.record.reason = f"{name} stopped: {said[-1]}" if said else \
                    f"{name} kept {screen.retention:.1%} of the teacher's selection {self.metric.title} " \
                    f"({screen.low:.1%} to {screen.high:.1%}), below {self.config.min_retention:.0%}"
                self.failed.append(state.candidate.prefix(len(step.planned.steps)))
                break
        else:
            state.record.fidelity, state.record.status = "full", "kept"
            state.record.reason = (f"selection retention {screen.retention:.1%} ({screen.low:.1%} to "
                                   f"{screen.high:.1%}) "
                                   f"cannot be told below {self.config.min_retention:.0%}")
            # Its objective stays its structure's, like every candidate's it is ordered against; the finals time
            # the trained models themselves.
            self.kept.append(state)
        state.record.seconds += time.perf_counter() - start
        self.say(f"    {state.record.status}: {state.record.reason}")

    def _show(self, state: State, run_dir: Path, screen: Screen) -> None:
        state.record.run_dir, state.record.dev_accuracy = str(run_dir), screen.score
        state.record.dev_retention, state.record.dev_interval = screen.retention, [screen.low, screen.high]

    def _account(self, record: RunRecord, spent: float, method: str, estimated: float, reused: bool = False) -> None:
        """A run trained here, or reused from another directory (charged at what it cost then): its time by what it
        went to, and what it teaches the estimates of its method's."""
        trained = sum(s.get("seconds", 0.0) for s in record.stages)
        if reused:
            self.clock.charge("training", trained)
            self.clock.charge("evaluation and timing", max(0.0, spent - trained))
        else:
            self.clock.seconds["training"] += trained
            self.clock.seconds["evaluation and timing"] += max(0.0, spent - trained)
        if estimated and not stopped_by_bar(record):
            self.factor[method] = spent / estimated
        elif not estimated:
            self.untrained[method] = spent

    def selection_predictions(self, run_dir: Path, record: RunRecord) -> Predictions:
        """The run's predictions on the selection sentences: kept by the run, or (a run made before runs kept them)
        made now."""
        kept = record.select_predictions if self.evidence == SELECT else record.dev_predictions
        if kept is not None:
            return load_predictions(run_dir, kept, self.evidence)
        with self.clock.on("evaluation and timing"):
            predictor = run_predictor(record, run_dir, self.probes.speed.threads, self.vocab)
            size = 1 if record.quantized else 128   # quantized models are scored a sentence at a time, as runs do
            return Predictions.of(*predict_batches(predictor, self.data.dataloader(self.evidence, batch_size=size)))

    def screen(self, run_dir: Path, record: RunRecord) -> Screen:
        """The run's score on the selection sentences and its retention of the teacher's, with the paired
        interval."""
        predictions = self.selection_predictions(run_dir, record)
        if not np.array_equal(predictions.labels, self.teacher_selection.labels):
            raise CompressError(f"the {self.evidence} predictions of {run_dir} are not of the teacher's sentences; run "
                                "it again.")
        runs = method_evidence(str(run_dir), [predictions], self.teacher_selection, self.metric)
        score, retention = method_intervals(runs, self.teacher_selection)
        return Screen(score["estimate"], retention["estimate"], retention["low"], retention["high"])

    def save(self) -> None:
        self.saved_at = time.perf_counter()
        self.record.spent_s, self.record.reused_s = self.clock.spent, round(self.clock.reused, 1)
        self.record.seconds = {k: round(v, 1) for k, v in self.clock.seconds.items()}
        write_record(self.record, self.out)

    # -- the finals -----------------------------------------------------------------------------

    def finals(self) -> None:
        """The kept candidates (the best ``finalists``) and the reference with every seed, compared in one process;
        the chosen one is the best by the finals' own measurement of those whose selection retention over every seed
        meets the bar, or, where none does, of those it cannot be told below (the report says which); the reference
        counts when it is a candidate of the space."""
        kept = self.finalists()
        if not kept:
            self.record.notes.append("No candidate's selection retention reached the bar within the budget: nothing "
                                     "was chosen.")
            return
        met = [s.candidate.text for s in kept if self.met_bar(s)]
        if len(met) < self.config.finalists:
            said = f"only {', '.join(met)} met" if met else "none met"
            reaching = [s.candidate.text for s in kept if not self.met_bar(s)]
            also = f"the finals take {', '.join(reaching)} because their intervals reach it" if reaching else \
                "no other candidate was kept to go with it"
            self.record.notes.append(
                f"Of the candidates trained within the budget, {said} {self.config.min_retention:.0%} of the "
                f"teacher's selection {self.metric.title} on the mean; {also}.")
            self.say(self.record.notes[-1])
        methods = [s.candidate.text for s in kept]
        if self.config.against and self.config.against not in methods:
            methods.append(self.config.against)
        self.say(f"finals: {', '.join(methods)} with seeds {', '.join(map(str, self.config.seeds))}")
        with self.clock.on("finals"):
            _, comparison = run_compare(replace(self.compare_config, methods=methods, out=str(self.out)), self.say)
        rows = {m.method: m for m in comparison.methods}
        in_space, kept_texts = {s.candidate.text for s in self.states}, {s.candidate.text for s in kept}
        finals = [self._final(rows[text], "kept" if text in kept_texts else "reference") for text in methods]
        bar = self.config.min_retention
        met = [f for f in finals if f.text in in_space and f.dev_retention >= bar]
        plausible = [f for f in finals if f.text in in_space and f.dev_retention_interval[1] >= bar]
        if met or plausible:
            chosen = min(met or plausible, key=self._final_objective)
            chosen.role = "chosen"
            self.record.chosen, self.record.chosen_run = chosen.text, chosen.run_dir
            if not met:
                self.record.notes.append(
                    f"No finalist kept {bar:.0%} of the teacher's selection {self.metric.title} over every seed; the "
                    f"chosen one "
                    f"kept "
                    f"{chosen.dev_retention:.1%} ({chosen.dev_retention_interval[0]:.1%} to "
                    f"{chosen.dev_retention_interval[1]:.1%}): below the bar, within its interval.")
        else:
            self.record.notes.append("With every seed, no finalist's selection retention could still reach the bar: "
                                     "nothing was chosen.")
        self.record.finals = finals
        for difference in comparison.differences:
            if {difference.a, difference.b} <= set(methods):
                interval = difference.accuracy
                self.record.differences[f"{difference.a} - {difference.b}"] = [interval["estimate"], interval["low"],
                                                                               interval["high"]]
        if self.record.chosen and self.config.against and self.config.against != self.record.chosen:
            slow, fast = rows[self.config.against], rows[self.record.chosen]
            speedup, passes = pass_speedup(slow.latency_passes_ms, fast.latency_passes_ms)
            self.record.differences[f"speed-up of {self.record.chosen} over {self.config.against}, passes"] = [
                speedup, min(passes), max(passes)]
            if self.config.minimize == "throughput":   # what it was chosen for: each pass's large batches
                ratios = [s / f for s, f in zip(slow.batch_passes_ms, fast.batch_passes_ms, strict=True)]
                self.record.differences[f"throughput of {self.record.chosen} over {self.config.against}, "
                                        "passes"] = [float(np.median(ratios)), min(ratios), max(ratios)]
        for state in self.states:
            if state.candidate.text in methods:
                state.record.fidelity = "final"
                state.record.status = "chosen" if state.candidate.text == self.record.chosen else state.record.status

    def _final_objective(self, final: Final) -> float:
        return {"latency": -final.speedup, "throughput": -final.throughput_speedup,
                "size": float(final.size_bytes)}[self.config.minimize]

    def _final(self, row: Any, role: str) -> Final:
        """One finalist's row: its test numbers from the comparison, its selection retention over every seed."""
        runs = [(Path(seed.run_dir), read_run_record(Path(seed.run_dir))) for seed in row.per_seed]
        rows = method_evidence(row.method, [self.selection_predictions(run_dir, record) for run_dir, record in runs],
                               self.teacher_selection, self.metric)
        _, dev = method_intervals(rows, self.teacher_selection)
        return Final(text=row.method, role=role, accuracy=row.accuracy, accuracy_interval=_pair(row.accuracy_interval),
                     retention=row.retention, retention_interval=_pair(row.retention_interval), speedup=row.speedup,
                     speedup_iqr=list(row.speedup_iqr or [row.speedup, row.speedup]),
                     speedup_passes=list(row.speedup_passes),
                     throughput_speedup=row.throughput_speedup, size_bytes=row.size_bytes, params=row.params,
                     latency_ms=row.latency_ms_p50, run_dir=row.run_dir, dev_retention=dev["estimate"],
                     dev_retention_interval=[dev["low"], dev["high"]])


def _pair(interval: Any) -> list[float]:
    return [interval["low"], interval["high"]] if interval else []

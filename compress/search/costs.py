"""What a candidate's runs cost, and the reserve a search keeps for its finals.

Before anything trains, a candidate's training is estimated from training steps timed here (:mod:`.probe`): every
epoch of every stage of each step at the step time measured for its shapes (:func:`step_estimates`). As the search
trains, :class:`RunCosts` corrects those estimates by its own runs, method by method (a run's seconds over its
estimated training steps, and the seconds of a run that trains nothing), and counts what the runs still missing will
take: a candidate is started only when the budget left holds its own training and the finals it would be part of
(the reserve), a run they share (the same first steps, seed by seed) counted once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compress.models.config import EncoderConfig
from compress.registry import Context, StudentMethod
from compress.runs.compare import completed_run, run_dir_of, stopped_by_bar
from compress.runs.compare_plan import CompareConfig, plan_runs, plan_seeds, run_config_of
from compress.search.clock import Clock
from compress.search.probe import Probes, training_recipe, training_stage
from compress.search.space import Candidate

if TYPE_CHECKING:
    from compress.reports.records import RunRecord

# A run's seconds over its training steps' (a dev pass every epoch, the test pass, timing, saving) until a run of
# the same method has been measured here; and the seconds of a run that trains nothing (quantization's builds,
# timings and one-sentence-at-a-time scoring: 31 s a run in the default comparison on the AVX-512 EPYC).
EVAL_SHARE = 1.15
UNTRAINED_RUN_S = 30.0

# The examples an epoch of a method's stages learns from under the search's recipe, by method name (its own point on
# the recipe's curve: compress.distill.schedule.epoch_examples).
Examples = Callable[[str], int]


# --- estimates before anything trains ------------------------------------------------------------


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
                   examples: Examples) -> list[float]:
    """Per step of ``candidate``: the seconds of its training steps (every epoch of every stage, of ``examples(method
    name)`` each, at the step time measured here for its shapes), 0 for a step that trains nothing."""
    found = []
    for method, options, given, made in trained_steps(candidate, teacher):
        recipe = training_recipe(method, options, given)
        if recipe is None:
            found.append(0.0)
            continue
        seconds = probes.step_seconds(made, given, method, options, precision, batch_size)
        steps_per_epoch = math.ceil(examples(method.name) / batch_size)
        found.append(sum(stage.epochs for stage in recipe.stages) * steps_per_epoch * seconds)
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
                   examples: Examples) -> tuple[float, str] | None:
    """The estimated seconds and the text of the cheapest first step that trains, over every candidate (what one
    full training costs at least); None when nothing trains."""
    firsts = {str(c.pipeline.steps[0]): c.prefix(1) for c in found}
    costs = [(step_estimates(first, teacher, probes, precision, batch_size, examples)[0] * EVAL_SHARE, first.text)
             for first in firsts.values()]
    costs = [cost for cost in costs if cost[0] > 0]
    return min(costs) if costs else None


# --- the search's own runs, and the reserve -------------------------------------------------------


class RunCosts:
    """What the runs of a search still missing from its directory will take, learned from the runs it made."""

    def __init__(self, out: Path, compare_config: CompareConfig, fingerprint: str, teacher: EncoderConfig,
                 probes: Probes, clock: Clock, precision: str, batch_size: int, examples: Examples) -> None:
        self.out, self.compare_config, self.fingerprint = out, compare_config, fingerprint
        self.teacher, self.probes, self.clock = teacher, probes, clock
        self.precision, self.batch_size, self.examples = precision, batch_size, examples
        # By method, from its runs trained here: a run's seconds over its estimated training steps, and the seconds
        # of a run that trains nothing.
        self.factor: dict[str, float] = {}
        self.untrained: dict[str, float] = {}
        self.complete: set[tuple[str, int]] = set()   # (run, seed) found complete in the directory

    def steps(self, candidate: Candidate) -> list[float]:
        """:func:`step_estimates` of ``candidate``, on the clock's step timing (and the probes it reused)."""
        with self.clock.on("step timing"):
            estimates = step_estimates(candidate, self.teacher, self.probes, self.precision, self.batch_size,
                                       self.examples)
        self.clock.charge_all(self.probes.take_charged())
        return estimates

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
        """Whether the directory holds ``step`` (a seeded run of a plan) complete, as its training would make it
        (``compare_config`` holds the bar's ``stop_below`` once the walk knows it)."""
        key = (step.planned.name, step.seed)
        if key not in self.complete:
            run_dir = run_dir_of(self.out, step.planned.name, step.seed)
            parent, _, seed = (step.parent or "").rpartition("@")
            target = str(run_dir_of(self.out, parent, int(seed))) if step.parent else "teacher"
            config = run_config_of(self.compare_config, step.planned, target, run_dir, step.seed)
            if completed_run(run_dir, config, self.fingerprint) is not None:
                self.complete.add(key)
        return key in self.complete

    def account(self, record: RunRecord, spent: float, method: str, estimated: float, reused: bool = False) -> None:
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


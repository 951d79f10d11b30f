"""`compress run METHOD[+TRANSFORM...]`: a method or a pipeline of methods, each step checked before
the first one does any work, each writing its own run directory that records its parent.

A student method's step is a distillation run (:mod:`compress.runs.distillation`); a transform's
step applies the method's verb through the run writer (:func:`compress.runs.writer.transform_run`). Each finished
step is kept in the run store (:mod:`compress.runs.store`), so a comparison or search that asks for the same run, in
any directory, reuses it instead of training it again.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from compress.distributed import launched
from compress.errors import CompressError
from compress.registry import Method, StudentMethod, Transform
from compress.registry.pipeline import Step, resolve
from compress.reports.records import RunRecord, read_run_record
from compress.runs.config import RunConfig, RunResult, check_out, check_task, claimed
from compress.runs.distillation import check_student, distillation_run
from compress.runs.store import keep, run_key
from compress.runs.writer import check_transform, transform_run
from compress.teachers.registry import teacher_config


@dataclass
class PlannedStep:
    """One step of a pipeline, checked: its method, its options, and the config it runs with."""

    method: Method
    options: Any
    config: RunConfig


def plan(config: RunConfig) -> list[PlannedStep]:
    """The steps ``config`` asks for (its method or pipeline, then ``then``), with every option placed on
    the step that takes it; bad steps, orders and options fail here, in one sentence, before any work."""
    steps = []
    for i, step in enumerate(resolve(config.method, config.then, config.options, config.target)):
        if i == 0:
            run = replace(config, method=step.method.name, options=step.values, then=[])
        else:  # what the first step trains with is not a later step's; its input is the step before
            run = replace(config, method=step.method.name, options=step.values, then=[], epochs=None, lr=None,
                          layer_map=None, patience=None, target="teacher", out=None)
        steps.append(PlannedStep(step.method, step.options, run))
    return steps


def check_student_inputs(chain: list[tuple[Method, Any]], teacher: str) -> None:
    """Check a transform that follows a student against the student's shape, which is known before it trains
    (``distilbert+prune[drop_layers=3]`` fails here, not after distillation); ``chain``: (method, options)."""
    for (before, before_options), (method, options) in zip(chain, chain[1:]):
        if isinstance(before, StudentMethod) and isinstance(method, Transform) and method.check_input:
            try:
                shape = before.student_config(teacher_config(teacher), before_options)
            except ValueError:
                continue  # a shape the student cannot have is reported by the student's own step
            method.check_input(options, shape)


def check_steps(steps: list[PlannedStep], config: RunConfig) -> None:
    """The check phase of a run or pipeline: every step's options and shapes, the order of the steps, the data
    and the --out directory, each refused in one sentence before anything is fetched, trained or written."""
    for step in steps:
        if isinstance(step.method, Transform):
            check_transform(step.config, step.method, step.options)  # fail before training, not after
        else:
            check_student(step.config, step.method)
    check_student_inputs([(step.method, step.options) for step in steps], config.teacher)
    check_task(config)
    if config.out:
        check_out(Path(config.out), config.overwrite)


def run(config: RunConfig, show_progress: bool = True) -> RunResult:
    """Carry out one run, or every step of a pipeline: each step writes its own run directory (the
    later ones named after the one before, plus their method: OUT, OUT-int8) recording its parent.
    Every step is checked before the first one does any work."""
    steps = plan(config)
    pipeline = "+".join(str(Step(s.method.name, s.config.options)) for s in steps) if len(steps) > 1 else None
    if launched() and (len(steps) > 1 or steps[0].method.kind != "student"):
        raise CompressError("data-parallel runs train one student method (albert, distilbert, tinybert); run "
                            "transforms and later pipeline steps in one process, with --target RUN_DIR.")
    check_steps(steps, config)
    with ExitStack() as stack:
        if config.out:  # every step's directory is claimed before the first step trains
            name = config.out
            for step in steps[1:]:
                name = f"{name}-{step.method.name}"
                stack.enter_context(claimed(Path(name), config.overwrite))
        first = steps[0]
        if first.method.kind == "student":
            result = distillation_run(first.config, show_progress, pipeline=pipeline)
        else:
            result = transform_run(first.config, first.method, first.options, show_progress, pipeline)
        _keep(result, first.config, None if config.target == "teacher" else read_run_record(config.target))
        previous = result
        for step in steps[1:]:
            step_config = replace(step.config, target=str(previous.directory),
                                  out=f"{previous.directory}-{step.method.name}")
            previous.chained = transform_run(step_config, step.method, step.options, show_progress, pipeline)
            _keep(previous.chained, step_config, previous.record)
            previous = previous.chained
    return result


def _keep(step: RunResult, config: RunConfig, parent: RunRecord | None) -> None:
    """Keep a finished step, made with ``config`` from ``parent``'s model (None: the teacher's), in the run store.
    Not kept: a data-parallel run (its processes split each batch, so it is another run than one process's: only
    rank 0 has its record), and a step whose parent was made before runs kept their predictions (the key names the
    parent by them)."""
    if step.record is None or launched() or (parent is not None and parent.predictions is None):
        return
    keep(run_key(config, parent, step.record.dataset.fingerprint), step.directory)

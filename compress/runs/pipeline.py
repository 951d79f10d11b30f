"""`compress run METHOD[+TRANSFORM...]`: a method or a pipeline of methods, each step checked before
the first one does any work, each writing its own run directory that records its parent.

A student method's step is a distillation run (:mod:`compress.runs.distillation`); a transform's
step applies the method's verb through the run writer (:func:`compress.runs.writer.transform_run`).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from compress.distributed import launched
from compress.errors import CompressError
from compress.registry import Method, StudentMethod, Transform, all_methods, families, flag_for, option_fields
from compress.registry.pipeline import Step, check, parse
from compress.runs.config import RunConfig, RunResult, check_out, check_task, claimed
from compress.runs.distillation import check_student, distillation_run
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
    pipeline = parse(config.method)
    for more in config.then:
        pipeline += parse(more)
    methods = check(pipeline)
    given = [dict(step.options) for step in pipeline.steps]
    _place(config.options, methods, given)
    if methods[0].kind == "student" and config.target != "teacher":
        raise _for_transforms([], methods)
    steps = []
    for i, (method, values) in enumerate(zip(methods, given)):
        values = method.option_values(values)
        if i == 0:
            step = replace(config, method=method.name, options=values, then=[])
        else:  # what the first step trains with is not a later step's; its input is the step before
            step = replace(config, method=method.name, options=values, then=[], epochs=None, lr=None,
                           layer_map=None, patience=None, target="teacher", out=None)
        steps.append(PlannedStep(method, method.options(**values), step))
    return steps


def _place(options: dict[str, Any], methods: list[Method], given: list[dict[str, Any]]) -> None:
    """Give each option (a flag or --set) to the one step whose method takes it."""
    unplaced = []
    for key, value in options.items():
        takers = [i for i, m in enumerate(methods) if key in option_fields(m.options)]
        if not takers:
            unplaced.append(key)
        elif len(takers) > 1:
            names = " and ".join(methods[i].name for i in takers)
            raise CompressError(f"{flag_for(key)} applies to {names}; give it inside the pipeline instead, "
                                f"as {methods[takers[0]].name}[{key}=...].")
        elif key in given[takers[0]]:
            raise CompressError(f"{flag_for(key)} is given twice to {methods[takers[0]].name}: as a flag and "
                                "inside the pipeline.")
        else:
            given[takers[0]][key] = value
    if not unplaced:
        return
    takers = [m for m in all_methods() if any(k in option_fields(m.options) for k in unplaced)]
    steps = "+".join(m.name for m in methods)
    if takers and all(m.kind == "transform" for m in takers) and all(m.kind == "student" for m in methods):
        raise _for_transforms(unplaced, methods)
    if takers and all(m.kind == "student" for m in takers) and all(m.kind == "transform" for m in methods):
        raise CompressError(f"{steps} trains nothing: student options ({', '.join(map(flag_for, unplaced))}), "
                            "--epochs, --lr, --layer-map and --patience do not apply.")
    known = sorted({f for m in methods for f in option_fields(m.options)})
    raise CompressError(f"{', '.join(map(flag_for, unplaced))} do(es) not apply to {steps}; "
                        f"it takes {', '.join(known) or 'no options'}.")


def _for_transforms(keys: list[str], methods: list[Method]) -> CompressError:
    """The error for --target or a transform's options given to a pipeline of students only."""
    transforms = [m for m in all_methods("transform") if not keys or set(keys) & set(option_fields(m.options))]
    flags = ["--target", *map(flag_for, keys)]
    return CompressError(f"{' and '.join(flags)} {'is' if len(flags) == 1 else 'are'} for {families(transforms)} "
                         f"({', '.join(m.name for m in transforms)}); {methods[0].name} trains a student (add "
                         f"--then {transforms[0].name} to apply one to it afterwards).")


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
        previous = result
        for step in steps[1:]:
            step_config = replace(step.config, target=str(previous.directory),
                                  out=f"{previous.directory}-{step.method.name}")
            previous.chained = transform_run(step_config, step.method, step.options, show_progress, pipeline)
            previous = previous.chained
    return result

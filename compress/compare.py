"""`compress compare`: every method on one teacher and task, then one comparison measured in one process.

Layout of a comparison directory (default ``runs/compare-TEACHER-DATASET``)::

    runs/METHOD/          one ordinary run directory per method (see compress.runner)
    comparison.json       the numbers (schema in compress.reports.comparison)
    comparison.md/.html   the table, the plots and what each method changed
    *.png                 the plots

A method whose run directory already holds a complete run made with the same configuration is
reused, so an interrupted comparison resumes where it stopped and a repeated one trains nothing.
Speed is always measured afresh at the end: the teacher and every method one after another in this
process, on the same inputs and threads, in two passes (the second in reverse order, each model
keeping its faster pass at each batch size), so the speed-ups compare like with like.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compress.bench.inputs import speed_seq_len
from compress.bench.machine import manifest
from compress.bench.speed import SpeedConfig, measure_all
from compress.bench.timing import default_threads
from compress.data.load import load_task
from compress.errors import CompressError
from compress.methods.registry import all_methods, get_method, names
from compress.models.accounting import flops_per_sequence
from compress.models.checkpoints import load_encoder
from compress.models.config import EncoderConfig
from compress.paths import locked
from compress.quantize.artefacts import load_artefact
from compress.quantize.predictors import Predictor, TorchPredictor
from compress.reports.comparison import SCHEMA_VERSION, write_comparison
from compress.reports.run_record import explanation, read_metrics
from compress.run_config import RunConfig
from compress.runner import run
from compress.teachers.finetune import FinetuneConfig, finetune_teacher, tokenized_for
from compress.teachers.registry import DEFAULT_TEACHER, teacher_config

def default_methods() -> list[str]:
    """Every method that runs by default on this machine (each method says; fp16 only where the CPU
    computes in fp16)."""
    return [m.name for m in all_methods() if m.in_compare()]


@dataclass
class CompareConfig:
    teacher: str = DEFAULT_TEACHER
    dataset: str = "mr"
    methods: list[str] = field(default_factory=default_methods)
    out: str | None = None
    epochs: int | None = None           # every student's stages (default: each method's recipe)
    batch_size: int = 32
    seed: int = 13
    device: str = "auto"
    threads: int | None = None
    seq_len: int | None = None          # speed is measured at this length (default: 95th percentile of test)
    repeats: int = 30
    teacher_finetune: FinetuneConfig = field(default_factory=FinetuneConfig)


def _run_config(config: CompareConfig, method: str, directory: Path) -> RunConfig:
    return RunConfig(method=method, teacher=config.teacher, dataset=config.dataset,
                     epochs=config.epochs if get_method(method).kind == "student" else None, batch_size=config.batch_size,
                     seed=config.seed, device=config.device, threads=config.threads,
                     teacher_finetune=config.teacher_finetune, out=str(directory), overwrite=True)


# Settings that change where a run is written or how it is timed, not what it trains.
NOT_RESULT = ("out", "overwrite", "threads")


def _config_key(run: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in run.items() if k not in NOT_RESULT}, sort_keys=True, default=str)


def completed_run(directory: Path, config: RunConfig, split_fingerprint: str) -> dict[str, Any] | None:
    """The metrics of a complete run in ``directory`` made with ``config`` on the same data split, or None."""
    try:
        recorded = json.loads((directory / "config.json").read_text())["run"]
        metrics = read_metrics(directory)
    except (OSError, ValueError, KeyError, CompressError):
        return None
    same = _config_key(recorded) == _config_key(json.loads(json.dumps(asdict(config), default=str)))
    return metrics if same and metrics["dataset"]["fingerprint"] == split_fingerprint else None


def _predictor(metrics: dict[str, Any], run_dir: Path, threads: int) -> Predictor:
    if metrics["kind"] == "quantization":
        return load_artefact(run_dir / "model", threads)
    return TorchPredictor(load_encoder(run_dir / "student").model)


def compare(config: CompareConfig, progress: Callable[[str], None] | None = None) -> tuple[Path, dict[str, Any]]:
    """Run (or reuse) every method, measure them all, write the comparison; return its directory and data."""
    say = progress or (lambda message: None)
    known = names()
    unknown = [m for m in config.methods if m not in known]
    if unknown or not config.methods:
        raise CompressError(f"unknown method(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}.")
    threads = default_threads() if config.threads is None else config.threads
    speed_config = SpeedConfig(threads=threads, repeats=config.repeats)  # bad values fail here, before training
    positions = teacher_config(config.teacher).max_positions
    if config.seq_len is not None and not 2 <= config.seq_len <= positions:
        raise CompressError(f"--seq-len must be between 2 and the teacher's {positions} positions.")
    task = load_task(config.dataset)
    out = Path(config.out or f"runs/compare-{Path(config.teacher).name}-{Path(task.name).stem}")
    if out.exists() and not out.is_dir():
        raise CompressError(f"--out {out} is a file, not a directory; choose another --out.")
    # One comparison at a time per directory: a second process fails at once instead of racing this one.
    with locked(out, wait=False, what=f"the comparison in {out}"):
        return _compare(config, task, out, threads, speed_config, say)


def _compare(config: CompareConfig, task, out: Path, threads: int, speed_config: SpeedConfig,
             say: Callable[[str], None]) -> tuple[Path, dict[str, Any]]:
    finetuned = finetune_teacher(config.teacher, task, config.teacher_finetune, device=config.device)
    data = tokenized_for(finetuned, task)

    runs: dict[str, tuple[Path, dict[str, Any]]] = {}
    reused = []
    for method in config.methods:
        run_dir = out / "runs" / method
        run_config = _run_config(config, method, run_dir)
        metrics = completed_run(run_dir, run_config, task.fingerprint)
        if metrics is None:
            say(f"running {method}")
            metrics = run(run_config).metrics
        else:
            reused.append(method)
            say(f"reusing {run_dir}")
        runs[method] = (run_dir, metrics)

    seq_len = config.seq_len or speed_seq_len(data)
    say(f"measuring speed: teacher and {len(runs)} methods, {threads} threads, {seq_len} tokens")
    teacher = finetuned.load().model
    predictors = {"teacher": TorchPredictor(teacher)}
    predictors |= {method: _predictor(metrics, run_dir, threads) for method, (run_dir, metrics) in runs.items()}
    speeds = measure_all(predictors, data, seq_len, speed_config)
    teacher_metrics, teacher_speed = next(iter(runs.values()))[1]["teacher"], speeds["teacher"]
    methods = []
    for method, (run_dir, metrics) in runs.items():
        speed, student = speeds[method], metrics["student"]
        methods.append({
            "method": method, "label": get_method(method).label, "run_dir": str(run_dir), "kind": metrics["kind"],
            "backend": student.get("backend", "torch"), "dtype": student.get("dtype", "fp32"),
            **{k: student[k] for k in ("params", "params_by_component", "size_bytes", "accuracy", "macro_f1")},
            "flops": flops_per_sequence(EncoderConfig.from_dict(student["config"]), seq_len),
            "retention": metrics["retention"], "latency_ms_p50": speed["latency_ms_p50"],
            "latency_ms_p90": speed["latency_ms_p90"], "throughput": speed["throughput"],
            "peak_memory_bytes": speed["peak_memory_bytes"],
            "speedup": teacher_speed["latency_ms_p50"] / speed["latency_ms_p50"],
            "throughput_speedup": speed["throughput"] / teacher_speed["throughput"],
            "explanation": explanation(method, metrics["ratios"]),
        })
    comparison = {
        "schema_version": SCHEMA_VERSION, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seq_len": seq_len, "threads": threads, "speed": asdict(speed_config) | {"passes": speeds["teacher"]["passes"]},
        "dataset": {"name": task.name, "fingerprint": task.fingerprint,
                    "sizes": {name: len(split) for name, split in task.splits.items()}},
        "manifest": manifest(threads=threads, seed=config.seed, split_fingerprint=task.fingerprint),
        "teacher": {"name": config.teacher, **{k: teacher_metrics[k] for k in
                    ("params", "params_by_component", "size_bytes", "accuracy", "macro_f1")},
                    "flops": flops_per_sequence(teacher.config, seq_len),
                    **{k: teacher_speed[k] for k in ("latency_ms_p50", "latency_ms_p90", "throughput",
                                                       "peak_memory_bytes")}},
        "methods": methods, "reused": reused,
    }
    write_comparison(comparison, out)
    return out, comparison

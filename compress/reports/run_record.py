"""The record of one run: ``metrics.json`` (schema below), ``manifest.json`` and ``report.md``.

metrics.json, schema version 2::

    schema_version, method, kind ("distillation" or "quantization"), seconds, seq_len
    dataset   {name, fingerprint, sizes {train, dev, test}, label_names}
    teacher   {params, classifier_params, params_by_component, flops, size_bytes, accuracy, macro_f1, dev_accuracy}
    student   {params, classifier_params, params_by_component, flops, size_bytes, accuracy, macro_f1, layout, config}
              (quantization runs add backend and dtype)
    retention student accuracy / teacher accuracy
    ratios    teacher / student for params, flops, size_bytes
    stages    per training stage: best epoch, best dev metrics, seconds ([] for quantization)
    speed     {teacher?, student, source?}: each a compress.bench.speed measurement (latency_ms_p50,
              latency_ms_p90 at batch 1, throughput at batch 32, peak_memory_bytes, seq_len, threads)
    source, quantization   (quantization runs) what was quantized, backend, CPU features, measurements
    chain     every step of the pipeline that made this model, first to last, this run included:
              [{step, run_dir, params, size_bytes, flops, accuracy, macro_f1, latency_ms_p50, throughput}]
              (each step's own measurements; a run made by one method has one step)

``params`` counts embeddings + encoder + pooler (as transformers' BertModel does); ``size_bytes``
is measured from the weight files written; ``flops`` are per sequence of ``seq_len`` tokens.

manifest.json: package versions, CPU model and features, threads, seed, git commit, split fingerprint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compress.bench.machine import manifest
from compress.data.task import TaskData
from compress.training import Metrics
from compress.errors import CompressError
from compress.methods.registry import get_method
from compress.models.accounting import COMPONENTS, count_parameters, flops_per_sequence
from compress.models.encoder import Encoder
from compress.paths import atomic_write_text

SCHEMA_VERSION = 2
REQUIRED = ("schema_version", "method", "kind", "dataset", "teacher", "student", "retention", "ratios",
            "stages", "speed")

def weights_bytes(directory: Path) -> int:
    """Bytes of the weight files in a model directory."""
    return sum(p.stat().st_size for p in Path(directory).glob("*.safetensors"))


def model_entry(model: Encoder, test: Metrics, seq_len: int, size: int) -> dict[str, Any]:
    count = count_parameters(model)
    return {
        "params": count.backbone, "classifier_params": count.classifier,
        "params_by_component": count.by_component, "flops": flops_per_sequence(model.config, seq_len),
        "size_bytes": size, "accuracy": test.accuracy, "macro_f1": test.macro_f1,
    }


def teacher_entry(teacher: Encoder, record: dict[str, Any], seq_len: int, directory: Path) -> dict[str, Any]:
    """The fine-tuned teacher's entry, from the record its fine-tuning wrote (test and dev scores)."""
    entry = model_entry(teacher, Metrics(**record["test"]), seq_len, weights_bytes(directory))
    entry["dev_accuracy"] = (record.get("dev") or {}).get("accuracy")
    return entry


def explanation(method: str, ratios: dict[str, float]) -> str:
    """Why ``method`` saves what it saves, with a run's own ratios (teacher / student)."""
    return get_method(method).sentence(ratios)


def run_metrics(*, method: str, teacher: Encoder, student: Encoder, student_test: Metrics,
                seq_len: int, teacher_record: dict[str, Any], teacher_dir: Path, student_dir: Path, layout: str,
                stages: list[dict[str, Any]], task: TaskData, seconds: float,
                speed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The metrics.json of a run (see the module docstring for the schema)."""
    t = teacher_entry(teacher, teacher_record, seq_len, teacher_dir)
    s = model_entry(student, student_test, seq_len, weights_bytes(student_dir))
    s |= {"layout": layout, "config": student.config.to_dict()}
    return {
        "schema_version": SCHEMA_VERSION, "method": method, "kind": "distillation", "seconds": round(seconds, 1),
        "seq_len": seq_len,
        "dataset": {"name": task.name, "fingerprint": task.fingerprint, "label_names": task.label_names,
                    "sizes": {name: len(split) for name, split in task.splits.items()}},
        "teacher": t, "student": s,
        "retention": s["accuracy"] / t["accuracy"] if t["accuracy"] else 0.0,
        "ratios": {k: t[k] / s[k] for k in ("params", "flops", "size_bytes")},
        "stages": stages, "speed": speed,
    }


CHAIN_FIELDS = ("params", "size_bytes", "flops", "accuracy", "macro_f1")


def chain_step(step: str, run_dir: Path | str, model: dict[str, Any], speed: dict[str, Any]) -> dict[str, Any]:
    """One step of ``chain``: the step as written in a pipeline, its run directory, the model it made
    (its metrics entry) and that model's speed, as the step's own run measured them."""
    return {"step": step, "run_dir": str(run_dir), **{k: model[k] for k in CHAIN_FIELDS},
            "latency_ms_p50": speed["latency_ms_p50"], "throughput": speed["throughput"]}


def chain_of(metrics: dict[str, Any], run_dir: Path | str) -> list[dict[str, Any]]:
    """The steps that made the model of the run ``metrics`` describes (runs written before chains were
    recorded: the run alone)."""
    if "chain" in metrics:
        return metrics["chain"]
    return [chain_step(metrics["method"], run_dir, metrics["student"], metrics["speed"]["student"])]


def read_metrics(run_dir: Path) -> dict[str, Any]:
    """A run's metrics.json, checked against this schema version; one-sentence error otherwise."""
    try:
        metrics = json.loads((Path(run_dir) / "metrics.json").read_text())
    except (OSError, ValueError):
        raise CompressError(f"{run_dir} has no readable metrics.json; is it a complete run directory?") from None
    if metrics.get("schema_version") != SCHEMA_VERSION:
        raise CompressError(f"{run_dir}/metrics.json has schema version {metrics.get('schema_version')}, "
                            f"this compress reads {SCHEMA_VERSION}; run it again.")
    missing = [k for k in REQUIRED if k not in metrics]
    if missing:
        raise CompressError(f"{run_dir}/metrics.json lacks {', '.join(missing)}.")
    return metrics


def write_run_record(directory: Path, metrics: dict[str, Any], config: dict[str, Any], *, seed: int) -> None:
    """config.json, metrics.json, manifest.json and report.md of a run directory."""
    threads = metrics["speed"]["student"]["threads"]
    (directory / "config.json").write_text(json.dumps(config, indent=2, default=str))
    (directory / "metrics.json").write_text(json.dumps(metrics, indent=2))
    record = manifest(threads=threads, seed=seed, split_fingerprint=metrics["dataset"]["fingerprint"])
    (directory / "manifest.json").write_text(json.dumps(record, indent=2))
    write_report(directory / "report.md", metrics, config)


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def write_report(path: Path, metrics: dict[str, Any], config: dict[str, Any]) -> None:
    """report.md: the side-by-side table, the stages, the recipe, and why the method saves what it saves."""
    t, s = metrics["teacher"], metrics["student"]
    teacher_name = config.get("teacher") or config["run"]["teacher"]
    lines = [
        f"# {metrics['method']}: {teacher_name} -> student on {metrics['dataset']['name']}",
        "",
        f"Test split: {metrics['dataset']['sizes']['test']} examples (split fingerprint "
        f"`{metrics['dataset']['fingerprint']}`); FLOPs per sequence of {metrics['seq_len']} tokens.",
        "",
        "| | teacher | student | teacher / student |",
        "|---|---:|---:|---:|",
        _row("parameters (embeddings + encoder + pooler)", f"{t['params']:,}", f"{s['params']:,}",
             f"{metrics['ratios']['params']:.2f}x"),
        _row("size on disk (MB)", f"{t['size_bytes'] / 1e6:.1f}", f"{s['size_bytes'] / 1e6:.1f}",
             f"{metrics['ratios']['size_bytes']:.2f}x"),
        _row("FLOPs per sequence", f"{t['flops']:,}", f"{s['flops']:,}", f"{metrics['ratios']['flops']:.2f}x"),
        _row("test accuracy", f"{t['accuracy']:.4f}", f"{s['accuracy']:.4f}", ""),
        _row("test macro-F1", f"{t['macro_f1']:.4f}", f"{s['macro_f1']:.4f}", ""),
        *_speed_rows(metrics["speed"]),
        "",
        f"**Retention** (student accuracy / teacher accuracy): **{metrics['retention']:.1%}**.",
        "",
        "## Parameters by component",
        "",
        "| component | teacher | student |",
        "|---|---:|---:|",
        *(_row(label, f"{t['params_by_component'][k]:,}", f"{s['params_by_component'][k]:,}")
          for k, label in COMPONENTS.items()),
        "",
    ]
    lines += _quantization_lines(metrics) if "quantization" in metrics else _training_lines(metrics, config)
    lines += _chain_lines(metrics)
    lines += ["", "## Why it saves what it saves", ""]
    lines.append(explanation(metrics["method"], metrics["ratios"]))
    atomic_write_text(path, "\n".join(lines) + "\n")


def _speed_rows(speed: dict[str, Any]) -> list[str]:
    """Latency and throughput rows, when the teacher was timed in the same process as the student."""
    t, s = speed.get("teacher"), speed["student"]
    if t is None:
        return []
    where = f"{s['seq_len']} tokens, {s['threads']} threads"
    return [
        _row(f"latency at batch 1, p50 (ms; {where})", f"{t['latency_ms_p50']:.2f}", f"{s['latency_ms_p50']:.2f}",
             f"{t['latency_ms_p50'] / s['latency_ms_p50']:.2f}x faster"),
        _row(f"throughput at batch {s['config']['batch_size']} (examples/s)", f"{t['throughput']:.0f}",
             f"{s['throughput']:.0f}",
             f"{s['throughput'] / t['throughput']:.2f}x more"),
    ]


def _chain_lines(metrics: dict[str, Any]) -> list[str]:
    """What each step of the pipeline bought, when this run is a later step of one."""
    chain = metrics.get("chain") or []
    if len(chain) < 2:
        return []
    t = metrics["teacher"]
    lines = ["", "## Pipeline: what each step bought", "",
             "Each step's numbers as its own run measured them (latency at batch 1).", "",
             "| step | parameters | size (MB) | test accuracy | latency p50 (ms) | run |",
             "|---|---:|---:|---:|---:|---|",
             _row("teacher", f"{t['params']:,}", f"{t['size_bytes'] / 1e6:.1f}", f"{t['accuracy']:.4f}", "", "")]
    for step in chain:
        lines.append(_row(f"`{step['step']}`", f"{step['params']:,}", f"{step['size_bytes'] / 1e6:.1f}",
                          f"{step['accuracy']:.4f}", f"{step['latency_ms_p50']:.2f}", f"`{step['run_dir']}`"))
    return lines


def _training_lines(metrics: dict[str, Any], config: dict[str, Any]) -> list[str]:
    lines = ["## Training", ""]
    for stage, spec in zip(metrics["stages"], config["recipe"]["stages"]):
        terms = " + ".join(f"{term['weight']:g} * {term['loss']}" + (f"({term['options']})" if term["options"] else "")
                           for term in spec["terms"])
        lines.append(f"- **{stage['stage']}**: loss = {terms}; {spec['epochs']} epoch(s) at lr {spec['lr']:g}, "
                     f"best epoch {stage['best_epoch']} ({stage['seconds']:.0f} s).")
    lines += ["", f"Student saved in `student/` ({metrics['student']['layout']} layout)."]
    return lines


def batched_change(quantization: dict[str, Any]) -> str:
    """`` (+x.xx in padded batches of N)``: the accuracy change against fp32 when scored in batches
    (empty for records made before it was measured)."""
    q = quantization
    if "batched_accuracy" not in q:
        return ""
    return f" ({100 * (q['batched_accuracy'] - q['fp32_accuracy']):+.2f} in padded batches of {q['batched_size']})"


def _quantization_lines(metrics: dict[str, Any]) -> list[str]:
    q, source = metrics["quantization"], metrics["source"]
    found = [name for name, present in q["cpu"]["features"].items() if present]
    lines = [
        "## Quantization",
        "",
        f"Quantized: the {'fine-tuned teacher' if source['kind'] == 'teacher' else 'student of ' + str(source['parent'])}"
        f" (fp32 test accuracy {q['fp32_accuracy']:.4f}). Backend **{q['backend']}**, {q['dtype']} "
        f"({q['chosen_by']}); test accuracy, one sentence at a time, changes by "
        f"{-q['accuracy_drop_points']:+.2f} points{batched_change(q)}, the model agrees "
        f"with fp32 on {q['prediction_agreement']:.1%} of test predictions, and its logits differ by at most "
        f"{q['max_abs_logit_diff']:.2e}.",
        "",
        f"CPU: {q['cpu']['model']} (features: {', '.join(found) or 'none of note'}; torch uses "
        f"{q['cpu']['torch_capability']}).",
        "",
        f"Speed at sequence length {q['fp32_speed']['seq_len']}, {q['fp32_speed']['threads']} threads (median of "
        f"{q['fp32_speed']['config']['repeats']} calls at batch 1, {q['fp32_speed']['config']['batch_repeats']} at "
        f"batch {q['fp32_speed']['config']['batch_size']}):",
        "",
        "| model | latency p50 (ms) | speed-up | throughput (examples/s) | speed-up |",
        "|---|---:|---:|---:|---:|",
    ]
    base = q["fp32_speed"]
    for name, m in [("fp32 (torch)", base), *((f"{q['dtype']} ({b})", m) for b, m in q["measured"].items())]:
        lines.append(_row(name, f"{m['latency_ms_p50']:.2f}", f"{base['latency_ms_p50'] / m['latency_ms_p50']:.2f}x",
                          f"{m['throughput']:.0f}", f"{m['throughput'] / base['throughput']:.2f}x"))
    if q.get("note"):
        lines += ["", f"Note: {q['note']}"]
    lines += ["", f"Quantized model saved in `model/` ({metrics['student']['layout']})."]
    return lines

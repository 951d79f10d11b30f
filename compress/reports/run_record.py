"""The parts of one run's record (``metrics.json``, a :class:`~compress.reports.records.RunRecord`) and its
``report.md``: the common table, the method's own section (its ``report_lines``), the training stages, the
pipeline's steps, and why the method saves what it saves. :mod:`compress.runs.writer` writes them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compress.bench.measurement import Speed
from compress.data.task import TaskData
from compress.distill.schedule import SCHEDULES
from compress.metrics import Metrics
from compress.models.accounting import COMPONENTS, count_parameters, flops_per_sequence
from compress.models.encoder import Encoder
from compress.paths import atomic_write_text
from compress.registry import get_method
from compress.reports.records import DatasetRecord, IntervalRecord, ModelRecord, RunRecord, SavedConfig, primary
from compress.task_metrics import METRICS

if TYPE_CHECKING:
    from compress.teachers.finetune import FinetuneRecord
    from compress.train_config import StageRecord


def weights_bytes(directory: Path) -> int:
    """Bytes of the weight files in a model directory."""
    return sum(p.stat().st_size for p in Path(directory).glob("*.safetensors"))


def model_record(model: Encoder, test: Metrics, seq_len: int, size: int, **more: Any) -> ModelRecord:
    count = count_parameters(model)
    return ModelRecord(params=count.backbone, classifier_params=count.classifier,
                       params_by_component=count.by_component, flops=flops_per_sequence(model.config, seq_len),
                       size_bytes=size, accuracy=test.accuracy, macro_f1=test.macro_f1, scores=test.scores(), **more)


def teacher_record(teacher: Encoder, finetuned: FinetuneRecord, seq_len: int, directory: Path) -> ModelRecord:
    """The fine-tuned teacher's record, from the record its fine-tuning wrote (test and dev scores)."""
    return model_record(teacher, Metrics(**finetuned["test"]), seq_len, weights_bytes(directory),
                        dev_accuracy=(finetuned.get("dev") or {}).get("accuracy"))


def dataset_record(task: TaskData) -> DatasetRecord:
    overlap = task.train_overlap()
    return DatasetRecord(name=task.name, fingerprint=task.fingerprint, label_names=task.label_names,
                         sizes={name: len(split) for name, split in task.splits.items()},
                         in_train=dict(overlap) if any(overlap.values()) else None,
                         dropped=dict(task.dropped) if any(task.dropped.values()) else None,
                         pairs=True if task.has_pairs else None)


def overlap_lines(dataset: DatasetRecord) -> list[str]:
    """report.md's line on dev and test rows that also occur in train: counted in the scores above, or
    dropped with --dedupe; nothing when there were none."""
    def counts(values: dict[str, int], total: bool) -> str:
        return " and ".join(f"{values[n]}{f' of {dataset.sizes[n]}' if total else ''} {n} rows"
                            for n in ("test", "dev") if values.get(n))

    lines = []
    if dataset.in_train:
        lines.append(f"**Overlap with training:** {counts(dataset.in_train, True)} also occur in the training "
                     "split; the test scores below count them, so they measure memory as well as generalisation "
                     "(deduplicate the file or pass --dedupe).")
    if dataset.dropped:
        lines.append(f"--dedupe dropped {counts(dataset.dropped, False)} whose text also occurs in the training "
                     "split; the scores below are on the rest.")
    return [*lines, ""] if lines else []


def ratios(teacher: ModelRecord, student: ModelRecord) -> dict[str, float]:
    """Teacher / student for parameters, FLOPs and bytes."""
    return {k: getattr(teacher, k) / getattr(student, k) for k in ("params", "flops", "size_bytes")}


def retention(teacher: ModelRecord, student: ModelRecord, metric: str | None = None) -> float:
    """The student's score on ``metric`` (the task's default metric when None) as a share of the teacher's."""
    if metric is not None:
        score = (teacher.scores or {})[metric], (student.scores or {})[metric]
        return score[1] / score[0] if score[0] else 0.0
    return primary(student) / primary(teacher) if primary(teacher) else 0.0


def explanation(method: str, ratios: dict[str, float], against: str = "the teacher") -> str:
    """Why ``method`` saves what it saves, with ratios of ``against`` / the model it made."""
    return get_method(method).sentence(ratios, against)


def interval_text(interval: IntervalRecord) -> str:
    """An interval's bounds as a reader takes them: "94.2-99.3%"."""
    return f"{interval['low']:.1%}-{interval['high']:.1%}".replace("%-", "-")


def retention_summary(record: RunRecord) -> str:
    """The retention with its interval, for a run's closing line: "96.7% (94.2-99.3% over 1,031 test sentences;
    dev 92.7%, 90.1-95.3%)"; the bare number for a run recorded before runs kept intervals."""
    kept = record.retentions or {}
    if "test" not in kept:
        return f"{record.retention:.1%}"
    said = f"{interval_text(kept['test'])} over {record.dataset.sizes['test']:,} test sentences"
    if "dev" in kept:
        said += f"; dev {kept['dev']['estimate']:.1%}, {interval_text(kept['dev'])}"
    return f"{record.retention:.1%} ({said})"


def retention_lines(record: RunRecord) -> list[str]:
    """report.md's retention: on test and on dev, each with its 95% interval over that split's sentences (paired with
    the teacher on the same sentences), and one sentence where the two differ by more than their intervals allow."""
    name = _metric_name(record)
    kept = record.retentions or {}
    if "test" not in kept:   # a run recorded before runs kept intervals: as its report said then
        return [f"**Retention** (student {name} / teacher {name}): **{record.retention:.1%}**."]
    test, sizes = kept["test"], record.dataset.sizes
    lines = [f"**Retention** (student {name} / teacher {name}): **{record.retention:.1%}** on the {sizes['test']:,} "
             f"test sentences, 95% interval {interval_text(test)} (paired with the teacher on the same sentences)."]
    if "dev" not in kept:
        return lines
    dev = kept["dev"]
    lines[0] += f" On the {sizes['dev']:,} dev sentences: {dev['estimate']:.1%}, {interval_text(dev)}."
    gap = test["estimate"] - dev["estimate"]
    # two independent splits: the difference's half-width is the two half-widths added in quadrature
    allowed = math.hypot(test["high"] - test["low"], dev["high"] - dev["low"]) / 2
    if abs(gap) > allowed:
        lines += ["", f"Test reads the student {abs(gap) * 100:.1f} points {'higher' if gap > 0 else 'lower'} than "
                      f"dev, more than the two intervals allow (±{allowed * 100:.1f}): one split is one draw of "
                      "sentences, so judge the student on both."]
    return lines


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _metric_name(record: RunRecord) -> str:
    """What the run's retention is of, in words."""
    if record.metric is not None:
        return METRICS[record.metric].title if record.metric in METRICS else record.metric
    return primary_name(record.teacher)


def primary_name(model: ModelRecord) -> str:
    return "accuracy" if model.accuracy is not None else "Pearson correlation"


def _score_rows(teacher: ModelRecord, student: ModelRecord) -> list[str]:
    """A row per task metric both models have (accuracy and macro-F1 in records made before the others)."""
    def scores(model: ModelRecord) -> dict[str, float]:
        return model.scores or {k: v for k, v in (("accuracy", model.accuracy), ("macro_f1", model.macro_f1))
                                if v is not None}
    both = scores(teacher), scores(student)
    return [_row(f"test {METRICS[name].title if name in METRICS else name}", f"{both[0][name]:.4f}",
                 f"{both[1][name]:.4f}", "") for name in both[0] if name in both[1]]


def write_report(path: Path, record: RunRecord, config: SavedConfig) -> None:
    """report.md: the side-by-side table, the stages, the recipe, and why the method saves what it saves."""
    t, s, r = record.teacher, record.student, record.ratios
    teacher_name = config.get("teacher") or config["run"]["teacher"]
    lines = [
        f"# {record.method}: {teacher_name} -> student on {record.dataset.name}",
        "",
        f"Test split: {record.dataset.sizes['test']} examples (split fingerprint "
        f"`{record.dataset.fingerprint}`); FLOPs per sequence of {record.seq_len} tokens.",
        "",
        *overlap_lines(record.dataset),
        "| | teacher | student | teacher / student |",
        "|---|---:|---:|---:|",
        _row("parameters (embeddings + encoder + pooler)", f"{t.params:,}", f"{s.params:,}", f"{r['params']:.2f}x"),
        _row("size on disk (MB)", f"{t.size_bytes / 1e6:.1f}", f"{s.size_bytes / 1e6:.1f}", f"{r['size_bytes']:.2f}x"),
        _row("FLOPs per sequence", f"{t.flops:,}", f"{s.flops:,}", f"{r['flops']:.2f}x"),
        *_score_rows(t, s),
        *_speed_rows(record.speed),
        "",
        *retention_lines(record),
        "",
        "## Parameters by component",
        "",
        "| component | teacher | student |",
        "|---|---:|---:|",
        *(_row(label, f"{t.params_by_component[k]:,}", f"{s.params_by_component[k]:,}")
          for k, label in COMPONENTS.items()),
        "",
    ]
    lines += get_method(record.method).report_lines(record)
    if not record.quantized:
        lines += _training_lines(record, config)
    lines += _chain_lines(record)
    lines += ["", "## Why it saves what it saves", ""]
    lines.append(explanation(record.method, record.ratios))
    atomic_write_text(path, "\n".join(lines) + "\n")


def _speed_rows(speed: dict[str, Speed]) -> list[str]:
    """Latency and throughput rows, when the teacher was timed in the same process as the student."""
    t, s = speed.get("teacher"), speed["student"]
    if t is None:
        return []
    where = f"{s['seq_len']} tokens, " + (f"on the GPU {s['device']}" if s.get("config", {}).get("device") == "cuda"
                                          else f"{s['threads']} threads")
    return [
        _row(f"latency at batch 1, p50 (ms; {where})", f"{t['latency_ms_p50']:.2f}", f"{s['latency_ms_p50']:.2f}",
             times(t["latency_ms_p50"] / s["latency_ms_p50"], "faster", "slower")),
        _row(f"throughput at batch {s['config']['batch_size']} (examples/s)", f"{t['throughput']:.0f}",
             f"{s['throughput']:.0f}", times(s["throughput"] / t["throughput"], "more", "less")),
    ]


def times(ratio: float, above: str, below: str) -> str:
    """A ratio to the teacher as words read it: "2.10x faster", "1.22x slower" (never "0.82x faster")."""
    if round(ratio, 2) == 1.0:
        return "the same"
    return f"{ratio:.2f}x {above}" if ratio > 1 else f"{1 / ratio:.2f}x {below}"


def _chain_lines(record: RunRecord) -> list[str]:
    """What each step of the pipeline bought, when this run is a later step of one."""
    if len(record.chain) < 2:
        return []
    t = record.teacher
    lines = ["", "## Pipeline: what each step bought", "",
             "Each step's numbers as its own run measured them (latency at batch 1).", "",
             f"| step | parameters | size (MB) | test {primary_name(t)} | latency p50 (ms) | run |",
             "|---|---:|---:|---:|---:|---|",
             _row("teacher", f"{t.params:,}", f"{t.size_bytes / 1e6:.1f}", f"{primary(t):.4f}", "", "")]
    for step in record.chain:
        lines.append(_row(f"`{step.step}`", f"{step.params:,}", f"{step.size_bytes / 1e6:.1f}",
                          f"{primary(step):.4f}", f"{step.latency_ms_p50:.2f}", f"`{step.run_dir}`"))
    return lines


def _precision(stage: StageRecord) -> str:
    """Where a stage recorded it: the precision it trained in and, when auto timed it, each step time; then the
    device, its examples per second and its GPU memory peak where it recorded them."""
    if "precision" not in stage:
        return ""
    timed = stage.get("step_ms")
    said = f", {stage['precision']}"
    if timed:
        said += f" (a training step timed {', '.join(f'{name} {ms:.0f} ms' for name, ms in timed.items())})"
    if "device" in stage:
        said += f" on {stage['device']}"
    if "examples_per_second" in stage:
        said += f", {stage['examples_per_second']:,.0f} examples/s"
    if "peak_memory_bytes" in stage:
        said += f", GPU memory peak {stage['peak_memory_bytes'] / 2**30:.2f} GiB"
    return said


def _length(stage: StageRecord, spec: Mapping[str, Any]) -> str:
    """How long a stage trained and why it stopped, where its record says (older records: its recipe's epochs)."""
    if "epochs" not in stage:
        return f"{spec['epochs']} epoch(s)"
    why = {"patience": "stopped: no better dev score", "bar": "stopped: the bar out of reach"}.get(
        stage.get("stop_reason", ""), "its ceiling")
    if stage.get("cooldown_steps"):
        why += f", after {stage['cooldown_steps']} steps of cool-down to a zero learning rate"
    return (f"{stage['epochs']} of at most {stage['max_epochs']} epoch(s) ({why}), {stage['steps']:,} steps on "
            f"{stage['examples_per_epoch']:,} examples an epoch")


def _kept(stage: StageRecord) -> str:
    """Which weights a stage kept and what chose them, where its record says (older records: the best epoch)."""
    if "kept_step" not in stage:
        return f"best epoch {stage['best_epoch']}"
    which = "the running average" if stage.get("kept_average") else "the weights"
    signal = {"divergence": "the closest dev answers to the teacher's", "loss": "the lowest dev loss"}.get(
        stage["selected_on"], f"the best dev {stage['selected_on']}")
    return f"kept {which} at step {stage['kept_step']:,} (epoch {stage['best_epoch']}), chosen by {signal}"


def _training_lines(record: RunRecord, config: SavedConfig) -> list[str]:
    lines = ["## Training", ""] if record.stages else []
    recipe = config.get("run", {}).get("recipe")
    if record.stages and recipe:
        lines += [f"Recipe `{recipe}`" + (f": {SCHEDULES[recipe].summary}." if recipe in SCHEDULES else "."), ""]
    for stage, spec in zip(record.stages, config.get("recipe", {}).get("stages", []), strict=True):
        terms = " + ".join(f"{term['weight']:g} * {term['loss']}" + (f"({term['options']})" if term["options"] else "")
                           for term in spec["terms"])
        lines.append(f"- **{stage['stage']}**: loss = {terms}; {_length(stage, spec)} at lr {spec['lr']:g}, "
                     f"{_kept(stage)} ({stage['seconds']:.0f} s){_precision(stage)}.")
        lines += [f"  - ⚠ {warning}" for warning in stage.get("warnings", [])]
    lines += ["", f"Student saved in `student/` ({record.student.layout} layout)."]
    return lines

"""The record of one run: ``metrics.json`` (a :class:`~compress.reports.records.RunRecord`),
``manifest.json`` (package versions, CPU model and features, threads, seed, git commit, split
fingerprint) and ``report.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compress.bench.machine import manifest
from compress.data.task import TaskData
from compress.methods.registry import get_method
from compress.metrics import Metrics
from compress.models.accounting import COMPONENTS, count_parameters, flops_per_sequence
from compress.models.encoder import Encoder
from compress.paths import atomic_write_text
from compress.reports.layers_kept import layer_cells, layers_kept
from compress.reports.records import ChainStep, DatasetRecord, Measurement, ModelRecord, RunRecord


def weights_bytes(directory: Path) -> int:
    """Bytes of the weight files in a model directory."""
    return sum(p.stat().st_size for p in Path(directory).glob("*.safetensors"))


def model_record(model: Encoder, test: Metrics, seq_len: int, size: int, **more: Any) -> ModelRecord:
    count = count_parameters(model)
    return ModelRecord(params=count.backbone, classifier_params=count.classifier,
                       params_by_component=count.by_component, flops=flops_per_sequence(model.config, seq_len),
                       size_bytes=size, accuracy=test.accuracy, macro_f1=test.macro_f1, **more)


def teacher_record(teacher: Encoder, finetuned: dict[str, Any], seq_len: int, directory: Path) -> ModelRecord:
    """The fine-tuned teacher's record, from the record its fine-tuning wrote (test and dev scores)."""
    return model_record(teacher, Metrics(**finetuned["test"]), seq_len, weights_bytes(directory),
                        dev_accuracy=(finetuned.get("dev") or {}).get("accuracy"))


def dataset_record(task: TaskData) -> DatasetRecord:
    overlap = task.train_overlap()
    return DatasetRecord(name=task.name, fingerprint=task.fingerprint, label_names=task.label_names,
                         sizes={name: len(split) for name, split in task.splits.items()},
                         in_train=dict(overlap) if any(overlap.values()) else None,
                         dropped=dict(task.dropped) if any(task.dropped.values()) else None)


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


def retention(teacher: ModelRecord, student: ModelRecord) -> float:
    return student.accuracy / teacher.accuracy if teacher.accuracy else 0.0


def explanation(method: str, ratios: dict[str, float], against: str = "the teacher") -> str:
    """Why ``method`` saves what it saves, with ratios of ``against`` / the model it made."""
    return get_method(method).sentence(ratios, against)


def run_metrics(*, method: str, step: str, out: Path, teacher: Encoder, student: Encoder, student_test: Metrics,
                seq_len: int, teacher_finetuned: dict[str, Any], teacher_dir: Path, student_dir: Path, layout: str,
                stages: list[dict[str, Any]], task: TaskData, seconds: float,
                speed: dict[str, Measurement]) -> RunRecord:
    """The metrics.json of a distillation run written to ``out``; ``step`` is the run as a pipeline
    step (``albert[sharing=attention]``)."""
    t = teacher_record(teacher, teacher_finetuned, seq_len, teacher_dir)
    s = model_record(student, student_test, seq_len, weights_bytes(student_dir), layout=layout,
                     config=student.config.to_dict())
    return RunRecord(method=method, kind="distillation", seconds=round(seconds, 1), seq_len=seq_len,
                     dataset=dataset_record(task), teacher=t, student=s, retention=retention(t, s),
                     ratios=ratios(t, s), stages=stages, speed=speed,
                     chain=[ChainStep.of(step, out, s, speed["student"])])


def write_run_record(directory: Path, record: RunRecord, config: dict[str, Any], *, seed: int) -> None:
    """config.json, metrics.json, manifest.json and report.md of a run directory."""
    (directory / "config.json").write_text(json.dumps(config, indent=2, default=str))
    (directory / "metrics.json").write_text(json.dumps(record.to_dict(), indent=2))
    machine = manifest(threads=record.speed["student"]["threads"], seed=seed,
                       split_fingerprint=record.dataset.fingerprint)
    (directory / "manifest.json").write_text(json.dumps(machine, indent=2))
    write_report(directory / "report.md", record, config)


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def write_report(path: Path, record: RunRecord, config: dict[str, Any]) -> None:
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
        _row("test accuracy", f"{t.accuracy:.4f}", f"{s.accuracy:.4f}", ""),
        _row("test macro-F1", f"{t.macro_f1:.4f}", f"{s.macro_f1:.4f}", ""),
        *_speed_rows(record.speed),
        "",
        f"**Retention** (student accuracy / teacher accuracy): **{record.retention:.1%}**.",
        "",
        "## Parameters by component",
        "",
        "| component | teacher | student |",
        "|---|---:|---:|",
        *(_row(label, f"{t.params_by_component[k]:,}", f"{s.params_by_component[k]:,}")
          for k, label in COMPONENTS.items()),
        "",
    ]
    if record.quantized:
        lines += _quantization_lines(record)
    else:
        lines += _pruning_lines(record) + _training_lines(record, config)
    lines += _chain_lines(record)
    lines += ["", "## Why it saves what it saves", ""]
    lines.append(explanation(record.method, record.ratios))
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


def _chain_lines(record: RunRecord) -> list[str]:
    """What each step of the pipeline bought, when this run is a later step of one."""
    if len(record.chain) < 2:
        return []
    t = record.teacher
    lines = ["", "## Pipeline: what each step bought", "",
             "Each step's numbers as its own run measured them (latency at batch 1).", "",
             "| step | parameters | size (MB) | test accuracy | latency p50 (ms) | run |",
             "|---|---:|---:|---:|---:|---|",
             _row("teacher", f"{t.params:,}", f"{t.size_bytes / 1e6:.1f}", f"{t.accuracy:.4f}", "", "")]
    for step in record.chain:
        lines.append(_row(f"`{step.step}`", f"{step.params:,}", f"{step.size_bytes / 1e6:.1f}",
                          f"{step.accuracy:.4f}", f"{step.latency_ms_p50:.2f}", f"`{step.run_dir}`"))
    return lines


def _training_lines(record: RunRecord, config: dict[str, Any]) -> list[str]:
    lines = ["## Training", ""] if record.stages else []
    for stage, spec in zip(record.stages, config.get("recipe", {}).get("stages", []), strict=True):
        terms = " + ".join(f"{term['weight']:g} * {term['loss']}" + (f"({term['options']})" if term["options"] else "")
                           for term in spec["terms"])
        lines.append(f"- **{stage['stage']}**: loss = {terms}; {spec['epochs']} epoch(s) at lr {spec['lr']:g}, "
                     f"best epoch {stage['best_epoch']} ({stage['seconds']:.0f} s).")
        lines += [f"  - ⚠ {warning}" for warning in stage.get("warnings", [])]
    lines += ["", f"Student saved in `student/` ({record.student.layout} layout)."]
    return lines


def _pruning_lines(record: RunRecord) -> list[str]:
    """What pruning removed, layer by layer, and the head-importance curve."""
    p = record.pruning
    if p is None:
        return []
    if "vocabulary" in p:
        return _vocabulary_lines(record)
    source, options = record.source, p["options"]
    what = "the fine-tuned teacher" if source.kind == "teacher" else f"the student of `{source.parent}`"
    lines = [
        "## Pruning", "",
        f"Pruned: {what} (test accuracy {source.accuracy:.4f}, {source.params:,} parameters). Importance measured "
        f"on {p['steps'][0]['examples']} training examples against the {options['score_against']}, "
        f"ranked {options['ranking']}ly, cut in {options['steps']} step(s); asked to keep {options['keep_heads']:.0%} "
        f"of the heads and {options['keep_ffn']:.0%} of the FFN neurons and to drop {options['drop_layers']} "
        f"layer(s) ({options['layer_order']}). Scores of every step: `importance.json`.", "",
        *([] if options.get("recovery_epochs", 1) else
          ["Training-free (`--recovery-epochs 0`): no recovery was trained; the accuracy is the cut model's.", ""]),
        "| layer (of the source) | heads kept | | FFN neurons kept | |",
        "|---|---:|---|---:|---|",
    ]
    for row in layers_kept(p, record.student.config):
        lines.append(_row(f"{row['layer']}" + (" (dropped)" if row["dropped"] else ""), *layer_cells(row)))
    lines += ["", "A removed head takes its rows of the query, key and value matrices and its columns of the "
              "output matrix with it; a removed neuron its row of the intermediate and column of the output "
              "matrix. What is left is a smaller dense model: fewer parameters, bytes, FLOPs and milliseconds.", ""]
    curve = p.get("head_curve")
    if curve:
        lines += ["### Head-importance curve (no recovery)", "",
                  f"Test accuracy of the source with a share of its {curve['heads']} heads removed, least important "
                  f"first and in a random order (seed {curve['seed']}):", "",
                  "| heads removed | importance order | random order |", "|---:|---:|---:|"]
        lines += [_row(f"{share:.0%}", f"{a:.4f}", f"{b:.4f}")
                  for share, a, b in zip(curve["shares_removed"], curve["importance"], curve["random"], strict=True)]
        lines += ["", "![head-importance curve](head_curve.png)", ""]
    return lines


def _vocabulary_lines(record: RunRecord) -> list[str]:
    v, source = record.pruning["vocabulary"], record.source
    what = "the fine-tuned teacher" if source.kind == "teacher" else f"the student of `{source.parent}`"
    text = "training split uses" if record.pruning["options"]["vocab_from"] == "train" else \
        "train, dev and test splits use"
    return [
        "## Vocabulary pruning", "",
        f"Pruned: {what} (test accuracy {source.accuracy:.4f}). The {text} {v['kept']:,} of the "
        f"{v['vocab_size']:,} tokens (special tokens included); the other {v['removed']:,} ({v['share_removed']:.1%}) "
        f"are gone, and with them {v['embedding_params_before'] - v['embedding_params_after']:,} of the "
        f"{v['embedding_params_before']:,} token-embedding parameters (V x E, E = {v['embedding_size']}).", "",
        f"The saved tokenizer numbers the kept tokens 0..{v['kept'] - 1}. A word whose pieces were all removed "
        f"splits into other kept pieces or becomes [UNK]: {v['test_sentences_tokenized_differently']} of the "
        f"{v['test_sentences']} test sentences are tokenized differently than before, which is where any "
        "accuracy change comes from. Layers, FLOPs and speed are unchanged: a lookup in a smaller table "
        "costs the same.", "",
    ]


def batched_change(quantization: dict[str, Any]) -> str:
    """`` (+x.xx in padded batches of N)``: the accuracy change against fp32 when scored in batches
    (empty for records made before it was measured)."""
    q = quantization
    if "batched_accuracy" not in q:
        return ""
    return f" ({100 * (q['batched_accuracy'] - q['fp32_accuracy']):+.2f} in padded batches of {q['batched_size']})"


def _quantization_lines(record: RunRecord) -> list[str]:
    q, source = record.quantization, record.source
    found = [name for name, present in q["cpu"]["features"].items() if present]
    lines = [
        "## Quantization",
        "",
        f"Quantized: the {'fine-tuned teacher' if source.kind == 'teacher' else 'student of ' + str(source.parent)}"
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
    lines += ["", f"Quantized model saved in `model/` ({record.student.layout})."]
    return lines

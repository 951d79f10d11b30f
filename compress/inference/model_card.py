"""README.md of an exported folder: a model card in the Hugging Face layout (a YAML metadata block, then what the model
is, how it scored and how it was made), with the lines of Python that load and run it without compress.

Every number comes from the run's own record: its test score with a 95% bootstrap interval over the test sentences
(from the run's recorded predictions), its retention of the teacher's score (the interval divides the score's by the
teacher's, which is held fixed), its size, and its speed with the CPU and threads it was measured on
(``manifest.json``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from compress.inference.loaded import takes_pairs

if TYPE_CHECKING:
    from compress.inference.export_plan import ExportPlan

EXAMPLE = "a gripping, funny and moving film"


def _score_interval(plan: ExportPlan) -> tuple[str, float, float, float]:
    """The run's metric on test: its name, value and 95% interval."""
    from compress.predictions import load_predictions
    from compress.stats import Scored, metric_interval
    from compress.task_metrics import resolve_metric

    predictions = load_predictions(plan.run_dir, plan.record.predictions)
    metric = resolve_metric(plan.record.metric, regression=predictions.regression,
                            classes=predictions.logits.shape[-1])
    classes = predictions.logits.shape[-1]
    interval = metric_interval(Scored(predictions.statistics(metric)[None], metric, classes))
    return metric.name, interval.estimate, interval.low, interval.high


def _teacher_score(plan: ExportPlan, metric: str) -> float | None:
    teacher = plan.record.teacher
    return (teacher.scores or {}).get(metric, teacher.accuracy if metric == "accuracy" else None)


def _code(plan: ExportPlan, folder: Path, model_file: str) -> str:
    """The lines that load the folder and answer, runnable as they stand (the folder's path where it was written)."""
    pairs = takes_pairs(plan.record, plan.config)
    encode = "tokenizer.encode_batch(list(zip(texts, pairs)))" if pairs else "tokenizer.encode_batch(texts)"
    signature = "texts, pairs" if pairs else "texts"
    example = f"[{EXAMPLE!r}], [{EXAMPLE!r}]" if pairs else f"[{EXAMPLE!r}]"
    regression = (plan.record.student.config or {}).get("num_labels") == 1
    if plan.format == "hf":
        call = "tokenizer(texts, pairs, truncation=True, padding=True, return_tensors=\"pt\")" if pairs else \
            "tokenizer(texts, truncation=True, padding=True, return_tensors=\"pt\")"
        shown = "answer(" + example + ")[:, 0]" if regression else \
            f"[model.config.id2label[int(i)] for i in answer({example}).argmax(-1)]"
        return "\n".join([
            "import torch",
            "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
            f"folder = {str(folder)!r}",
            "tokenizer = AutoTokenizer.from_pretrained(folder)",
            "model = AutoModelForSequenceClassification.from_pretrained(folder).eval()",
            f"def answer({signature}):",
            "    with torch.no_grad():",
            f"        return model(**{call}).logits.numpy()",
            f"print({shown})"])
    if plan.format == "onnx":
        runtime = ["import onnxruntime", "session = onnxruntime.InferenceSession(f\"{folder}/" + model_file
                   + "\", disabled_optimizers=config[\"disabled_optimizers\"])",
                   "names = [i.name for i in session.get_inputs()]"]
        run = "session.run([\"logits\"], feeds)[0]"
    else:
        from compress.quantize.openvino_backend import precision_hint

        hint = precision_hint(plan.dtype)   # as the run computed it (OpenVINO's CPU may pick bf16 by itself)
        options = f", {{\"INFERENCE_PRECISION_HINT\": \"{hint}\"}}" if hint else ""
        runtime = ["import openvino", "model = openvino.Core().compile_model(f\"{folder}/" + model_file + "\", \"CPU\""
                   + options + ")",
                   "names = [i.get_any_name() for i in model.inputs]"]
        run = "model(feeds)[model.output(0)]"
    shown = f"answer({example})[:, 0]" if regression else \
        f"[config['labels'][i] for i in answer({example}).argmax(-1)]"
    return "\n".join([
        "import json, numpy as np",
        runtime[0],
        "from tokenizers import Tokenizer",
        f"folder = {str(folder)!r}",
        "config = json.load(open(f\"{folder}/config.json\"))",
        "tokenizer = Tokenizer.from_file(f\"{folder}/tokenizer.json\")",
        "tokenizer.enable_truncation(config[\"max_length\"])",
        "tokenizer.enable_padding(pad_id=config[\"pad_token_id\"])",
        *runtime[1:],
        f"def answer({signature}):",
        f"    batch = {encode}",
        "    arrays = {\"input_ids\": [e.ids for e in batch], \"attention_mask\": [e.attention_mask for e in batch],",
        "              \"token_type_ids\": [e.type_ids for e in batch]}",
        "    feeds = {name: np.array(arrays[name], dtype=np.int64) for name in names}",
        f"    return {run}",
        f"print({shown})"])


def _speed_lines(plan: ExportPlan) -> list[str]:
    speed = plan.record.speed.get("student") or {}
    try:
        cpu = json.loads((plan.run_dir / "manifest.json").read_text()).get("cpu", {}).get("model")
    except (OSError, ValueError):
        cpu = None
    where = speed.get("device") or cpu or "the CPU it ran on"
    lines = []
    if "latency_ms_p50" in speed:
        lines.append(f"| batch-1 latency (median) | {speed['latency_ms_p50']:.2f} ms |")
    if "throughput" in speed:
        size = (speed.get("config") or {}).get("batch_size", 32)
        lines.append(f"| throughput at batch {size} | {speed['throughput']:,.0f} texts/s |")
    teacher = plan.record.speed.get("teacher")
    if teacher and teacher.get("latency_ms_p50") and speed.get("latency_ms_p50"):
        lines.append(f"| faster than the teacher at batch 1 | {teacher['latency_ms_p50'] / speed['latency_ms_p50']:.2f}x |")
    if lines:
        lines.append(f"| measured on | {where}, {speed.get('threads', '?')} threads, {speed.get('backend', '?')} "
                     f"{speed.get('dtype', '')}, {speed.get('seq_len', '?')} tokens |")
    return lines


def model_card(plan: ExportPlan, folder: Path, model_file: str, written: Path) -> str:
    """The card of the folder being written at ``written`` (to live at ``folder``)."""
    record = plan.record
    metric, value, low, high = _score_interval(plan)
    teacher_value = _teacher_score(plan, metric)
    dataset = record.dataset.name
    steps = [step.step for step in record.chain] or [record.method]
    teacher = plan.config.get("run", {}).get("teacher", "the teacher")
    library = {"onnx": "onnxruntime", "openvino": "openvino", "hf": "transformers"}[plan.format]
    task = "text-classification"
    model_bytes = sum(p.stat().st_size for p in written.iterdir()
                      if p.is_file() and p.suffix in (".onnx", ".bin", ".safetensors", ".xml"))
    recipe = plan.config.get("run", {}).get("recipe")
    head = ["---", f"library_name: {library}", f"pipeline_tag: {task}",
            "tags:", "- compress", *[f"- {step.split('[')[0]}" for step in steps],
            "datasets:", f"- {json.dumps(dataset)}", "metrics:", f"- {metric}",
            "model-index:", f"- name: {json.dumps(plan.run_dir.name)}", "  results:",
            f"  - task: {{type: {task}}}", f"    dataset: {{name: {json.dumps(dataset)}, type: {json.dumps(dataset)}, "
            "split: test}", "    metrics:", f"    - {{type: {metric}, value: {value:.4f}}}", "---", ""]
    chain = " → ".join(f"`{step}`" for step in steps)
    body = [f"# {plan.run_dir.name}", "",
            f"A compressed model of the teacher `{teacher}` on `{dataset}`, made by compress: {chain}. It runs on "
            f"{library} ({plan.dtype}) with this folder alone: no compress, no training code.", "",
            f"## Results on the test split ({record.dataset.sizes.get('test', '?')} texts)", "",
            "| | |", "|---|---|",
            f"| {metric} | {value:.4f} (95% interval {low:.4f}-{high:.4f}) |"]
    if teacher_value:
        body += [f"| teacher's {metric} | {teacher_value:.4f} |",
                 f"| retention of the teacher's {metric} | {value / teacher_value:.1%} "
                 f"({low / teacher_value:.1%}-{high / teacher_value:.1%}) |"]
    body += [f"| parameters | {record.student.params:,} (teacher {record.teacher.params:,}) |",
             f"| size as the run measured it | {record.student.size_bytes / 1e6:.2f} MB "
             f"(teacher {record.teacher.size_bytes / 1e6:.2f} MB) |",
             f"| size of this folder's model file | {model_bytes / 1e6:.2f} MB |",
             *_speed_lines(plan), "",
             "The interval is a bootstrap over the test texts; retention's divides it by the teacher's score, held "
             "fixed. One run is one seed: `compress compare --seeds` gives the spread over seeds.", "",
             "## How it was made", "",
             f"- teacher: `{teacher}`; data: `{dataset}` ({', '.join(f'{k} {v}' for k, v in record.dataset.sizes.items())})",
             f"- steps: {chain}" + (f"; recipe `{recipe}`" if recipe else ""),
             f"- labels: {', '.join(record.dataset.label_names or []) or 'a value (regression)'}; texts truncated to "
             f"{plan.config.get('max_length') or record.seq_len} tokens", "",
             "## Use it", "", "```python", _code(plan, folder, model_file), "```", ""]
    if plan.format == "hf":
        body += ["It also loads as a pipeline: `pipeline(\"text-classification\", model=folder)(texts, truncation=True)`.",
                 ""]
    return "\n".join(head + body)

"""`compress export RUN_DIR --out DIR`: one folder that serves the run's model without compress.

The folder holds the model in its runtime's own format (``onnx``: ``model.onnx`` for ONNX Runtime; ``openvino``:
``model.xml`` and ``model.bin``; ``hf``: a ``transformers`` checkpoint), the tokenizer's files, a ``config.json``
(``onnx``, ``openvino``: the label names, the maximum length, the inputs and what turns logits into answers; ``hf``:
the checkpoint's own, with ``id2label``, and the maximum length in ``tokenizer_config.json``) and ``README.md``, a model
card (:mod:`.model_card`). What a format cannot hold is refused before anything is written: an artefact keeps the
runtime it was quantized for (an ONNX Runtime model is exported as ``onnx``, an OpenVINO one as ``openvino``, a
PyTorch one not at all), and ``hf`` takes only the shapes ``transformers`` has classes for (BERT, ALBERT). The folder
is written whole or not at all; an ``--out`` that exists is replaced only when it is an export compress wrote.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import NotRequired, TypedDict

from compress.errors import CompressError
from compress.inference.export_plan import ExportPlan, plan_export
from compress.inference.loaded import ARTEFACT_DIR, takes_pairs
from compress.ownership import foreign, mark_export
from compress.paths import atomic_dir

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json", "spiece.model")
EXPORT_FORMAT = "compress-export/1"


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that exists and is not an export of ours (an empty directory is taken)."""
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        why = foreign(out, "export") if out.is_dir() else "is a file"
        if why is not None:
            raise CompressError(f"--out {out} exists and {why}; give a new directory, or one compress exported to.")


class ServingConfig(TypedDict):
    """config.json of an onnx or openvino folder (see :func:`serving_config`)."""

    format: str
    runtime: str
    model: str
    dtype: str
    task: str
    labels: list[str]
    text_pairs: bool
    max_length: int
    inputs: list[str]
    output: str
    preprocessing: str
    postprocessing: str
    pad_token_id: int
    disabled_optimizers: NotRequired[list[str]]   # onnx: the graph optimizations the run's sessions left out


def serving_config(plan: ExportPlan, model_file: str) -> ServingConfig:
    """config.json of an onnx or openvino folder: what a server needs around the model."""
    regression = (plan.record.student.config or {}).get("num_labels") == 1
    config: ServingConfig = {
        "format": EXPORT_FORMAT, "runtime": "onnxruntime" if plan.format == "onnx" else "openvino",
        "model": model_file, "dtype": plan.dtype, "task": "regression" if regression else "text-classification",
        "labels": list(plan.record.dataset.label_names or []), "text_pairs": takes_pairs(plan.record, plan.config),
        "max_length": int(plan.config.get("max_length") or plan.record.seq_len),
        "inputs": ["input_ids", "attention_mask", "token_type_ids"], "output": "logits",
        "preprocessing": "tokenizer.json: truncate to max_length tokens (special tokens included), pad each batch to "
                         "its longest text with the pad token, attention_mask 1 on tokens and 0 on padding",
        "postprocessing": "the value is logits[:, 0]" if regression else
                          "softmax over logits; the label is labels[argmax]",
        "pad_token_id": _pad_id(plan.model_dir)}
    if plan.format == "onnx":
        from compress.quantize.predictors import SLOW_FUSIONS

        # The run's answers and speeds came from sessions without these fusions; with them, a quantized model's
        # logits moved by up to 0.24 and 2 of 1,031 answers flipped (MR, the size search's chain).
        config["disabled_optimizers"] = list(SLOW_FUSIONS)
    return config


def _pad_id(model_dir: Path) -> int:
    from compress.teachers.registry import saved_tokenizer

    pad = saved_tokenizer(model_dir).pad_token_id
    return int(pad) if pad is not None else 0


def _write_model(plan: ExportPlan, tmp: Path) -> str:
    """The model in the folder, in its format; the name of its main file."""
    if plan.model_dir.name == ARTEFACT_DIR:   # an artefact in its runtime's format already: its files as they are
        from compress.quantize.artefacts import read_manifest

        weights = read_manifest(plan.model_dir)["weights"]
        name = "model.onnx" if plan.format == "onnx" else "model.xml"
        shutil.copy2(plan.model_dir / weights, tmp / name)
        if plan.format == "openvino":
            shutil.copy2((plan.model_dir / weights).with_suffix(".bin"), tmp / "model.bin")
        return name
    if plan.format == "hf":
        for path in plan.model_dir.iterdir():
            if path.is_file() and path.name not in TOKENIZER_FILES:
                shutil.copy2(path, tmp / path.name)
        return "model.safetensors"
    from compress.models.checkpoints import load_encoder
    from compress.quantize.onnx_backend import export_onnx

    model = load_encoder(plan.model_dir).model
    export_onnx(model, tmp / "model.onnx")
    if plan.format == "onnx":
        return "model.onnx"
    from compress.quantize.openvino_backend import write_ir

    write_ir(tmp / "model.onnx", tmp / "model.xml")
    (tmp / "model.onnx").unlink()
    return "model.xml"


def _write_tokenizer(plan: ExportPlan, tmp: Path) -> None:
    for name in TOKENIZER_FILES:
        if (plan.model_dir / name).is_file():
            shutil.copy2(plan.model_dir / name, tmp / name)
    settings = tmp / "tokenizer_config.json"
    if settings.is_file():   # the length the run truncated to, so a pipeline that truncates stops where it did
        data = json.loads(settings.read_text())
        data["model_max_length"] = int(plan.config.get("max_length") or plan.record.seq_len)
        settings.write_text(json.dumps(data, indent=2))


def export_run(run_dir: Path | str, out: Path | str, format: str | None = None) -> Path:
    """Write the folder of ``run_dir``'s model at ``out`` (see the module docstring); its path."""
    from compress.inference.model_card import model_card

    plan = plan_export(run_dir, format)
    out = Path(out).expanduser()
    check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(out) as tmp:
        model_file = _write_model(plan, tmp)
        _write_tokenizer(plan, tmp)
        if plan.format != "hf":
            (tmp / "config.json").write_text(json.dumps(serving_config(plan, model_file), indent=2))
        (tmp / "README.md").write_text(model_card(plan, out, model_file, tmp))
        mark_export(tmp)
    return out

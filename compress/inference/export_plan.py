"""What ``compress export`` will write for a run, decided before anything is written: the format (the run's own
runtime's by default), the run's model directory and how its model is stored, or one sentence on why the format cannot
hold the model. :mod:`compress.inference.export` writes the folder and :mod:`compress.inference.model_card` its card
from this plan."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from compress.errors import CompressError
from compress.inference.loaded import ARTEFACT_DIR, check_model_files, finished_run, model_dir_of
from compress.reports.records import RunRecord, SavedConfig

FORMATS = ("onnx", "openvino", "hf")


@dataclass(frozen=True)
class ExportPlan:
    """What an export of one run writes: the format, the run's model directory and how its model is stored."""

    run_dir: Path
    record: RunRecord
    config: SavedConfig
    model_dir: Path
    format: str
    backend: str          # what the run measured: torch, onnxruntime or openvino
    dtype: str


def _stored(record: RunRecord, model_dir: Path) -> tuple[str, str]:
    if model_dir.name == ARTEFACT_DIR:
        return record.student.backend or "torch", record.student.dtype or "fp32"
    return "torch", "fp32"


def default_format(backend: str, layout: str | None) -> str:
    """The format a run's model goes out in when none is asked for: its artefact's runtime's, else ``hf`` for a
    shape transformers holds, else ``onnx``."""
    if backend == "openvino":
        return "openvino"
    if backend == "onnxruntime" or layout not in ("bert", "albert"):
        return "onnx"
    return "hf"


def export_command(run_dir: Path | str) -> str:
    """The one command that exports a run (what search and compare print under their answer)."""
    run_dir = Path(run_dir)
    return shlex.join(["compress", "export", str(run_dir), "--out", f"export-{run_dir.name}"])


def plan_export(run_dir: Path | str, format: str | None = None) -> ExportPlan:
    """The export of ``run_dir`` in ``format`` (None: :func:`default_format`), or one sentence on why it cannot be."""
    if format is not None and format not in FORMATS:
        raise CompressError(f"unknown export format '{format}'; choose one of {', '.join(FORMATS)}.")
    run_dir, record, config = finished_run(run_dir)
    model_dir = model_dir_of(run_dir)
    check_model_files(run_dir, record, model_dir)
    backend, dtype = _stored(record, model_dir)
    layout = record.student.layout
    chosen = format or default_format(backend, layout)
    what = f"{run_dir}'s model ({backend} {dtype})"
    if backend == "torch" and model_dir.name == ARTEFACT_DIR:
        raise CompressError(f"{what} is kept in compress's own PyTorch format, which no other runtime reads; export "
                            "the run it quantized, or quantize with --backend onnxruntime or openvino.")
    if backend == "onnxruntime" and chosen != "onnx":
        raise CompressError(f"{what} runs on ONNX Runtime's own operators; export it as onnx, or quantize with "
                            "--backend openvino for an OpenVINO model.")
    if backend == "openvino" and chosen != "openvino":
        raise CompressError(f"{what} is an OpenVINO model; export it as openvino.")
    if chosen == "hf" and layout not in ("bert", "albert"):
        raise CompressError(f"{what} has a shape transformers has no class for (uneven heads or FFN, low-rank or "
                            f"relaxed sharing: layout {layout}); export it as onnx or openvino.")
    return ExportPlan(run_dir, record, config, model_dir, chosen, backend, dtype)

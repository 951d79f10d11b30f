"""`compress export RUN_DIR --out DIR`: a folder that serves the run's model without compress, with its model card."""

from __future__ import annotations

import typer

from compress.cli.common import console


def export(
    run_dir: str = typer.Argument(..., help="A finished run's directory (what `compress run`, `compare` or `search` "
                                            "wrote)."),
    out: str = typer.Option(..., "--out", help="The folder to write (new, empty, or an earlier export of compress)."),
    format: str = typer.Option(None, "--format", help="onnx (ONNX Runtime), openvino, or hf (a transformers "
                                                      "checkpoint: BERT and ALBERT shapes); default: the run's own "
                                                      "runtime, hf for an fp32 BERT or ALBERT student."),
) -> None:
    """Write one folder that serves the run's model without compress: the model, its tokenizer, a config.json and a
    model card (README.md) with its scores, size, speed and the Python that runs it."""
    from compress.inference.export import export_run
    from compress.inference.export_plan import plan_export

    plan = plan_export(run_dir, format)   # refused before anything loads when the format cannot hold the model
    folder = export_run(plan.run_dir, out, plan.format)
    console.print(f"exported {plan.run_dir} as {plan.format} to {folder} (README.md says how to load it)",
                  highlight=False, soft_wrap=True)

"""The downstream half of the ALBERT paper's Table 5: each pre-trained encoder starts an ALBERT student
(``compress run albert --init-from ENCODER``, same shape) on a task, and its test accuracy is set beside the
held-out pre-training scores, and beside the same student built from the teacher without pre-training (what
``compress run albert`` does), so the table says whether pre-training paid.

The runs are written under one directory, ``OUT/OBJECTIVE-DATASET``, and reused when asked again with the
same settings on the same data split (as ``compress compare`` reuses its runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from compress.pretrain.config import DownstreamConfig, PretrainConfig
from compress.pretrain.run import PretrainResult
from compress.runs.compare import completed_run
from compress.runs.config import RunConfig, run_task
from compress.runs.pipeline import check_steps, plan, run

NOT_PRETRAINED = "no-pretraining"


class DownstreamRow(TypedDict):
    """One downstream run: its student's and teacher's test accuracy (``compress pretrain --json`` prints it)."""

    dataset: str
    accuracy: float
    teacher_accuracy: float
    retention: float
    directory: str         # the run directory
    reused: bool           # found complete with the same settings on the same split, so not trained again


def downstream_config(pretrained: PretrainConfig, result: PretrainResult | None, dataset: str,
                      config: DownstreamConfig) -> RunConfig:
    """The ALBERT run that ``result``'s encoder starts on ``dataset`` (None: the student built from the teacher),
    with the pre-training's teacher, shape and seed."""
    options = {"embedding_size": pretrained.embedding_size, "sharing": pretrained.sharing, "groups": pretrained.groups}
    if result is not None:
        options["init_from"] = str(result.encoder_dir)
    name = f"{NOT_PRETRAINED if result is None else pretrained.objective}-{Path(dataset).stem}"
    return RunConfig(method="albert", teacher=pretrained.teacher, dataset=dataset, options=options,
                     epochs=config.epochs, seed=pretrained.seed, device=config.device,
                     out=str(Path(config.out) / name), overwrite=True)


def downstream(pretrained: PretrainConfig, result: PretrainResult | None, config: DownstreamConfig,
               splits: dict[str, str], show_progress: bool = True) -> list[DownstreamRow]:
    """Train (or reuse) the student ``result`` starts (None: the one built from the teacher) on each dataset;
    its and the teacher's test accuracy. ``splits``: each dataset's split fingerprint (:func:`split_fingerprints`)."""
    rows: list[DownstreamRow] = []
    for dataset in config.datasets:
        run_config = downstream_config(pretrained, result, dataset, config)
        directory = Path(run_config.out)
        record = completed_run(directory, run_config, splits[dataset])
        reused = record is not None
        if record is None:
            record = run(run_config, show_progress).record
        rows.append(DownstreamRow(dataset=dataset, accuracy=record.student.accuracy,
                                  teacher_accuracy=record.teacher.accuracy, retention=record.retention,
                                  directory=str(directory), reused=reused))
    return rows


def check_downstream(pretrained: PretrainConfig, config: DownstreamConfig) -> None:
    """The check phase of every downstream run (its dataset, options and --out), before any pre-training or
    fetch; the encoder a run starts from is checked when it exists."""
    for dataset in config.datasets:
        run_config = downstream_config(pretrained, None, dataset, config)
        check_steps(plan(run_config), run_config)


def split_fingerprints(config: DownstreamConfig) -> dict[str, str]:
    """Each downstream dataset's split fingerprint (the dataset is fetched and read once)."""
    return {dataset: run_task(RunConfig(method="albert", dataset=dataset)).fingerprint for dataset in config.datasets}

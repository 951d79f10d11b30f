"""The transform contract: every transform is one verb on models, ``apply(model, options, context)``, usable from
Python without a run directory; and a method declared in one place (here, a toy one registered by the test)
gets a complete run directory, record and report from the one run writer, with nothing else to change."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch
from helpers import make_tiny_teacher, write_tiny_csv

from compress.data.batching import tokenize_task
from compress.data.load import load_task
from compress.models.checkpoints import load_encoder
from compress.models.encoder import Encoder
from compress.registry import Context, Details, Transform, Transformed, all_methods, get_method
from compress.registry import method as registry
from compress.teachers.registry import load_tokenizer
from compress.train_config import TrainSettings


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    teacher = make_tiny_teacher(root / "teacher", layers=2, hidden=32)
    csv = write_tiny_csv(root / "reviews.csv", copies=2)
    task = load_task(str(csv))
    tokenizer = load_tokenizer(str(teacher))
    data = tokenize_task(task, tokenizer, max_length=16, cache=False)
    model = load_encoder(teacher).model.eval()
    return {"root": root, "teacher": teacher, "csv": csv, "task": task, "tokenizer": tokenizer, "data": data,
            "model": model}


def _runs_here() -> list[str]:
    """What a comparison runs by default here, and the transforms that train on the way (quantization-aware)."""
    return [m.name for m in all_methods("transform") if m.in_compare() or m.name.startswith("qat-")]


@pytest.mark.parametrize("name", _runs_here())
def test_every_transform_applies_to_an_encoder_without_a_run_directory(tiny, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # nothing may be written where Python runs it
    method = get_method(name)
    assert isinstance(method, Transform)
    options = method.make_options({"recovery_epochs": 1} if name == "prune" or name.startswith("qat-") else {})
    work = tmp_path / "work"
    work.mkdir()
    context = Context(data=tiny["data"], task=tiny["task"], tokenizer=tiny["tokenizer"], threads=1, workdir=work,
                      train=TrainSettings(batch_size=16, seed=3))
    before = {k: v.clone() for k, v in tiny["model"].state_dict().items()}
    made = method.apply(copy.deepcopy(tiny["model"]), options, context)
    assert isinstance(made, Transformed) and type(made.details) is method.details
    # The details are the method's typed record: JSON and back, unchanged, with their schema version.
    written = json.loads(json.dumps(made.details.to_dict()))
    assert written["schema_version"] == method.details.SCHEMA and method.details.from_dict(written) == made.details
    if method.gives == "fp32":
        assert isinstance(made.model, Encoder) and made.artefact is None
        batch = next(iter((made.tokenizer and tokenize_task(tiny["task"], made.tokenizer, max_length=16, cache=False)
                           or tiny["data"]).dataloader("test", batch_size=4)))
        with torch.no_grad():
            assert made.model(batch["input_ids"], batch["attention_mask"]).logits.shape == (len(batch["labels"]), 2)
    else:
        assert made.artefact is not None and made.artefact.directory.parent == work
        # its test predictions, one row of logits per test example, made as its model must be scored
        assert made.test is not None and made.test.logits.shape == (len(tiny["task"].splits["test"]), 2)
        assert made.test.metrics().accuracy == made.test.correct.mean()
    assert not any(tmp_path.glob("runs*")) and sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    after = tiny["model"].state_dict()   # the input is the caller's: apply worked on the copy it was given
    assert all(torch.equal(before[k], after[k]) for k in before)


@dataclass
class Unchanged(Details):
    """The toy method's record: a count it made."""

    tensors: int


def _apply(model: Encoder, options, context: Context) -> Transformed:
    return Transformed(model, Unchanged(tensors=len(model.state_dict())))


@dataclass
class NoOptions:
    pass


TOY = Transform(
    name="identity", rank=999, family="testing", label="identity (a test's toy)", summary="changes nothing",
    options=NoOptions, why="It changes nothing: {params:.2f}x the parameters of {against}.",
    explain=lambda teacher, shape, seq_len, options: {}, run_kind="identity", details=Unchanged,
    summary_lines=lambda record: [f"counted {record.details.tensors} tensors"],
    report_lines=lambda record: ["## Identity", "", f"{record.details.tensors} tensors, none changed."],
    check=lambda config, options: None, apply=_apply,
)


def test_a_method_declared_in_one_place_gets_a_complete_run(tiny, tmp_path, monkeypatch):
    """What a new family adds is its own package: the registry finds it, the one run writer evaluates, times,
    saves and records it, the record reads back its typed details, and report.md carries its section."""
    from compress.reports.records import read_run_record
    from compress.runs.config import RunConfig
    from compress.runs.pipeline import run
    from compress.teachers.finetune import FinetuneConfig
    from compress.train_config import TrainConfig

    monkeypatch.setitem(registry._REGISTRY, "identity", TOY)
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    config = RunConfig(method="identity", teacher=str(tiny["teacher"]), dataset=str(tiny["csv"]), threads=1,
                       out=str(tmp_path / "run"),
                       teacher_finetune=FinetuneConfig(train=TrainConfig(epochs=1, batch_size=16, lr=1e-3)))
    result = run(config, show_progress=False)
    out = tmp_path / "run"
    assert {p.name for p in out.iterdir()} >= {"config.json", "student", "metrics.json", "manifest.json", "report.md"}
    assert not (out / "log.jsonl").exists()   # it trained nothing
    metrics = json.loads((out / "metrics.json").read_text())
    tensors = result.record.details.tensors
    assert metrics["kind"] == "identity" and metrics["details"] == {"schema_version": 1, "tensors": tensors}
    record = read_run_record(out)
    assert record.details == Unchanged(tensors=len(tiny["model"].state_dict()))
    # Nothing was changed, so the student scores exactly as the fine-tuned teacher it was made from.
    assert record.student.params == record.teacher.params and record.student.accuracy == record.teacher.accuracy
    report = (out / "report.md").read_text()
    assert f"## Identity\n\n{record.details.tensors} tensors, none changed." in report
    assert "It changes nothing: 1.00x the parameters of the teacher." in report


def test_the_guides_python_example_runs_as_written():
    """The guide's example of the verb from Python, run in a fresh interpreter as a user would paste it."""
    from helpers import HANG_GUARD, REPO

    text = (REPO / "docs" / "guide.md").read_text()
    block = text.split("<!-- python: apply -->\n```python\n", 1)[1].split("```", 1)[0]
    done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=REPO, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["12793", "12793", "12793"]   # the count explain prune-vocab records for MR

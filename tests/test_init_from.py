"""A student's --init-from is checked before any work, by every student method that takes one: a directory
without an encoder, or with one of another shape, fails in one line with exit 2 before the teacher is
fine-tuned (TinyBERT found out only after it, 7 minutes on MR), under `run` and under `compare`."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import make_tiny_teacher, run_cli, tiny_config, write_tiny_csv

SHAPE = {"num_layers": 2, "hidden_size": 32, "num_heads": 4, "ffn_size": 64}   # a TinyBERT the tiny teacher fits


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("init-from")
    empty = root / "empty"
    empty.mkdir()
    other = root / "other-shape"
    from compress.models.checkpoints import save_encoder
    from compress.models.encoder import Encoder

    save_encoder(Encoder(tiny_config(vocab_size=30522, num_layers=3)), other)
    return {"root": root, "teacher": make_tiny_teacher(root / "teacher"), "csv": write_tiny_csv(root / "r.csv"),
            "empty": empty, "other": other}


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def _nothing_trained(cache: Path, done) -> None:
    assert not (cache / "teachers").exists()      # the teacher was not fine-tuned
    assert "fine-tun" not in done.stdout + done.stderr


@pytest.mark.parametrize(("source", "says"), [("empty", "holds no encoder"), ("other", "of another shape")])
def test_run_tinybert_refuses_a_bad_init_from_before_fine_tuning(tiny, source, says, tmp_path):
    cache = tmp_path / "cache"
    flags = ("--layers", "2", "--hidden-size", "32", "--heads", "4", "--ffn-size", "64")
    done = run_cli("run", "tinybert", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]), *flags,
                   "--init-from", str(tiny[source]), "--out", str(tmp_path / "out"),
                   env={"COMPRESS_CACHE": str(cache)})
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert says in line and str(tiny[source]) in line
    _nothing_trained(cache, done)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("method", ["tinybert", "albert"])
def test_compare_refuses_a_bad_init_from_before_any_work(tiny, method, tmp_path):
    cache = tmp_path / "cache"
    options = ",".join(f"{k}={v}" for k, v in SHAPE.items()) if method == "tinybert" else "embedding_size=16"
    done = run_cli("compare", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]),
                   "--methods", f"{method}[{options},init_from={tiny['empty']}]", "--out", str(tmp_path / "cmp"),
                   env={"COMPRESS_CACHE": str(cache)})
    assert done.returncode == 2, done.stderr
    assert "holds no encoder" in _one_line(done.stderr)
    _nothing_trained(cache, done)
    assert not (tmp_path / "cmp").exists() or not any((tmp_path / "cmp").rglob("*"))

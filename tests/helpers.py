"""Small shared pieces for the tests: tiny shapes, a padded batch, running the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from compress.models.config import EncoderConfig

REPO = Path(__file__).resolve().parent.parent


def tiny_config(**changes) -> EncoderConfig:
    """A 4-layer, 32-wide encoder: big enough to exercise every knob, small enough to be instant."""
    base = EncoderConfig(vocab_size=101, embedding_size=32, hidden_size=32, num_layers=4, num_heads=4,
                         ffn_size=64, max_positions=40, num_labels=3)
    return base.replace(**changes)


def padded_batch(vocab_size: int = 101, seed: int = 0) -> dict[str, torch.Tensor]:
    """Three sequences of lengths 9, 5 and 2, right-padded with token 0."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab_size, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    for row, length in enumerate((9, 5, 2)):
        ids[row, length:] = 0
        mask[row, length:] = 0
    types = torch.zeros_like(ids)
    types[0, 5:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m compress ARGS`` as a user would, capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "compress", *args], capture_output=True, text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})}, cwd=cwd or REPO, timeout=600,
    )


def assert_refused_before_work(done: subprocess.CompletedProcess, expected: str, out: Path) -> None:
    """A command refused in one line (``expected`` in it), exit 2, with nothing written at ``out``."""
    assert done.returncode == 2 and expected in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not out.exists()


def offline_hub_env(root: Path, offline: bool = True) -> dict[str, str]:
    """Environment for a fresh process that cannot download from the Hugging Face hub, whatever this machine
    reaches: an empty private cache (HF_HOME and the paths that would override it) and the hub's address on a
    closed local port, with offline mode on (``offline``) or off (the hub is then merely unreachable).
    huggingface_hub reads these when first imported, so they only work for a new process."""
    hf = root / "hf"
    flag = "1" if offline else "0"
    return {"HF_HUB_OFFLINE": flag, "HF_DATASETS_OFFLINE": flag, "HF_HOME": str(hf), "HF_HUB_CACHE": str(hf / "hub"),
            "HF_DATASETS_CACHE": str(hf / "datasets"), "HF_ENDPOINT": "http://127.0.0.1:9"}


POSITIVE = ["a great and moving film", "wonderful acting and a superb story", "brilliant, funny and warm",
            "I loved every minute of it", "a delightful surprise", "beautiful and smart"]
NEGATIVE = ["a dull and boring film", "terrible acting and an awful story", "tedious, flat and cold",
            "I hated every minute of it", "a painful mess", "ugly and stupid"]


def write_tiny_csv(path: Path, copies: int = 8) -> Path:
    """A small, learnable sentiment CSV (text,label with string labels), 96 rows by default."""
    import csv

    rows = [(f"{s} {i}", "pos") for i in range(copies) for s in POSITIVE]
    rows += [(f"{s} {i}", "neg") for i in range(copies) for s in NEGATIVE]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


def make_tiny_teacher(directory: Path, layers: int = 2, hidden: int = 32, seed: int = 0) -> Path:
    """A tiny random BERT checkpoint (with the real minilm tokenizer) saved as transformers does."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from compress.teachers.registry import resolve_teacher_dir

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(resolve_teacher_dir("minilm"))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=4, intermediate_size=2 * hidden, max_position_embeddings=64)
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


CHROMIUM = Path("/usr/bin/chromium")


@contextmanager
def chromium_page(html: Path) -> Iterator[tuple[Any, list[str]]]:
    """``html`` loaded in headless Debian Chromium (via playwright): the page and every URL it requested.

    Skips when Chromium or playwright is missing, unless COMPRESS_REQUIRE_BROWSER=1 (set by CI) makes
    that a failure.
    """
    missing = None if CHROMIUM.exists() else f"{CHROMIUM} does not exist (apt-get install chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is not importable"
    if missing:
        if os.environ.get("COMPRESS_REQUIRE_BROWSER") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=args, timeout=15_000)
        try:
            page = browser.new_page()
            page.set_default_timeout(10_000)
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            page.goto(Path(html).resolve().as_uri(), wait_until="load")
            yield page, requested
        finally:
            browser.close()


def interruptible_run(root: Path, epochs: int = 3) -> dict[str, Any]:
    """A tiny distilbert run long enough to interrupt after its first epoch's checkpoint, and the same run
    uninterrupted (``reference``) to compare against; checkpoints at epoch ends only."""
    env = {"COMPRESS_CACHE": str(root / "cache"), "OMP_NUM_THREADS": "1"}
    teacher, csv = make_tiny_teacher(root / "teacher"), write_tiny_csv(root / "reviews.csv", copies=30)
    args = ["run", "distilbert", "--teacher", str(teacher), "--dataset", str(csv), "--epochs", str(epochs),
            "--batch-size", "8", "--lr", "1e-3", "--teacher-epochs", "4", "--teacher-lr", "3e-3",
            "--teacher-batch-size", "8", "--threads", "1", "--checkpoint-every", "0"]
    reference = root / "uninterrupted"
    done = run_cli(*args, "--out", str(reference), env=env)
    assert done.returncode == 0, done.stderr
    return {"root": root, "env": env, "args": args, "reference": reference}


def tiny_quantization_run(root: Path) -> tuple[list[str], dict[str, str]]:
    """A tiny teacher (2 layers of 64) and CSV under ``root``: the flags a quick `compress run` of a quantization
    takes, and an environment with its own cache there."""
    teacher = make_tiny_teacher(root / "teacher", layers=2, hidden=64)
    csv = write_tiny_csv(root / "tiny.csv")
    return (["--teacher", str(teacher), "--dataset", str(csv), "--teacher-epochs", "1", "--threads", "1"],
            {"COMPRESS_CACHE": str(root / "cache")})

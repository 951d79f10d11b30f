"""Small shared pieces for the tests: tiny shapes, a padded batch, running the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from compress.models.config import EncoderConfig

REPO = Path(__file__).resolve().parent.parent

# The one limit on how long a test waits for a child process or for something a child does: a guard against a hang
# (a deadlocked or stuck child would otherwise hold the run forever), set far above any honest run on a slow or busy
# machine. It is never a speed check: a test that needs to know something happened waits for that event
# (:func:`wait_for`), not for a clock. COMPRESS_TEST_HANG_GUARD (seconds) changes it for a whole run.
HANG_GUARD = float(os.environ.get("COMPRESS_TEST_HANG_GUARD") or 3600)


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


def padded_batches(vocab_size: int = 101, seeds: Iterable[int] = range(8)) -> dict[str, torch.Tensor]:
    """:func:`padded_batch` of each seed, stacked into one batch (24 sequences by default)."""
    parts = [padded_batch(vocab_size, seed) for seed in seeds]
    return {name: torch.cat([part[name] for part in parts]) for name in parts[0]}


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m compress ARGS`` as a user would, capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "compress", *args], capture_output=True, text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})}, cwd=cwd or REPO, timeout=HANG_GUARD,
    )


def wait_for(event: Callable[[], object], process: subprocess.Popen | None = None, what: str = "the event",
             poll: float = 0.01) -> bool:
    """Wait until ``event()`` is true (True) or ``process`` has ended without it (False), however long that takes: the
    only limit is :data:`HANG_GUARD`, past which the test fails (it never goes on as if the event had happened)."""
    give_up = time.monotonic() + HANG_GUARD
    while not event():
        if process is not None and process.poll() is not None:
            return bool(event())
        if time.monotonic() > give_up:
            pytest.fail(f"{what} did not happen in {HANG_GUARD:.0f} s (tests/helpers.py HANG_GUARD): a hang")
        time.sleep(poll)
    return True


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


def logit_error(got: Any, expected: Any) -> tuple[float, float]:
    """How far logits ``got`` (a quantized model's) are from ``expected`` (the fp32 model's, on the same inputs): the
    root-mean-square difference in units of the spread (standard deviation) of ``expected``, and the correlation of
    the two (0 where either is constant)."""
    got, expected = (np.asarray(x, dtype=np.float64).ravel() for x in (got, expected))
    spread = expected.std()
    assert spread > 0, "the fp32 logits do not vary: nothing to compare against"
    error = float(np.sqrt(np.mean((got - expected) ** 2)) / spread)
    centred = got - got.mean(), expected - expected.mean()
    norms = float(np.linalg.norm(centred[0]) * np.linalg.norm(centred[1]))
    return error, float(centred[0] @ centred[1] / norms) if norms > 0 else 0.0


# Measured on the int8 exports of tests/test_lowrank.py and tests/test_prune.py (PyTorch, ONNX Runtime, OpenVINO) on
# an AVX-512 VNNI EPYC, and as if without VNNI (ONNX Runtime's 7-bit weights, ONEDNN_MAX_CPU_ISA=AVX512_CORE for
# OpenVINO), each on 24 sentences after calibrating on 24 others: errors 0.017-0.112 of the spread, correlations
# 0.994 or more. Zeros, or the logits at twice their size, are 1 or more of the spread away, at half their size 0.5 or
# more; the same fp32 models with every weight matrix 0.8 or 1.25 times what it is, 0.38 to 0.88.
INT8_ERROR, INT8_CORRELATION = 0.35, 0.95


def int8_logits_follow(got: Any, expected: Any) -> bool:
    """Whether int8 logits ``got`` follow the fp32 ``expected``: within :data:`INT8_ERROR` of their spread and
    correlated above :data:`INT8_CORRELATION` (see :func:`logit_error`)."""
    error, correlation = logit_error(got, expected)
    return error < INT8_ERROR and correlation > INT8_CORRELATION


def assert_int8_logits_follow(got: Any, expected: Any, what: object = "") -> None:
    """:func:`int8_logits_follow`, and the check shown to have teeth on these very logits: an export that returned
    zeros, or every logit at half or twice its size, fails it."""
    error, correlation = logit_error(got, expected)
    assert int8_logits_follow(got, expected), \
        f"{what}: int8 logits {error:.3f} of the fp32 spread away, correlation {correlation:.4f}"
    expected = np.asarray(expected, dtype=np.float64)
    for wrong in (np.zeros_like(expected), 0.5 * expected, 2 * expected):
        assert not int8_logits_follow(wrong, expected), f"{what}: the check would pass wrong logits"


def mis_scaled(model: torch.nn.Module, factor: float = 1.25) -> torch.nn.Module:
    """A copy of ``model`` with every linear layer's weight ``factor`` times what it is (what an export that
    mis-scaled its weights would compute)."""
    import copy

    wrong = copy.deepcopy(model)
    with torch.no_grad():
        for module in wrong.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.mul_(factor)
    return wrong


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
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=args, timeout=HANG_GUARD * 1000)
        try:
            page = browser.new_page()
            page.set_default_timeout(HANG_GUARD * 1000)   # playwright counts in ms
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


def cluster_processes(token: str, root: Path) -> list[int]:
    """The processes of a Ray cluster a test started (tests/conftest.py ``ray_cluster``): those whose environment
    holds its token, or that hold a file of its temporary directory ``root`` open (Ray's agents drop the token from
    their environment)."""
    found = []
    for process in Path("/proc").glob("[0-9]*"):
        try:
            mine = f"RAY_AUTH_TOKEN={token}".encode() in (process / "environ").read_bytes().split(b"\0") or any(
                os.readlink(fd).startswith(str(root)) for fd in (process / "fd").iterdir())
        except OSError:   # ended meanwhile, or not ours to read
            continue
        if mine and int(process.name) != os.getpid():
            found.append(int(process.name))
    return found

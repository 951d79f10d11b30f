"""``--precision bf16`` is applied: the linear layers compute in bf16 during the student's training steps.

The checks read dtypes, not numbers: under autocast a Linear's output is bf16 on every CPU (emulated where the
CPU has no bf16 units), so they hold on AVX2 and AVX-512 machines alike, and a run that ignored autocast (or
never passed the flag down to the training loop) fails them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from helpers import HANG_GUARD, REPO, make_tiny_teacher, padded_batch, tiny_config, write_tiny_csv
from torch import nn

from compress.models.encoder import Encoder
from compress.teachers.finetune import hard_label_loss
from compress.training import TrainConfig, train_stage


@contextmanager
def linear_output_dtypes(training_only: bool = True) -> Iterator[Counter]:
    """Counts, by dtype, the outputs of every nn.Linear called in training mode with gradients on (training
    steps; evaluation runs in eval mode under no_grad and is left out), or of every call (``training_only`` off)."""
    seen: Counter = Counter()

    def hook(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        if isinstance(module, nn.Linear) and (not training_only or (module.training and torch.is_grad_enabled())):
            seen[output.dtype] += 1

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


@pytest.mark.parametrize(("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_a_training_step_runs_its_forward_pass_in_the_precision_asked(precision, dtype):
    torch.manual_seed(0)
    model = Encoder(tiny_config(num_labels=2))
    batch = {**padded_batch(), "labels": torch.tensor([0, 1, 0])}
    config = TrainConfig(epochs=1, batch_size=3, lr=1e-3, precision=precision)
    with linear_output_dtypes() as seen:
        train_stage(model, hard_label_loss, lambda epoch: [batch, batch], lambda: [batch], config,
                    device=torch.device("cpu"), show_progress=False)
    linears = sum(isinstance(m, nn.Linear) for m in model.modules())
    assert set(seen) == {dtype} and seen[dtype] == 2 * linears  # every Linear, both steps
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # weights and their updates stay fp32


# The real CLI in a fresh process, with the same hook installed before the run starts; the counts go to a file.
_HOOKED_CLI = """
import json, sys
from collections import Counter
import torch
seen = Counter()
def hook(module, args, output):
    if isinstance(module, torch.nn.Linear) and module.training and torch.is_grad_enabled():
        seen[str(output.dtype)] += 1
torch.nn.modules.module.register_module_forward_hook(hook)
record, sys.argv = sys.argv[1], ["compress", *sys.argv[2:]]
from compress.cli.app import main
try:
    main()
finally:
    open(record, "w").write(json.dumps(seen))
"""


def _hooked_run(root, teacher, csv, precision: str) -> dict[str, int]:
    record = root / f"dtypes-{precision}.json"
    args = ["run", "distilbert", "--teacher", str(teacher), "--dataset", str(csv), "--out", str(root / precision),
            "--precision", precision, "--epochs", "1", "--batch-size", "8", "--lr", "1e-3", "--teacher-epochs", "2",
            "--teacher-lr", "3e-3", "--teacher-batch-size", "8", "--json"]
    env = {**os.environ, "COMPRESS_CACHE": str(root / "cache"), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", _HOOKED_CLI, str(record), *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    assert json.loads((root / precision / "config.json").read_text())["run"]["precision"] == precision
    return json.loads(record.read_text())


def test_the_run_flag_reaches_the_students_training_steps(tmp_path):
    teacher, csv = make_tiny_teacher(tmp_path / "teacher"), write_tiny_csv(tmp_path / "reviews.csv")
    # fp32 first: it fine-tunes the teacher (in fp32, whatever --precision says) and caches it, so the
    # bf16 run below trains the student only.
    fp32 = _hooked_run(tmp_path, teacher, csv, "fp32")
    assert set(fp32) == {"torch.float32"}
    bf16 = _hooked_run(tmp_path, teacher, csv, "bf16")
    assert set(bf16) == {"torch.bfloat16"}


@pytest.mark.parametrize(("flags", "native"), [("avx2 fma", False), ("avx2 avx512f avx512_bf16", True),
                                               ("avx2 amx_tile amx_bf16", True)])
def test_auto_precision_is_timed_only_where_the_cpu_computes_bf16(monkeypatch, flags, native):
    """``--precision auto`` (the default of a run and of a comparison) reads the CPU's flags (faked here: the rule,
    not this machine): where bf16 would be emulated a run trains in fp32 without timing anything; where the CPU
    computes bf16 the run keeps ``auto`` and each stage times both. Forward passes that are not timed (pruning's
    scoring) take bf16 there. A precision asked for by name is kept whatever the CPU."""
    from compress.bench import machine
    from compress.runs.compare_plan import CompareConfig
    from compress.runs.config import RunConfig
    from compress.training import resolve_precision, run_precision

    monkeypatch.setattr(machine, "_cpuinfo_field", lambda name: flags if name == "flags" else None)
    asked = "auto" if native else "fp32"
    assert run_precision("auto", "cpu") == asked == run_precision(CompareConfig().precision, "cpu")
    assert RunConfig(method="distilbert", precision="auto", device="cpu").precision == asked
    assert RunConfig(method="distilbert", device="cpu").precision == asked
    assert resolve_precision("auto", "cpu") == ("bf16" if native else "fp32")
    assert RunConfig(method="distilbert", precision="fp32", device="cpu").precision == "fp32"
    assert RunConfig(method="distilbert", precision="bf16", device="cpu").precision == "bf16"


def _stand_in_timer(monkeypatch) -> dict:
    """Replaces the step timer with a stand-in that answers ``state["times"]`` (set by the test before each stage:
    a CPU on which bf16 wins for one model and loses for another) and counts the measurements in ``state["calls"]``."""
    from compress import step_precision

    state: dict = {"times": None, "calls": 0}

    def timer(step, batches, device):
        state["calls"] += 1
        return state["times"]

    monkeypatch.setattr(step_precision, "time_steps", timer)
    return state


def _train_auto(hidden: int, seed: int = 0, precision: str = "auto"):
    torch.manual_seed(seed)
    model = Encoder(tiny_config(num_labels=2, hidden_size=hidden, embedding_size=hidden, ffn_size=2 * hidden))
    batch = {**padded_batch(), "labels": torch.tensor([0, 1, 0])}
    other = {**padded_batch(seed=1), "labels": torch.tensor([1, 1, 0])}
    config = TrainConfig(epochs=2, batch_size=3, lr=1e-3, precision=precision, seed=seed)
    with linear_output_dtypes() as seen:
        result = train_stage(model, hard_label_loss, lambda epoch: [batch, other], lambda: [batch], config,
                             device=torch.device("cpu"), show_progress=False, name="stand-in")
    return model, result, seen


def test_auto_trains_each_model_in_the_precision_its_own_steps_measured_faster(monkeypatch, tmp_path):
    """Per model, not per machine: with the step times of the AMX Xeon in benchmarks/training_speed.py (pruning's
    recovery 356 ms fp32 / 473 ms bf16, distilbert 226 / 182), one model trains in fp32 and the other in bf16, and
    each stage records both times. The choice is cached per shape: another seed of the same shape trains in the
    same precision without timing again; a damaged entry is timed again."""
    from compress.step_precision import pick

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    state = _stand_in_timer(monkeypatch)
    state["times"] = {"fp32": 356.0, "bf16": 473.0}
    _, narrow, seen = _train_auto(hidden=32)
    assert (narrow.precision, narrow.step_ms, set(seen)) == ("fp32", state["times"], {torch.float32})
    state["times"] = {"fp32": 226.0, "bf16": 182.0}
    _, wide, seen = _train_auto(hidden=48)
    assert (wide.precision, wide.step_ms, set(seen)) == ("bf16", state["times"], {torch.bfloat16})
    assert state["calls"] == 2
    _, again, seen = _train_auto(hidden=32, seed=1)   # bf16 would win now, but the shape's choice is cached
    assert (again.precision, again.step_ms, set(seen), state["calls"]) == ("fp32", narrow.step_ms, {torch.float32}, 2)
    for entry in (tmp_path / "cache" / "step-precision").iterdir():
        entry.write_text("{not json")
    _, retimed, _ = _train_auto(hidden=32, seed=2)
    assert (retimed.precision, state["calls"]) == ("bf16", 3)
    # bf16 must save at least 5% of a step: fp32's exact arithmetic is worth more than less
    assert pick({"fp32": 100.0, "bf16": 96.0}) == "fp32" and pick({"fp32": 100.0, "bf16": 95.0}) == "bf16"
    # on a GPU fp16 is weighed too: it must save 5% of bf16's step where bf16 was chosen, of fp32's where it was not
    assert pick({"fp32": 100.0, "bf16": 60.0, "fp16": 58.0}) == "bf16"
    assert pick({"fp32": 100.0, "bf16": 60.0, "fp16": 57.0}) == "fp16"
    assert pick({"fp32": 100.0, "bf16": 99.0, "fp16": 94.0}) == "fp16"
    assert pick({"fp32": 47.0, "bf16": 1071.0, "fp16": 1093.0}) == "fp32"
    # a precision asked for by name is not timed
    _, forced, _ = _train_auto(hidden=64, precision="fp32")
    assert (forced.precision, forced.step_ms, state["calls"]) == ("fp32", None, 3)


def test_timing_the_precisions_leaves_the_training_as_it_was(monkeypatch, tmp_path):
    """The real timer runs forward and backward passes in both precisions before the stage trains; the model, its
    gradients and the random generators (dropout) are restored, so the stage trains exactly as one asked for the
    precision it chose."""
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    timed, result, _ = _train_auto(hidden=32)
    assert result.precision in ("fp32", "bf16") and set(result.step_ms) == {"fp32", "bf16"}
    assert all(ms > 0 for ms in result.step_ms.values())
    plain, _, _ = _train_auto(hidden=32, precision=result.precision)
    for (name, a), b in zip(timed.state_dict().items(), plain.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize(("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_pruning_scores_and_draws_its_curve_in_the_runs_precision(tmp_path, precision, dtype):
    """Pruning's importance scores and head-importance curve are forward passes of the run: in its precision."""
    from compress.data.batching import tokenize_task
    from compress.data.load import load_task
    from compress.models.checkpoints import load_encoder
    from compress.registry import Context, get_method
    from compress.teachers.registry import load_tokenizer
    from compress.train_config import TrainSettings

    teacher = make_tiny_teacher(tmp_path / "teacher")
    task = load_task(str(write_tiny_csv(tmp_path / "r.csv")))
    data = tokenize_task(task, load_tokenizer(str(teacher)), cache=False)
    model = load_encoder(teacher, num_labels=task.num_labels).model
    prune = get_method("prune")
    options = prune.make_options({"recovery_epochs": 0, "scoring_examples": 16})
    with linear_output_dtypes(training_only=False) as seen:
        made = prune.apply(model, options, Context(data=data, train=TrainSettings(precision=precision)))
    assert set(seen) == {dtype} and made.details.head_curve is not None

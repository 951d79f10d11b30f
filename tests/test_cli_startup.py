"""Start-up of the command line: help and usage errors answer without importing the heavy stack (torch alone
takes seconds of CPU), and a Ctrl-C at any moment after the entry point starts is one line and exit 130.

Deterministic: what is asserted is which modules were imported, never how long anything took.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import HANG_GUARD, REPO, make_tiny_teacher, write_tiny_csv

from compress.registry import names

HEAVY = ("torch", "transformers", "datasets", "onnxruntime", "sklearn", "matplotlib", "ray")

# The console script's entry point, called as `compress ARGS` would call it; then which heavy modules it imported.
PROBE = f"""
import json, sys
sys.argv = ["compress", *sys.argv[1:]]
from compress.cli.app import main
try:
    main()
    code = 0
except SystemExit as e:
    code = e.code
print("PROBE " + json.dumps({{"code": code, "imported": [m for m in {HEAVY!r} if m in sys.modules]}}), file=sys.stderr)
"""

HELP = [
    ["--help"], ["run", "--help"], ["compare", "--help"], ["report", "--help"], ["explain", "--help"],
    ["pretrain", "--help"], ["teachers", "--help"], ["teachers", "verify", "--help"],
    ["teachers", "finetune", "--help"], ["teacher", "finetune", "--help"], ["data", "--help"],
    ["data", "list", "--help"], ["data", "show", "--help"],
]
USAGE_ERRORS = [["run", "albert", "--no-such-option"], ["no-such-command"], ["run"]]
# A method, pipeline or option that cannot be: refused by the registry and the options alone, so a typo is answered
# at once.
LIGHT_REFUSALS = [["run", "pruning"], ["run", "int8+distilbert"], ["run", "distilbert", "--then", "albert"],
                  ["run", "distilbert[width=3]"], ["run", "distilbert", "--sharing", "all"],
                  ["run", "distilbert", "--target", "runs/x"], ["run", "albert[sharing=all"],
                  ["run", "lowrank", "--keep", "1.5"], ["pretrain", "--objective", "mlm+"],
                  ["pretrain", "--mlm-weight", "0"],
                  # the run's own settings (RunConfig) and a quantization's options, refused by their values
                  ["run", "distilbert", "--precision", "fp8"], ["run", "distilbert", "--checkpoint-every", "-1"],
                  ["run", "distilbert", "--speed-device", "tpu"], ["run", "distilbert", "--device", "tpu"],
                  ["run", "distilbert", "--precision", "fp16", "--device", "cpu"],
                  ["run", "int8", "--backend", "tvm"], ["run", "int8", "--choose-by", "speed"],
                  ["run", "int8", "--target", "no/such/run"],
                  # a comparison's methods and settings (compress.runs.compare_plan)
                  ["compare", "--methods", "nosuch"], ["compare", "--methods", "int8[backend=tvm]"],
                  ["compare", "--seeds", "x"], ["compare", "--precision", "fp8"], ["compare", "--repeats", "0"],
                  ["compare", "--methods", "int8", "--epochs", "0"],
                  # a recipe, transfer text, learning-rate schedule or count of copies that cannot be
                  ["run", "distilbert", "--recipe", "slow"], ["run", "distilbert", "--transfer-text", "no/such.txt"],
                  ["run", "distilbert", "--decay", "exp"], ["run", "distilbert", "--warmup", "1.5"],
                  ["run", "tinybert", "--augment", "-1"], ["compare", "--methods", "int8", "--recipe", "slow"],
                  # a directory that is no run to answer with
                  ["predict", "no/such/run", "a film"], ["predict", "tests", "a film"]]
# `compress cache`: a prune without a rule or with a value that cannot be, a clear without --yes
LIGHT_REFUSALS += [["cache", "prune"], ["cache", "prune", "--older-than", "soon"],
                   ["cache", "prune", "--max-size", "-3"], ["cache", "clear"]]
HELP += [["cache", "--help"], ["cache", "prune", "--help"]]


def _env(**more: str) -> dict[str, str]:
    return {**os.environ, "COLUMNS": "400", **more}


def _probe(args: list[str]) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=REPO, env=_env(),
                          timeout=HANG_GUARD)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("PROBE "), done.stderr
    return json.loads(last.removeprefix("PROBE ")), done.stdout


@pytest.mark.parametrize("args", HELP, ids=" ".join)
def test_help_imports_no_heavy_library(args):
    result, out = _probe(args)
    assert result == {"code": 0, "imported": []}
    assert "Usage:" in out


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_a_usage_error_imports_no_heavy_library(args):
    assert _probe(args)[0] == {"code": 2, "imported": []}


@pytest.mark.parametrize("args", LIGHT_REFUSALS, ids=" ".join)
def test_a_bad_method_pipeline_or_option_is_refused_before_any_heavy_library(args):
    result, _ = _probe(args)
    assert result == {"code": 2, "imported": []}


@pytest.mark.parametrize("args", [[], ["data"]], ids=lambda a: " ".join(["compress", *a]))
def test_a_group_called_without_its_command_prints_its_help_and_no_empty_error(args):
    done = subprocess.run([sys.executable, "-m", "compress", *args], capture_output=True, text=True, cwd=REPO,
                          env=_env(), timeout=HANG_GUARD)
    assert done.returncode == 2 and "Usage:" in done.stdout
    assert done.stderr == ""   # it printed "error:  (see `compress data --help`)" after the help


def test_python_m_compress_help_imports_no_heavy_library():
    # The other way in (compress/__main__.py), read from the interpreter's own import log.
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "compress", "--help"], capture_output=True,
                          text=True, cwd=REPO, env=_env(), timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "compress.cli.run" in imported   # the log was read: the command modules are in it
    assert not imported & set(HEAVY)


def test_run_help_names_every_registered_method():
    out = " ".join(_probe(["run", "--help"])[1].split())
    students = re.search(r"Train a student \(([^)]*)\)", out)
    transforms = re.search(r"transform a model \(([^)]*)\)", out)
    assert students and transforms, out
    assert students.group(1).split(", ") == names("student")
    assert transforms.group(1).split(", ") == names("transform")
    assert {"prune", "prune-vocab"} <= set(names("transform"))
    assert "albert[sharing=attention,embedding_size=256]+int8" in out   # brackets survive rich's markup


# --- Ctrl-C ------------------------------------------------------------------------------------------------


def _handler_installed(pid: int) -> bool:
    """Whether the process catches SIGTERM: Python does not by default, compress's entry point does (it installs
    its SIGINT and SIGTERM handling first thing), so this marks the moment the entry point started."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)$", status, re.M).group(1), 16)
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def _torch_loaded(pid: int) -> bool:
    return re.search(r"libtorch|/torch/_C", Path(f"/proc/{pid}/maps").read_text()) is not None


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("startup")
    return {"teacher": make_tiny_teacher(root / "teacher"), "csv": write_tiny_csv(root / "reviews.csv"),
            "root": root}


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the signal mask from /proc (Linux)")
@pytest.mark.parametrize("delay", [0.0, 0.3, 1.0])
def test_ctrl_c_at_any_moment_is_one_line_and_exit_130(tiny_run, delay):
    # 0 s after the entry point starts: during the imports of typer and rich; 0.3 s and 1 s: during the imports of
    # the library (or, on a fast machine, the teacher's fine-tuning). Before the entry point runs, only the
    # interpreter's own start-up (its `site` module) can be interrupted, which no code of ours can change.
    root = tiny_run["root"]
    cmd = [sys.executable, "-m", "compress", "run", "albert", "--teacher", str(tiny_run["teacher"]),
           "--dataset", str(tiny_run["csv"]), "--out", str(root / f"run-{delay}")]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root,
                             env=_env(COMPRESS_CACHE=str(root / "cache")))
    try:
        while not _handler_installed(child.pid):
            assert child.poll() is None, child.communicate()
            time.sleep(0.001)
        assert not _torch_loaded(child.pid)   # the handler was in place before the heavy imports began
        time.sleep(delay)
        assert child.poll() is None, "the run ended before it could be interrupted"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=HANG_GUARD)
    finally:
        child.kill()
    lines = [line for line in err.splitlines() if line.strip()]
    assert child.returncode == 130, err
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("error: interrupted"), err
    assert not (root / f"run-{delay}").exists()

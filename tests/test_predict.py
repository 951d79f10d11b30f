"""`compress predict`, `compress.load` and `compress export`: a run's own model answers its test split as the run
recorded, on the runtime it was measured on, and so does its exported folder without compress; bad input is refused in
one line before the model loads."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import HANG_GUARD, make_tiny_teacher, run_cli, write_tiny_csv

import compress
from compress.data.load import load_task
from compress.predictions import load_predictions

TRAINING = ("--epochs", "2", "--batch-size", "8", "--lr", "1e-3", "--teacher-epochs", "8", "--teacher-lr", "3e-3",
            "--teacher-batch-size", "8", "--recipe", "fast")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A distilled student, its pruned model and that model's int8 (ONNX Runtime) and int4 artefacts."""
    root = tmp_path_factory.mktemp("predict")
    env = {"COMPRESS_CACHE": str(root / "cache")}
    teacher, csv = make_tiny_teacher(root / "teacher"), write_tiny_csv(root / "reviews.csv")
    done = run_cli("run", "distilbert+prune+int8[backend=onnxruntime]", "--teacher", str(teacher), "--dataset",
                   str(csv), "--out", str(root / "chain"), "--keep-heads", "0.5", "--keep-ffn", "0.25",
                   "--recovery-epochs", "1", *TRAINING, env=env)
    assert done.returncode == 0, done.stderr
    done = run_cli("run", "int4[group_size=16,backend=onnxruntime]", "--target", str(root / "chain-prune"),
                   "--out", str(root / "int4"), env=env)
    assert done.returncode == 0, done.stderr
    test = load_task(csv).splits["test"]
    return {"root": root, "env": env, "texts": list(test["text"]),
            "dirs": {"student": root / "chain", "pruned": root / "chain-prune", "int8": root / "chain-prune-int8",
                     "int4": root / "int4"}}


@pytest.mark.parametrize("made", ["student", "pruned", "int8", "int4"])
def test_the_loaded_model_answers_the_test_split_as_the_run_recorded(runs, made):
    """One sentence at a time (as a quantized model is scored) the logits are the recorded ones; in batches of 32 a
    float model's too (its padding is masked), and the answers are the recorded answers either way."""
    run_dir = runs["dirs"][made]
    model = compress.load(run_dir, threads=1)
    recorded = load_predictions(run_dir, model.metrics.predictions)
    assert model.backend == ("onnxruntime" if made in ("int8", "int4") else "torch")
    alone = model.logits(runs["texts"], batch_size=1)
    np.testing.assert_allclose(alone, recorded.logits, rtol=0, atol=1e-5)
    batched = model.logits(runs["texts"], batch_size=32)
    if made in ("student", "pruned"):
        np.testing.assert_allclose(batched, recorded.logits, rtol=0, atol=1e-5)
    answers = model.predict(runs["texts"], batch_size=1)
    names = model.label_names
    assert names == ["neg", "pos"]
    assert [a.label for a in answers] == [names[i] for i in recorded.outputs]
    # each class's probability is the softmax of the recorded logits, computed here independently
    expected = np.exp(recorded.logits) / np.exp(recorded.logits).sum(-1, keepdims=True)
    np.testing.assert_allclose([[a.probabilities[n] for n in names] for a in answers], expected, atol=1e-5)
    assert model(runs["texts"][0]) == [{"label": answers[0].label, "score": answers[0].score}]


def test_compress_predict_reads_a_file_and_prints_json_answers(runs, tmp_path):
    """The real CLI on the int8 artefact, the test texts from a file: every answer the recorded one."""
    run_dir = runs["dirs"]["int8"]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(runs["texts"]) + "\n")
    done = run_cli("predict", str(run_dir), "--file", str(texts), "--batch-size", "1", "--json", env=runs["env"])
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    record = json.loads((run_dir / "metrics.json").read_text())
    recorded = load_predictions(run_dir, record["predictions"])
    assert [a["text"] for a in answers] == runs["texts"]
    assert [a["label"] for a in answers] == [record["dataset"]["label_names"][i] for i in recorded.outputs]
    table = run_cli("predict", str(run_dir), runs["texts"][0], env=runs["env"])
    assert table.returncode == 0 and answers[0]["label"] in table.stdout, table.stderr


def test_bad_input_is_refused_in_one_line_before_the_model_loads(runs, tmp_path):
    student = runs["dirs"]["student"]
    damaged = tmp_path / "damaged"
    shutil.copytree(student, damaged)
    weights = damaged / "student" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\x00")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    cases = [((str(tmp_path), "a film"), "is not a finished run of compress"),
             ((str(tmp_path / "absent"), "a film"), "is not a directory"),
             ((str(damaged), "a film"), "fails its checksum"),
             ((str(student), "a film", "--pair", "another"), "has no text pairs"),
             ((str(student), "--file", str(empty)), "is empty"),
             ((str(student), "a film", "--batch-size", "0"), "--batch-size must be at least 1")]
    for args, expected in cases:
        done = run_cli("predict", *args, env=runs["env"])
        assert done.returncode == 2 and expected in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)


# Run in a fresh, isolated interpreter: the card's code, verbatim, with the modules it must not need made unimportable,
# then its answer() on each test text alone (as the run scored a quantized model), printed as JSON.
CARD_RUNNER = r"""
import importlib.abc, json, re, sys
blocked = set(sys.argv[3].split(",")) - {""}
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"{name} may not be imported here")
sys.meta_path.insert(0, Blocked())
card = open(sys.argv[1] + "/README.md").read()
code = re.search(r"```python\n(.*?)```", card, re.S).group(1)
space = {}
exec(code, space)
texts = json.load(open(sys.argv[2]))
print(json.dumps([space["answer"]([text])[0].tolist() for text in texts]))
"""


@pytest.mark.parametrize(("made", "format", "blocked"), [
    ("int8", "onnx", "compress,torch,transformers"), ("pruned", "onnx", "compress,torch,transformers"),
    ("student", "openvino", "compress,torch,transformers"), ("student", "hf", "compress")])
def test_an_exported_folder_serves_without_compress_as_its_card_says(runs, tmp_path, made, format, blocked):
    """compress export writes the model, tokenizer, config.json and a model card whose Python, run as it stands in a
    process that cannot import compress (nor torch, but for hf), answers every test text as the run recorded."""
    run_dir = runs["dirs"][made]
    out = tmp_path / f"{made}-{format}"
    done = run_cli("export", str(run_dir), "--out", str(out), "--format", format, env=runs["env"])
    assert done.returncode == 0, done.stderr
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: ") and "model-index:" in card and "retention" in card
    record = json.loads((run_dir / "metrics.json").read_text())
    assert f"{record['student']['accuracy']:.4f}" in card
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps(runs["texts"]))
    served = subprocess.run([sys.executable, "-I", "-c", CARD_RUNNER, str(out), str(texts), blocked],
                            capture_output=True, text=True, cwd=tmp_path, timeout=HANG_GUARD)
    assert served.returncode == 0, served.stderr
    logits = np.array(json.loads(served.stdout.splitlines()[-1]))
    recorded = load_predictions(run_dir, record["predictions"])
    # A run measured on ONNX Runtime, served by it with the run's own session settings (config.json's), gives the
    # run's logits exactly; another runtime computes the same model with its own kernels
    same_runtime = format == "onnx" and record["speed"]["student"]["backend"] == "onnxruntime"
    np.testing.assert_allclose(logits, recorded.logits, rtol=0, atol=0 if same_runtime else 1e-4)
    if format != "hf":
        config = json.loads((out / "config.json").read_text())
        assert config["labels"] == ["neg", "pos"] and config["max_length"] == record["seq_len"]


def test_an_export_the_format_cannot_hold_or_onto_a_foreign_folder_is_refused(runs, tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    cases = [((str(runs["dirs"]["pruned"]), "--format", "hf"), "has a shape transformers has no class for"),
             ((str(runs["dirs"]["int4"]), "--format", "openvino"), "runs on ONNX Runtime's own operators"),
             ((str(runs["dirs"]["student"]), "--format", "tflite"), "unknown export format"),
             ((str(runs["dirs"]["student"]), "--out", str(foreign)), "exists and holds no")]
    for args, expected in cases:
        out = [] if "--out" in args else ["--out", str(tmp_path / "never")]
        done = run_cli("export", *args, *out, env=runs["env"])
        assert done.returncode == 2 and expected in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)
    assert not (tmp_path / "never").exists() and [p.name for p in foreign.iterdir()] == ["notes.txt"]

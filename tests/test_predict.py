"""`compress predict`, `compress.load` and `compress export`: a run's own model answers its test split as the run
recorded, on the runtime it was measured on, and so does its exported folder without compress; bad input is refused in
one line before the model loads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import HANG_GUARD, make_tiny_teacher, run_cli, write_tiny_csv

import compress
from compress.data.load import load_task
from compress.predictions import load_predictions

TEACHER_TRAINING = ("--teacher-epochs", "8", "--teacher-lr", "3e-3", "--teacher-batch-size", "8")
TRAINING = ("--epochs", "2", "--batch-size", "8", "--lr", "1e-3", *TEACHER_TRAINING, "--recipe", "fast")


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


# --- a run on ONNX Runtime answers without torch, transformers or datasets -------------------------------------------
LIGHT = ("torch", "transformers", "datasets")

# In a fresh interpreter: compress.load of the run, its logits on the texts one at a time and in batches of 32, the
# tokenizer it read and the heavy modules then imported, as JSON.
LOAD_RUNNER = r"""
import json, sys
import compress
model = compress.load(sys.argv[1], threads=1)
texts = json.load(open(sys.argv[2]))
alone, batched = model.logits(texts, batch_size=1), model.logits(texts, batch_size=32)
print(json.dumps({"imported": [m for m in sys.argv[3].split(",") if m in sys.modules],
                  "tokenizer": type(model.tokenizer).__name__, "alone": alone.tolist(), "batched": batched.tolist()}))
"""

# Texts whose tokens test the pipeline: accents, Chinese characters, a special token written out, control and odd
# space characters, words longer than WordPiece splits, and a text longer than any maximum length.
TRICKY = ["Héllo Wörld, naïve café!", "电影很好看 a fine film", "the [MASK] of [CLS] it [SEP]",
          "tab\there\u00a0nbsp\u200b", "x" * 150 + " ok", "", "  spaces   around  ",
          " ".join(["a gripping, funny film"] * 40)]


@pytest.fixture(scope="module")
def vocab_run(runs):
    """A ``prune-vocab+int8`` run on ONNX Runtime of the same teacher and data (its fine-tuned teacher is cached)."""
    root = runs["root"]
    done = run_cli("run", "prune-vocab+int8[backend=onnxruntime]", "--teacher", str(root / "teacher"), "--dataset",
                   str(root / "reviews.csv"), "--out", str(root / "vocab"), *TEACHER_TRAINING, env=runs["env"])
    assert done.returncode == 0, done.stderr
    return root / "vocab-int8"


@pytest.fixture(params=["int8", "vocab-int8"])
def onnx_run(request, runs, vocab_run):
    return runs["dirs"]["int8"] if request.param == "int8" else vocab_run


def test_an_onnx_runtime_run_answers_without_torch_as_the_run_recorded(runs, onnx_run, tmp_path):
    """compress.load of an ONNX Runtime int8 run (of a pruned vocabulary too), in a fresh process, imports neither
    torch, transformers nor datasets; its logits are those of the same run tokenized by transformers, one text at a
    time and in batches, and one at a time the run's recorded test logits on every test sentence."""
    from compress.inference.tokenize import TransformersTokenizer
    from compress.teachers.registry import saved_tokenizer

    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps(runs["texts"]))
    done = subprocess.run([sys.executable, "-c", LOAD_RUNNER, str(onnx_run), str(texts), ",".join(LIGHT)], check=False,
                          capture_output=True, text=True, cwd=tmp_path, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    fresh = json.loads(done.stdout.splitlines()[-1])
    assert fresh["imported"] == [] and fresh["tokenizer"] == "SavedTokenizer"
    model = compress.load(onnx_run, threads=1)
    recorded = load_predictions(onnx_run, model.metrics.predictions)
    assert len(fresh["alone"]) == len(recorded.logits) == len(runs["texts"])
    np.testing.assert_allclose(fresh["alone"], recorded.logits, rtol=0, atol=1e-5)
    model.tokenizer = TransformersTokenizer(saved_tokenizer(model.model_dir))   # the run loaded as before
    np.testing.assert_array_equal(np.float32(fresh["alone"]), model.logits(runs["texts"], batch_size=1))
    np.testing.assert_array_equal(np.float32(fresh["batched"]), model.logits(runs["texts"], batch_size=32))


def test_the_saved_tokenizer_gives_transformers_ids_for_texts_and_pairs(runs, vocab_run):
    """The tokenizer read without transformers gives the ids, attention masks and token types transformers gives, for
    the full vocabulary and a pruned one's renumbered copy, single texts and pairs, truncated or not."""
    from compress.inference.tokenize import SavedTokenizer, load_tokenizer
    from compress.teachers.registry import saved_tokenizer as transformers_tokenizer

    pairs = list(reversed(TRICKY))
    for model_dir in (runs["dirs"]["int8"] / "model", vocab_run / "model"):
        light, full = load_tokenizer(model_dir), transformers_tokenizer(model_dir)
        assert isinstance(light, SavedTokenizer) and light.pad_token_id == full.pad_token_id
        for max_length in (8, 64, 512):
            for second in (None, pairs):
                expected = full(TRICKY, second, truncation=True, max_length=max_length, return_attention_mask=True,
                                return_token_type_ids=True, verbose=False)
                assert light.features(TRICKY, second, max_length) == [
                    {k: expected[k][i] for k in ("input_ids", "attention_mask", "token_type_ids")}
                    for i in range(len(TRICKY))], (model_dir, max_length, second is not None)
    pruned, whole = (load_tokenizer(d / "model").backend.get_vocab() for d in (vocab_run, runs["dirs"]["int8"]))
    assert len(pruned) < len(whole)    # the renumbered vocabulary was read


def test_a_tokenizer_transformers_would_build_otherwise_is_read_by_transformers(runs, tmp_path):
    """Where tokenizer.json alone would tokenize otherwise than transformers (settings that change its normalizer, no
    tokenizer.json, another class), the folder is read by transformers, as before."""
    from compress.inference.tokenize import TransformersTokenizer, light_unavailable, load_tokenizer

    source = runs["dirs"]["int8"] / "model"
    cases = {"cased": lambda c: c | {"do_lower_case": False}, "roberta": lambda c: c | {"tokenizer_class": "Roberta"},
             "extra token": lambda c: c | {"added_tokens_decoder": {"7": {"content": "[X]", "special": True}}}}
    for name, change in cases.items():
        folder = tmp_path / name
        shutil.copytree(source, folder)
        config = json.loads((folder / "tokenizer_config.json").read_text())
        (folder / "tokenizer_config.json").write_text(json.dumps(change(config)))
        assert light_unavailable(folder) is not None, name
    assert isinstance(load_tokenizer(tmp_path / "cased"), TransformersTokenizer)
    (tmp_path / "cased" / "tokenizer.json").unlink()
    assert "has no tokenizer.json" in light_unavailable(tmp_path / "cased")


def _imported(importtime: str) -> list[str]:
    """The modules of LIGHT that ``python -X importtime`` says were imported."""
    names = {line.rsplit("|", 1)[-1].strip() for line in importtime.splitlines() if line.startswith("import time:")}
    return sorted({name.split(".")[0] for name in names} & set(LIGHT))


def test_compress_predict_of_an_onnx_runtime_run_imports_no_torch(runs, onnx_run, tmp_path):
    """The real CLI in a fresh process, under -X importtime: a text given as an argument, and the test texts one at a
    time from a file, answered as the run recorded them, and neither torch, transformers nor datasets imported."""
    command = [sys.executable, "-X", "importtime", "-m", "compress", "predict", str(onnx_run)]
    env = {**os.environ, "COLUMNS": "200", **runs["env"]}
    one = subprocess.run([*command, runs["texts"][0]], check=False, capture_output=True, text=True, env=env,
                         timeout=HANG_GUARD)
    assert one.returncode == 0 and runs["texts"][0] in one.stdout, one.stderr[-2000:]
    assert _imported(one.stderr) == []
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(runs["texts"]) + "\n")
    every = subprocess.run([*command, "--file", str(texts), "--batch-size", "1", "--json"], check=False,
                           capture_output=True, text=True, env=env, timeout=HANG_GUARD)
    assert every.returncode == 0 and _imported(every.stderr) == [], every.stderr[-2000:]
    answers = json.loads(every.stdout)
    record = json.loads((onnx_run / "metrics.json").read_text())
    recorded = load_predictions(onnx_run, record["predictions"])
    names = record["dataset"]["label_names"]
    assert [a["label"] for a in answers] == [names[i] for i in recorded.outputs]
    expected = np.exp(recorded.logits) / np.exp(recorded.logits).sum(-1, keepdims=True)
    np.testing.assert_allclose([[a["probabilities"][n] for n in names] for a in answers], expected, atol=1e-5)

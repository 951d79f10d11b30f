"""`compress run` end to end on a tiny teacher and a tiny CSV, through the real CLI."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import make_tiny_teacher, offline_hub_env, run_cli, write_tiny_csv
from transformers import AutoModelForSequenceClassification

from compress.device import fp8_unavailable
from compress.models.checkpoints import load_encoder
from compress.ownership import MARKER
from compress.predictions import FILES, PREDICTIONS_FILE, load_predictions
from compress.registry import all_methods, families, names
from compress.training import run_precision

COMMON = ("--epochs", "2", "--batch-size", "8", "--lr", "1e-3",
          "--teacher-epochs", "8", "--teacher-lr", "3e-3", "--teacher-batch-size", "8")
METHOD_FLAGS = {
    "albert": ("--embedding-size", "16", "--no-dropout"),
    "distilbert": (),
    # TinyBERT's prediction stage learns from soft targets alone, and the tiny teacher's are nearly uniform (its
    # best epoch is the first with every dev answer right, not a confident one): with COMMON's 2 epochs at 1e-3
    # the student stayed at the majority class (seeds 1, 2, 3, 13); with 6 at 3e-3 it scored 1.0 on each.
    # These come after COMMON, and the last value of an option wins.
    "tinybert": ("--layers", "1", "--hidden-size", "16", "--heads", "4", "--ffn-size", "32", "--epochs", "6",
                 "--lr", "3e-3"),
    # the width kept, so that transformers holds it (tests/test_run.py's width cut: test_a_cut_student_...)
    "cut": ("--layers", "1", "--ffn", "32"),   # tinybert-4 at most the teacher's: 32 wide
}
EXPECTED_LAYOUT = {"albert": "albert", "distilbert": "bert", "tinybert": "bert", "cut": "bert"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    return {"root": root, "teacher": make_tiny_teacher(root / "teacher"), "csv": write_tiny_csv(root / "reviews.csv"),
            "env": {"COMPRESS_CACHE": str(root / "cache")}}


def _majority(csv) -> float:
    """The accuracy of always answering the most frequent class of the test split."""
    from collections import Counter

    from compress.data.load import load_task

    labels = list(load_task(csv).splits["test"]["label"])
    return max(Counter(labels).values()) / len(labels)


def _run(tiny, method, *extra, out=None):
    out = out or tiny["root"] / f"run-{method}"
    return out, run_cli("run", method, "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]),
                        "--out", str(out), *COMMON, *extra, env=tiny["env"])


@pytest.mark.parametrize("method", names("student"))
def test_run_writes_a_complete_run_directory(tiny, method):
    assert method in METHOD_FLAGS and method in EXPECTED_LAYOUT, \
        f"tests/test_run.py: give the student {method} its tiny flags (METHOD_FLAGS) and layout (EXPECTED_LAYOUT)"
    out, done = _run(tiny, method, *METHOD_FLAGS[method], "--json")
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} == {"config.json", "student", "metrics.json", "manifest.json", "log.jsonl",
                                              "report.md", PREDICTIONS_FILE, FILES["dev"], FILES["teacher_test"],
                                              FILES["teacher_dev"], MARKER}

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics == {k: v for k, v in json.loads(done.stdout).items() if k != "directory"}
    # the test predictions it kept are the ones its accuracy was computed from, one per test example; likewise dev
    kept = load_predictions(out, metrics["predictions"])
    assert len(kept.labels) == metrics["dataset"]["sizes"]["test"]
    assert kept.correct.mean() == metrics["student"]["accuracy"]
    dev = load_predictions(out, metrics["dev_predictions"], "dev")
    assert len(dev.labels) == metrics["dataset"]["sizes"]["dev"]
    assert dev.correct.mean() == metrics["student"]["dev_accuracy"]
    assert metrics["method"] == method
    # the default recipe: every epoch of every stage learned from the training sentences and two of the four
    # augmented copies of each (albert's one, its own point on the curve), and says how long it trained
    train, per_epoch = metrics["dataset"]["sizes"]["train"], 1 if method == "albert" else 2
    assert [st["examples_per_epoch"] for st in metrics["stages"]] == [(1 + per_epoch) * train] * len(metrics["stages"])
    assert all(0 < st["epochs"] <= st["max_epochs"] and st["steps"] >= st["epochs"] for st in metrics["stages"])
    t, s = metrics["teacher"], metrics["student"]
    assert t["params"] > s["params"] > 0
    assert metrics["retention"] == pytest.approx(s["accuracy"] / t["accuracy"])
    assert t["accuracy"] >= 0.8  # the tiny teacher learns the tiny task
    # ... and so does the student: above always answering the test split's most frequent class, by a margin.
    assert s["accuracy"] >= _majority(tiny["csv"]) + 0.3
    assert s["size_bytes"] == sum(p.stat().st_size for p in (out / "student").glob("*.safetensors"))
    assert s["layout"] == EXPECTED_LAYOUT[method]

    config = json.loads((out / "config.json").read_text())
    assert config["run"]["method"] == method and config["recipe"]["method"] == method
    assert config["run"]["precision"] == run_precision("auto", "auto")   # the default, as this CPU resolves it
    for stage in metrics["stages"]:   # what each stage trained in; timed under auto, fp32 where bf16 is emulated
        assert stage["precision"] in ("fp32", "bf16") and ("step_ms" in stage) == (config["run"]["precision"] == "auto")
    # the run's time by phase: its stages' training and the rest, each part of the whole
    phases = metrics["phases"]
    assert set(phases) == {"training", "making", "evaluating", "timing", "saving"}
    assert phases["training"] == pytest.approx(sum(stage["seconds"] for stage in metrics["stages"]), abs=0.11)
    assert phases["training"] > 0 and min(phases.values()) >= 0 and phases["training"] + phases["making"] <= \
        metrics["seconds"] + 0.11
    steps = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert any(r.get("event") == "dev" for r in steps) and all("stage" in r for r in steps)
    _check_retentions(out, metrics)

    # The exported student reloads in transformers with the logits of our encoder.
    ours = load_encoder(out / "student").model
    theirs = AutoModelForSequenceClassification.from_pretrained(out / "student").eval()
    ids = torch.tensor([[101, 2023, 2143, 2001, 2307, 102, 0], [101, 6659, 102, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        torch.testing.assert_close(theirs(input_ids=ids, attention_mask=mask).logits,
                                   ours(ids, mask).logits, atol=1e-5, rtol=0)


def _check_retentions(out, metrics) -> None:
    """The run kept the teacher's test and dev predictions, its retention on each split is the ratio of the two
    accuracies on those sentences, inside its interval, and report.md states both intervals."""
    report = (out / "report.md").read_text()
    for split, student_file in (("test", "test"), ("dev", "dev")):
        teacher = load_predictions(out, metrics["teacher_predictions"][split], f"teacher_{split}")
        student = load_predictions(out, metrics["predictions" if split == "test" else "dev_predictions"], student_file)
        assert (teacher.labels == student.labels).all()
        kept = metrics["retentions"][split]
        assert kept["estimate"] == pytest.approx(student.correct.mean() / teacher.correct.mean())
        assert kept["low"] <= kept["estimate"] <= kept["high"] and kept["level"] == 0.95
        assert f"{kept['low']:.1%}-{kept['high']:.1%}".replace("%-", "-") in report
    assert metrics["retentions"]["test"]["estimate"] == pytest.approx(metrics["retention"])
    sizes = metrics["dataset"]["sizes"]
    assert f"on the {sizes['test']:,} test sentences, 95% interval" in report
    assert f"On the {sizes['dev']:,} dev sentences: {metrics['retentions']['dev']['estimate']:.1%}" in report


def test_distilbert_student_starts_from_every_other_teacher_layer(tiny):
    out, done = _run(tiny, "distilbert", "--epochs", "1", "--lr", "1e-12",  # lr ~ 0: weights stay as built
                     out=tiny["root"] / "run-distilbert-init")
    assert done.returncode == 0, done.stderr
    teacher_dir = json.loads((out / "config.json").read_text())["teacher_dir"]
    teacher = load_encoder(teacher_dir).model
    student = load_encoder(out / "student").model
    assert student.config.num_layers == 1  # half of the tiny teacher's 2 layers
    torch.testing.assert_close(student.attention[0].query.weight, teacher.attention[1].query.weight, atol=1e-6, rtol=0)
    torch.testing.assert_close(student.embeddings.word_embeddings.weight,
                               teacher.embeddings.word_embeddings.weight, atol=1e-6, rtol=0)


def test_a_cut_student_starts_from_the_teachers_kept_weights_and_learns_from_what_it_was_cut_from(tiny):
    out, done = _run(tiny, "cut", "--layers", "1", "--width", "24", "--ffn", "40", "--heads", "2", "--epochs", "1",
                     "--lr", "1e-12", out=tiny["root"] / "run-cut-init")   # lr ~ 0: weights stay as cut
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text())
    teacher = load_encoder(config["teacher_dir"]).model
    student = load_encoder(out / "student").model
    shape = student.config
    assert (shape.num_layers, shape.hidden_size, shape.ffn_size, shape.num_heads, shape.head_size) == (1, 24, 40, 2, 8)
    recipe = config["recipe"]
    assert [stage["name"] for stage in recipe["stages"]] == ["intermediate", "prediction"]
    (layer,), channels = recipe["layer_map"]["layers"], recipe["channels"]
    assert len(channels) == 24 and channels == sorted(set(channels))
    # every weight is the teacher's at what was kept: the layer the map names, the channels the recipe names
    c = torch.tensor(channels)
    torch.testing.assert_close(student.embeddings.word_embeddings.weight,
                               teacher.embeddings.word_embeddings.weight[:, c], atol=1e-6, rtol=0)
    kept_ffn = student.ffn[0].intermediate.weight
    source = teacher.ffn[layer - 1].intermediate.weight[:, c]
    assert all(any(torch.allclose(row, other, atol=1e-6) for other in source) for row in kept_ffn)
    torch.testing.assert_close(student.ffn[0].layer_norm.weight, teacher.ffn[layer - 1].layer_norm.weight[c],
                               atol=1e-6, rtol=0)
    exported = run_cli("export", str(out), "--format", "hf", "--out", str(tiny["root"] / "cut-hf"), env=tiny["env"])
    assert exported.returncode == 2 and "has a shape transformers has no class for" in exported.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("pruning",), f"known: {', '.join(names())}"),
        (("cut", "--width", "33"), "a cut keeps from 1 to the teacher's 32 width, not 33"),
        # 0 is the options' own stand-in for the shape's part; given, it is a mistake, not the default
        (("cut", "--layers", "0"), "--layers 0: give 1 or more, or leave it out for the shape's"),
        (("cut", "--width", "0"), "--width 0: give 1 or more, or leave it out for the shape's"),
        (("cut[ffn=-4]",), "--ffn -4: give 1 or more, or leave it out for the shape's"),
        (("cut", "--set", "num_heads=0"), "--heads 0: give 1 or more, or leave it out for every head"),
        (("cut", "--shape", "tinybert-9"), "unknown shape 'tinybert-9'"),
        (("cut", "--layer-map", "1"), "--layer-map does not apply to cut"),
        (("albert", "--embedding-size", "64"), "embedding_size (64) must not exceed"),
        (("albert", "--embedding-size", "16", "--groups", "3"), "groups (3) must divide"),
        (("albert", "--embedding-size", "16", "--sharing", "layers"), "sharing must be one of"),
        (("albert", "--embedding-size", "16", "--intermediate-epochs", "-1"), "intermediate_epochs must be 0"),
        (("distilbert", "--layers", "5"), "between 1 and the teacher's 2"),
        (("tinybert",), "no wider and no deeper than its teacher"),
        (("distilbert", "--sharing", "all"), "--sharing do(es) not apply to distilbert"),
        (("distilbert", "--layer-map", "1,2,3"), "invalid layer map"),
        (("distilbert", "--then", "albert"), f"--then takes a {families(all_methods('transform'))} method"),
        (("bf16", "--backend", "onnxruntime"), "bf16 runs on torch or openvino, not onnxruntime"),
        (("int8", "--backend", "tvm"), "unknown backend 'tvm'"),
        (("int8", "--sharing", "all"), "int8 trains nothing"),
        (("int8", "--target", "no/such/run"), "--target must be 'teacher' or a run directory"),
        (("distilbert", "--then", "bf16", "--backend", "onnxruntime"),
         "bf16 runs on torch or openvino, not onnxruntime"),
        (("albert", "--backend", "torch"), "--target and --backend are for quantization"),
        (("distilbert", "--precision", "fp16", "--device", "cpu"), "--precision fp16 trains on CUDA only"),
        (("distilbert", "--speed-device", "tpu"), "unknown --speed-device 'tpu'; use one of cpu, cuda"),
        *([] if torch.cuda.is_available() else [
            (("distilbert", "--speed-device", "cuda"), "--speed-device cuda was asked for but no CUDA device"),
            (("distilbert", "--device", "cuda"), "--device cuda was asked for but no CUDA device is available")]),
        (("distilbert", "--precision", "fp8"), "unknown --precision 'fp8'; use one of auto, fp32, bf16, fp16"),
        (("distilbert", "--checkpoint-every", "-1"), "--checkpoint-every must be 0 (epoch ends only) or more"),
        # Brackets in a message are printed as written, not read as rich markup.
        (("albert[sharing=all",), "cannot read the pipeline 'albert[sharing=all': expected ',' or ']'"),
    ],
)
def test_bad_input_fails_in_one_line_before_training(tiny, args, expected):
    out = tiny["root"] / "never"
    done = run_cli("run", *args, "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]),
                   "--out", str(out), env={"COMPRESS_CACHE": str(tiny["root"] / "empty-cache")})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert not out.exists()
    assert not (tiny["root"] / "empty-cache" / "teachers").exists()  # no fine-tuning started


def test_bf16_trains_on_the_cpu_and_is_recorded(tiny):
    out, done = _run(tiny, "distilbert", "--precision", "bf16", "--json", out=tiny["root"] / "run-bf16")
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "config.json").read_text())["run"]["precision"] == "bf16"
    losses = [r["loss"] for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "step" in r]
    assert sum(losses[-5:]) < sum(losses[:5])   # it learns under autocast
    assert json.loads(done.stdout)["student"]["accuracy"] >= 0.8


@pytest.mark.cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_a_run_trains_on_cuda_in_every_precision(tiny, precision):
    out, done = _run(tiny, "distilbert", "--device", "cuda", "--precision", precision, "--json",
                     out=tiny["root"] / f"run-cuda-{precision}")
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "config.json").read_text())["run"]["precision"] == precision
    printed = json.loads(done.stdout)
    assert printed["student"]["accuracy"] >= 0.8
    stage = printed["stages"][0]
    assert stage["precision"] == precision and stage["device"] == torch.cuda.get_device_name()
    assert stage["examples_per_second"] > 0 and stage["peak_memory_bytes"] > 0


@pytest.mark.cuda
@pytest.mark.parametrize("pipeline, flags", [
    ("albert", METHOD_FLAGS["albert"]), ("albert", (*METHOD_FLAGS["albert"], "--rank", "4")),
    ("tinybert", METHOD_FLAGS["tinybert"]),
    ("distilbert+prune[keep_heads=0.5,keep_ffn=0.5,recovery_epochs=1]+lowrank[recovery_epochs=1]", ())],
    ids=["albert", "albert-relaxed", "tinybert", "distilbert+prune+lowrank"])
def test_every_family_that_trains_trains_on_cuda(tiny, pipeline, flags):
    """Each student's initialisation from the teacher (the factorized embedding's fit, the relaxed deltas' SVD),
    its stages, and pruning's and low-rank factorization's scoring and recovery, on the GPU."""
    _, done = _run(tiny, pipeline, "--device", "cuda", *flags, "--json",
                     out=tiny["root"] / f"cuda-{pipeline.split('[')[0]}-{len(flags)}")
    assert done.returncode == 0, done.stderr
    steps = [json.loads(done.stdout)]
    while "chained" in steps[-1]:
        steps.append(steps[-1]["chained"])
    for step in steps:
        assert step["stages"] and all(stage["device"] == torch.cuda.get_device_name() for stage in step["stages"])
    assert steps[-1]["student"]["accuracy"] > _majority(tiny["csv"])


@pytest.mark.cuda
def test_on_cuda_auto_times_fp32_bf16_and_fp16_and_the_speed_is_the_gpus(tiny):
    """--precision auto on a GPU times a step in each precision the card computes and records them; with
    --speed-device cuda both models are timed there, and the record and report say so."""
    out, done = _run(tiny, "distilbert", "--device", "cuda", "--speed-device", "cuda", "--json",
                     out=tiny["root"] / "run-cuda-auto")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    stage = printed["stages"][0]
    assert set(stage["step_ms"]) == {"fp32", "bf16", "fp16"} and stage["precision"] in stage["step_ms"]
    gpu = torch.cuda.get_device_name()
    assert {printed["speed"][m]["device"] for m in ("teacher", "student")} == {gpu}
    assert printed["speed"]["student"]["peak_memory_bytes"] > 0
    assert f"on the GPU {gpu}" in (out / "report.md").read_text()


@pytest.mark.cuda
def test_on_a_gpu_formats_without_gpu_kernels_are_refused_and_half_precision_runs_there(tiny):
    refused = run_cli("run", "int8", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]),
                      "--speed-device", "cuda", "--out", str(tiny["root"] / "never-int8"), *COMMON[6:], env=tiny["env"])
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "has no GPU path in compress" in refused.stderr and not (tiny["root"] / "never-int8").exists()
    out = tiny["root"] / "run-bf16-gpu"
    done = run_cli("run", "bf16", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]), "--speed-device",
                   "cuda", "--json", "--out", str(out), *COMMON[6:], env=tiny["env"])
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["details"]["backend"] == "torch" and printed["speed"]["student"]["device"] == \
        torch.cuda.get_device_name()


@pytest.mark.cuda
def test_on_a_gpu_with_float8_units_fp8_is_timed_there_multiplying_in_float8(tiny):
    reason = fp8_unavailable()
    if reason:
        pytest.skip(f"fp8 has no GPU path here: {reason}")
    out = tiny["root"] / "run-fp8-gpu"
    done = run_cli("run", "fp8", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]), "--speed-device",
                   "cuda", "--json", "--out", str(out), *COMMON[6:], env=tiny["env"])
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    student = printed["speed"]["student"]
    assert student["device"] == torch.cuda.get_device_name() and student["dtype"] == "fp8"
    assert printed["student"]["accuracy"] > _majority(tiny["csv"])


def test_unreachable_teacher_fails_before_any_work(tiny, tmp_path):
    # Offline mode and an empty private cache are set before the CLI's process imports the hub.
    done = run_cli("run", "albert", "--teacher", "bert-large", "--dataset", str(tiny["csv"]),
                   "--out", str(tmp_path / "run"), env=offline_hub_env(tmp_path))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "minilm" in done.stderr
    assert "cannot get 'google-bert/bert-large-uncased' from the Hugging Face hub" in done.stderr
    assert "HF_HUB_OFFLINE is set" in done.stderr
    assert not (tmp_path / "run").exists()


def test_distillation_then_int8_writes_both_runs_and_the_chain(tiny):
    out, done = _run(tiny, "distilbert", "--then", "int8", "--threads", "1", "--json",
                     out=tiny["root"] / "run-distilbert-chained")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    chained = out.parent / f"{out.name}-int8"
    assert printed["chained"]["directory"] == str(chained)
    assert {p.name for p in chained.iterdir()} == {"config.json", "model", "metrics.json", "manifest.json", "report.md",
                                                  PREDICTIONS_FILE, FILES["dev"], FILES["teacher_test"],
                                                  FILES["teacher_dev"], MARKER}

    parent = json.loads((out / "metrics.json").read_text())
    metrics = json.loads((chained / "metrics.json").read_text())
    config = json.loads((chained / "config.json").read_text())
    assert config["parent"] == str(out) and metrics["source"]["parent"] == str(out)
    assert metrics["source"]["accuracy"] == parent["student"]["accuracy"]
    assert metrics["teacher"] == parent["teacher"]  # retention stays measured against the same teacher
    assert metrics["teacher_predictions"] == parent["teacher_predictions"]   # the same teacher answers, carried on
    _check_retentions(chained, metrics)
    q = metrics["details"]
    # auto measured every backend, scored each on dev, and kept the fastest of those keeping 99% of fp32's accuracy
    assert set(q["measured"]) == set(q["dev_accuracy"]) == {"torch", "onnxruntime", "openvino"}
    kept = [b for b, acc in q["dev_accuracy"].items() if acc >= q["min_retention"] * q["fp32_dev_accuracy"]]
    assert q["backend"] == (min(kept, key=lambda b: q["measured"][b]["latency_ms_p50"]) if kept
                            else max(q["dev_accuracy"], key=q["dev_accuracy"].get))
    assert q["inference_precision"]["openvino"] in ("f32", "bf16")  # what OpenVINO compiled for, read back
    weights = chained / "model" / json.loads((chained / "model" / "quantized.json").read_text())["weights"]
    files = [weights, weights.with_suffix(".bin")] if weights.suffix == ".xml" else [weights]  # OpenVINO: xml + bin
    assert metrics["student"]["size_bytes"] == sum(f.stat().st_size for f in files) < parent["student"]["size_bytes"]
    assert metrics["student"]["params"] == parent["student"]["params"]  # quantization keeps every parameter
    assert q["fp32_accuracy"] == pytest.approx(parent["student"]["accuracy"])
    report = (chained / "report.md").read_text()
    assert "## Quantization" in report and "## Pipeline: what each step bought" in report
    # The last step records the whole chain: every step's model as its own run measured it.
    assert [step["step"] for step in metrics["chain"]] == ["distilbert", "int8"]
    assert metrics["chain"][0] == parent["chain"][0]
    assert [step["run_dir"] for step in metrics["chain"]] == [str(out), str(chained)]
    for step, model, speed in ((metrics["chain"][0], parent["student"], parent["speed"]["student"]),
                               (metrics["chain"][1], metrics["student"], metrics["speed"]["student"])):
        assert step["params"] == model["params"] and step["size_bytes"] == model["size_bytes"]
        assert step["accuracy"] == model["accuracy"] and step["latency_ms_p50"] == speed["latency_ms_p50"]

    # The headline accuracy scores one sentence at a time; the batched figure is kept beside it.
    from compress.quantize.artefacts import load_artefact
    from compress.runs.source import run_source

    data = run_source(out).data
    model = load_artefact(chained / "model", threads=1)
    correct = [int(model({k: v.numpy() for k, v in one.items()}).argmax()) == int(one["labels"])
               for one in data.dataloader("test", batch_size=1)]
    assert metrics["student"]["accuracy"] == pytest.approx(sum(correct) / len(correct))
    assert 0 < q["batched_accuracy"] <= 1 and q["batched_size"] == 128


def test_onnx_export_of_a_run_matches_its_pytorch_logits(tiny):
    parent, done = _run(tiny, "albert", *METHOD_FLAGS["albert"], out=tiny["root"] / "run-albert-for-onnx")
    assert done.returncode == 0, done.stderr
    out = tiny["root"] / "run-albert-onnx"
    done = run_cli("run", "onnx", "--target", str(parent), "--threads", "1", "--out", str(out), env=tiny["env"])
    assert done.returncode == 0, done.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["details"]["max_abs_logit_diff"] < 1e-4
    assert metrics["details"]["prediction_agreement"] == 1.0
    assert (out / "model" / "model.onnx").is_file() and (out / "model" / "tokenizer.json").is_file()


@pytest.mark.parametrize(("method", "shape", "recipe", "masked_lm"), [
    ("tinybert", {"num_layers": 1, "hidden_size": 16, "num_heads": 4, "ffn_size": 32}, "thorough", True),
    ("albert", {"embedding_size": 8}, "default", False),
])
def test_augmentation_reads_the_pretrained_teacher_not_its_fine_tuned_copy(tiny, monkeypatch, method, shape,
                                                                            recipe, masked_lm):
    """Only the pre-trained checkpoint can hold the masked-LM head that TinyBERT's augmentation uses; both
    students that take --augment ask for the copies given, over their recipe's. The thorough recipe asks the head
    for candidates, as TinyBERT's paper does; the default takes the embedding neighbours (a head costs a forward
    pass per replaced word)."""
    from compress.runs import pipeline as runner
    from compress.runs.config import RunConfig
    from compress.students import transfer
    from compress.teachers.finetune import FinetuneConfig
    from compress.training import TrainConfig

    seen = []

    def stop(task, request, show_progress):
        seen.append((request.teacher_dir, request.copies, request.masked_lm))
        raise KeyboardInterrupt  # stop the run here: only the argument matters

    monkeypatch.setenv("COMPRESS_CACHE", tiny["env"]["COMPRESS_CACHE"])
    monkeypatch.setattr(transfer, "_unlabeled_rows", stop)
    config = RunConfig(method, teacher=str(tiny["teacher"]), dataset=str(tiny["csv"]), batch_size=8,
                       options={"augment_copies": 2, **shape}, recipe=recipe,
                       teacher_finetune=FinetuneConfig(TrainConfig(epochs=8, lr=3e-3, batch_size=8)),
                       out=str(tiny["root"] / f"run-augment-{method}"))
    with pytest.raises(KeyboardInterrupt):
        runner.run(config, show_progress=False)
    assert seen == [(tiny["teacher"], 2, masked_lm)]


def test_a_pipeline_name_gives_the_runs_of_then(tiny):
    # The README's example, at the tiny teacher's size: options inside brackets, for both steps.
    text = "albert[sharing=attention,embedding_size=8]+int8[backend=torch]"
    out, done = _run(tiny, text, "--threads", "1", "--json", out=tiny["root"] / "run-pipeline")
    assert done.returncode == 0, done.stderr
    chained = out.parent / f"{out.name}-int8"
    assert json.loads(done.stdout)["chained"]["directory"] == str(chained)
    first, second = (json.loads((d / "config.json").read_text()) for d in (out, chained))
    assert first["run"]["method"] == "albert"
    assert first["run"]["options"] == {"sharing": "attention", "embedding_size": 8}
    assert second["parent"] == str(out) and second["run"]["options"] == {"backend": "torch"}
    assert first["pipeline"] == second["pipeline"] == text
    metrics = json.loads((chained / "metrics.json").read_text())
    assert metrics["details"]["backend"] == "torch"
    config = metrics["student"]["config"]
    assert config["sharing"] == "attention" and config["embedding_size"] == 8
    assert [step["step"] for step in metrics["chain"]] == ["albert[sharing=attention,embedding_size=8]",
                                                           "int8[backend=torch]"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("int8+distilbert",), "distilbert trains a student and can only be a pipeline's first step"),
        (("distilbert+int3",), "unknown method 'int3'"),
        (("distilbert[sharing=all]+int8",), "--sharing do(es) not apply to distilbert"),
        (("distilbert+int8[embedding_size=3]",), "--embedding-size do(es) not apply to int8"),
        (("distilbert+int8", "--then", "onnx"), "onnx cannot follow int8"),
        (("albert[groups=two]",), "--groups takes an integer"),
        (("distilbert+", ), "cannot read the pipeline"),
        (("distilbert+bf16[backend=onnxruntime]",), "bf16 runs on torch or openvino, not onnxruntime"),
        (("distilbert", "--set", "layers"), "--set takes KEY=VALUE"),
    ],
)
def test_a_bad_pipeline_fails_in_one_line_before_training(tiny, args, expected):
    out = tiny["root"] / "never-pipeline"
    done = run_cli("run", *args, "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]),
                   "--out", str(out), env={"COMPRESS_CACHE": str(tiny["root"] / "empty-cache")})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert not out.exists() and not out.parent.joinpath("never-pipeline-int8").exists()
    assert not (tiny["root"] / "empty-cache" / "teachers").exists()


def test_distilbert_then_prune_then_int8_runs_end_to_end(tiny):
    """The chain a user deploys: each step is a run directory, the pruned model is smaller and dense."""
    out, done = _run(tiny, "distilbert+prune+int8", "--keep-heads", "0.5", "--keep-ffn", "0.25",
                     "--recovery-epochs", "1", out=tiny["root"] / "chain")
    assert done.returncode == 0, done.stderr
    pruned_dir = tiny["root"] / "chain-prune"
    assert {"student", "importance.json", "head_curve.png", "log.jsonl", "report.md"} <= \
        {p.name for p in pruned_dir.iterdir()}
    student = load_encoder(out / "student").model
    pruned = load_encoder(pruned_dir / "student").model
    # Global ranking may keep more heads in one layer than another; the totals are what was asked.
    assert sum(pruned.config.heads_of(b) for b in range(pruned.config.num_attention_blocks)) == \
        round(0.5 * student.config.num_heads * student.config.num_layers)
    assert sum(pruned.config.ffn_size_of(b) for b in range(pruned.config.num_ffn_blocks)) == \
        round(0.25 * student.config.ffn_size * student.config.num_layers)
    metrics = json.loads((pruned_dir / "metrics.json").read_text())
    assert metrics["kind"] == "pruning" and metrics["source"]["kind"] == "run"
    assert metrics["student"]["params"] < metrics["source"]["params"]
    assert metrics["student"]["flops"] < json.loads((out / "metrics.json").read_text())["student"]["flops"]
    assert len(metrics["details"]["head_curve"]["importance"]) == 10
    # the default recipe: the recovery learned its soft targets from the fine-tuned teacher, not from its parent
    assert [stage.get("soft_targets") for stage in metrics["stages"]] == ["teacher"]
    last = json.loads((tiny["root"] / "chain-prune-int8" / "metrics.json").read_text())
    assert [step["step"].split("[")[0] for step in last["chain"]] == ["distilbert", "prune", "int8"]
    assert "heads kept" in (pruned_dir / "report.md").read_text()


def test_a_recovery_that_cannot_ask_the_teacher_says_so_and_learns_from_its_parent(tiny):
    """Under the default recipe a recovery learns the fine-tuned teacher's answers; after prune-vocab the model
    numbers its tokens otherwise, so the teacher's cannot be read on its data: the run says so in one line, and its
    record does not claim the teacher's targets. A step that trains nothing (int8) says nothing."""
    done = run_cli("run", "prune-vocab+prune+int8", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]),
                   "--out", str(tiny["root"] / "vocab-chain"), "--keep-heads", "0.5", "--recovery-epochs", "1",
                   *COMMON[-6:], env=tiny["env"])   # the teacher's fine-tuning as every other test here
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "fine-tuned teacher's answers" in line]
    assert len(said) == 1 and "learned its soft targets from the model it was given" in said[0]
    pruned = json.loads((tiny["root"] / "vocab-chain-prune" / "metrics.json").read_text())
    assert pruned["stages"] and all("soft_targets" not in stage for stage in pruned["stages"])


def test_prune_vocab_keeps_the_tokens_the_training_text_uses(tiny):
    from transformers import AutoTokenizer

    out = tiny["root"] / "vocab"
    done = run_cli("run", "prune-vocab", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]),
                   "--out", str(out), *COMMON[6:], env=tiny["env"])   # the teacher's settings: nothing trains
    assert done.returncode == 0, done.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    vocabulary = metrics["details"]["vocabulary"]
    model = load_encoder(out / "student").model
    tokenizer = AutoTokenizer.from_pretrained(out / "student")
    assert model.config.vocab_size == vocabulary["kept"] == len(tokenizer) < 200   # the tiny CSV uses few tokens
    assert metrics["source"]["params"] - metrics["student"]["params"] == \
        vocabulary["removed"] * model.config.embedding_size
    assert metrics["student"]["accuracy"] == metrics["source"]["accuracy"]   # every test word is in the train text
    # `compress explain prune-vocab` counts the kept tokens the way this run did.
    from compress.methods.prune_vocab import kept_tokens

    explained = kept_tokens(str(tiny["teacher"]), "train", str(tiny["csv"]))
    assert explained.count == vocabulary["kept"] and explained.source.startswith("counted now")

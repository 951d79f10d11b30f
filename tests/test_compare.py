"""`compress compare` and `compress report` end to end through the real CLI, on a small teacher and a tiny CSV."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import HANG_GUARD, chromium_page, make_tiny_teacher, run_cli, write_tiny_csv

from compress.bench.machine import cpu_features, half_available
from compress.cache import verify
from compress.predictions import PREDICTIONS_FILE
from compress.registry import all_methods, names
from compress.reports.comparison_data import REQUIRED_METHOD_FIELDS
from compress.reports.comparison_rows import precision_phrase, time_phrase
from compress.reports.records import Comparison, read_run_record
from compress.runs.compare import completed_run, run_dir_of
from compress.runs.compare_plan import PRUNING_PIPELINE, CompareConfig, default_methods, plan_runs
from compress.runs.config import RunConfig
from compress.training import run_precision

pytestmark = pytest.mark.minutes(10)   # on one CI worker: see tests/conftest.py

# Every run of the default set: its methods and pipelines with each intermediate step (distilbert+prune).
DEFAULT_RUNS = [run.name for run in plan_runs(default_methods())]
REUSED = [f"{name}@13" for name in DEFAULT_RUNS]   # every run of seed 13, by name and seed

# Four layers of 312: the smallest teacher every method's default student fits (TinyBERT-4 is 4 x 312).
FAST = ("--epochs", "1", "--batch-size", "16", "--teacher-epochs", "4", "--teacher-lr", "3e-3",
        "--teacher-batch-size", "16", "--threads", "1", "--repeats", "3")


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    teacher = make_tiny_teacher(root / "teacher", layers=4, hidden=312)
    csv = write_tiny_csv(root / "reviews.csv", copies=4)
    env = {"COMPRESS_CACHE": str(root / "cache")}
    args = ("compare", "--teacher", str(teacher), "--dataset", str(csv), "--out", str(root / "cmp"), *FAST, "--json")
    first = run_cli(*args, env=env)
    assert first.returncode == 0, first.stderr
    return {"root": root, "out": root / "cmp", "args": args, "env": env, "csv": csv,
            "first": json.loads(first.stdout)}


def _int8_is_smaller(model: dict, fp32_bytes: int) -> None:
    """int8 is smaller than fp32 by what its backend quantizes. Which backend --backend auto keeps depends
    on which is faster on the CPU, so the bound follows the backend: ONNX Runtime quantizes the embedding
    table too (under half of fp32's bytes); PyTorch's dynamic int8 only the linear layers (smaller, by less
    than half when the embeddings dominate, as in this small model)."""
    assert model["size_bytes"] < (fp32_bytes / 2 if model["backend"] == "onnxruntime" else fp32_bytes), model


def test_comparison_has_every_method_with_every_field(compared):
    data = json.loads((compared["out"] / "comparison.json").read_text())
    assert data == compared["first"]
    assert Comparison.from_dict(data).to_dict() == data   # the typed record round-trips through JSON
    assert [m["method"] for m in data["methods"]] == DEFAULT_RUNS
    assert {"prune", "prune-vocab", PRUNING_PIPELINE, "distilbert+prune", "albert[rank=48]",
            "albert[rank=48]+int8"} <= set(DEFAULT_RUNS)
    teacher = data["teacher"]
    classes = data["dataset"]["test_classes"]   # what the report's constant answer is computed from
    assert sum(classes.values()) == data["dataset"]["sizes"]["test"] and set(classes) == {"neg", "pos"}
    # a two-class task shows accuracy, F1 and Matthews side by side, and says where they disagree
    assert set(teacher["scores"]) == {"accuracy", "f1", "mcc"} == set(teacher["score_intervals"])
    for m in data["methods"]:   # each metric's interval, bootstrapped as the comparison's own (accuracy's: the same);
        # a retention only of what the teacher scores above 0 (this tiny teacher may answer one class: Matthews 0)
        assert set(m["score_intervals"]) == {"accuracy", "f1", "mcc"}
        assert set(m["retention_intervals"]) == {name for name, score in teacher["scores"].items() if score > 0}
        assert m["score_intervals"]["accuracy"] == m["accuracy_interval"]
        assert m["retention_intervals"]["accuracy"] == m["retention_interval"]
    assert "## Every metric side by side" in (compared["out"] / "comparison.md").read_text()
    for m in data["methods"]:
        for name in REQUIRED_METHOD_FIELDS:
            assert isinstance(m[name], (int, float)) and m[name] > 0, (m["method"], name)
        assert m["peak_memory_bytes"] > 0  # a batch of 32 needs memory of its own, whatever ran before
        # One measurement per row: latency is the median of the model's rounds over every pass; each pass's
        # speed-up is the ratio of that pass's medians, the speed-up their median (inside their range, the run-to-run
        # spread), the quartiles those of the per-round ratios. Every pass timed every model in every round.
        passes = list(zip(teacher["latency_passes_ms"], m["latency_passes_ms"], strict=True))
        assert len(passes) == data["speed"]["passes"] == 3 and data["speed"]["speedup"] == "passes"
        assert all(len(t) == len(x) == data["speed"]["rounds"] == 5 for t, x in passes)
        rounds = [(t, x) for ts, xs in passes for t, x in zip(ts, xs)]
        assert m["latency_ms_p50"] == pytest.approx(float(np.median([x for _, x in rounds])))
        assert teacher["latency_ms_p50"] == pytest.approx(float(np.median([t for t, _ in rounds])))
        assert m["speedup_passes"] == pytest.approx([np.median(t) / np.median(x) for t, x in passes])
        assert m["speedup"] == pytest.approx(float(np.median(m["speedup_passes"])))
        assert min(m["speedup_passes"]) <= m["speedup"] <= max(m["speedup_passes"])
        q1, q3 = np.percentile([t / x for t, x in rounds], [25, 75])
        assert m["speedup_iqr"] == pytest.approx([q1, q3])
        assert m["retention"] == pytest.approx(m["accuracy"] / teacher["accuracy"])
        assert [r["seed"] for r in m["per_seed"]] == [13] and m["per_seed"][0]["accuracy"] == m["accuracy"]
        for interval in (m["accuracy_interval"], m["retention_interval"]):
            assert interval["low"] <= interval["estimate"] <= interval["high"] and interval["level"] == 0.95
        metrics = json.loads((run_dir_of(compared["out"], m["method"], 13) / "metrics.json").read_text())
        assert m["size_bytes"] == metrics["student"]["size_bytes"] and m["explanation"]
    # What every run trained in, resolved on this CPU as the runs resolved it, and said in the report.
    trained_in = {json.loads((run_dir_of(compared["out"], m["method"], 13) / "config.json").read_text())["run"]
                  ["precision"] for m in data["methods"]}
    assert trained_in == {data["precision"]} == {run_precision(CompareConfig().precision, "auto")}
    phrase = precision_phrase(data["precision"])
    assert f"students trained in {phrase}" in (compared["out"] / "comparison.md").read_text()
    # Where the time went: every run was made now, and the runs' phases add up to the time the runs took.
    spent = data["time"]
    assert spent["runs_made"] == len(DEFAULT_RUNS) and spent["runs_training_s"] > 0
    phases = sum(v for k, v in spent.items() if k.startswith("runs_") and k.endswith("_s") and k != "runs_s")
    assert spent["runs_training_s"] < phases <= spent["runs_s"] + 1.0 <= spent["total_s"] + 1.0
    assert time_phrase(spent).split(":")[0] in (compared["out"] / "comparison.md").read_text()
    # One teacher, one accuracy: its cached test logits (the intervals' source) score it as its fine-tuning did.
    assert teacher["accuracy"] == metrics["teacher"]["accuracy"] and teacher["macro_f1"] == metrics["teacher"]["macro_f1"]
    by_name = {m["method"]: m for m in data["methods"]}
    _int8_is_smaller(by_name["int8"], teacher["size_bytes"])
    # bf16 is compared by default only where the CPU has bf16 units (elsewhere it runs emulated, slowly).
    assert ("bf16" in by_name) == (half_available("bf16", cpu_features()) is None)
    students = [m.name for m in all_methods("student") if m.in_compare()]   # each default student, then int8
    assert students
    for student in students:
        pipeline, first = by_name[f"{student}+int8"], by_name[student]
        assert pipeline["kind"] == "pipeline" and pipeline["steps"] == [student, f"{student}+int8"]
        assert pipeline["params"] == first["params"]
        _int8_is_smaller(pipeline, first["size_bytes"])
        # The pipeline's first step is the student's own row: trained once, its run the int8 step's parent.
        chain = json.loads((run_dir_of(compared["out"], f"{student}+int8", 13) / "metrics.json").read_text())["chain"]
        assert [step["run_dir"] for step in chain] == [first["run_dir"], pipeline["run_dir"]]
        assert chain[0]["accuracy"] == first["accuracy"] and chain[1]["accuracy"] == pipeline["accuracy"]
        assert (compared["out"] / f"steps-{student}-int8.png").stat().st_size > 0
        # Each step's sentence says what that step did: int8's bytes against its input, not the teacher.
        step_bytes = first["size_bytes"] / pipeline["size_bytes"]
        assert f"({step_bytes:.2f}x fewer bytes than its input, {student})" in pipeline["explanation"]
        assert pipeline["explanation"].startswith(f"{first['label']}: {first['explanation']} ")  # against the teacher
    # Pruning's rows carry the per-layer picture of what was kept, and the report draws it.
    [layers] = by_name["prune"]["sections"]   # pruning's own part of its row: what each layer kept
    assert layers["name"] == "layers" and layers["headers"][1] == "heads kept"
    kept = [(cells[0], *cells[1].split(" / "), *cells[3].split(" / ")) for cells in layers["rows"]]
    prune = [dict(zip(("layer", "heads", "heads_of", "ffn", "ffn_of"), map(int, row))) for row in kept]
    assert [row["layer"] for row in prune] == [1, 2, 3, 4]
    assert all(0 <= row["heads"] <= row["heads_of"] and 0 <= row["ffn"] <= row["ffn_of"] for row in prune)
    assert sum(row["heads"] for row in prune) < sum(row["heads_of"] for row in prune)
    assert by_name["distilbert"]["sections"] == [] and by_name["prune-vocab"]["sections"] == []
    assert by_name[PRUNING_PIPELINE]["steps"] == ["distilbert", "distilbert+prune", PRUNING_PIPELINE]
    assert by_name[PRUNING_PIPELINE]["sections"] == by_name["distilbert+prune"]["sections"] != []
    assert "FFN neurons kept" in (compared["out"] / "comparison.md").read_text()
    assert data["accuracy_standard_error"] == pytest.approx(
        (teacher["accuracy"] * (1 - teacher["accuracy"]) / data["dataset"]["sizes"]["test"]) ** 0.5)
    assert by_name["albert"]["params"] < teacher["params"]
    assert by_name["albert"]["flops"] >= teacher["flops"]  # sharing saves parameters, not FLOPs (E -> H adds some)
    assert data["manifest"]["threads"] == data["threads"] == data["speed"]["threads"] == 1
    assert data["manifest"]["packages"]["torch"] and data["speed"]["passes"] == 3
    assert data["speed"]["other_cpus"] >= 0  # measured from /proc/stat (CI runs other tests beside this one)
    for name in ("comparison.md", "comparison.html", "accuracy_vs_latency.png", "params_by_component.png"):
        assert (compared["out"] / name).stat().st_size > 0
    assert [p.name for p in (compared["out"] / "runs").iterdir()] == ["seed-13"]
    for run in (compared["out"] / "runs" / "seed-13").iterdir():
        assert (run / "manifest.json").is_file() and (run / "predictions.safetensors").is_file()
    # Every two models' accuracies, the teacher's among them, have their paired difference.
    assert len(data["differences"]) == (len(DEFAULT_RUNS) + 1) * len(DEFAULT_RUNS) // 2
    assert data["seeds"] == [13] and data["schema_version"] == 3


def test_the_real_comparison_renders_in_a_browser(compared):
    with chromium_page(compared["out"] / "comparison.html") as (page, _):
        assert page.locator("table#comparison tbody tr").count() == len(DEFAULT_RUNS) + 1
        images = page.eval_on_selector_all("img", "els => els.map(e => e.complete && e.naturalWidth > 0)")
        assert images and all(images)


def test_a_second_call_reuses_every_run_and_report_renders_again(compared):
    runs = compared["out"] / "runs" / "seed-13"
    stamps = {p.name: (p / "metrics.json").stat().st_mtime_ns for p in runs.iterdir()}
    again = run_cli(*compared["args"], env=compared["env"])
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reused"] == REUSED
    assert {p.name: (p / "metrics.json").stat().st_mtime_ns for p in runs.iterdir()} == stamps

    # A run recorded before one of its method's options was added (int8's batch_shape, added later: the run was
    # timed as its default times) is still the run asked for.
    saved = runs / "int8" / "config.json"
    as_made = saved.read_text()
    recorded = json.loads(as_made)
    assert recorded["options"].pop("batch_shape") == "filled"
    saved.write_text(json.dumps(recorded))
    older = run_cli(*compared["args"], "--methods", "int8", env=compared["env"])
    saved.write_text(as_made)   # the module's later tests read the run as it was made
    assert older.returncode == 0, older.stderr
    assert json.loads(older.stdout)["reused"] == ["int8@13"]

    # Threads change how speed is measured, not what was trained: a student and its pipeline are reused.
    args = [*compared["args"], "--methods", "distilbert,distilbert+int8"]
    args[args.index("--threads") + 1] = "2"
    other = run_cli(*args, env=compared["env"])
    assert other.returncode == 0, other.stderr
    assert json.loads(other.stdout)["reused"] == ["distilbert@13", "distilbert+int8@13"]
    assert json.loads(other.stdout)["threads"] == 2

    (compared["out"] / "comparison.html").unlink()
    done = run_cli("report", str(compared["out"]))
    assert done.returncode == 0, done.stderr
    assert "<table" in (compared["out"] / "comparison.html").read_text()


def test_a_second_seed_trains_only_what_depends_on_it_and_the_report_counts_both(compared):
    out = compared["out"]
    args = [*compared["args"], "--methods", "distilbert,int8,distilbert+int8", "--seeds", "13,14"]
    done = run_cli(*args, env=compared["env"])
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["reused"] == ["distilbert@13", "int8@13", "distilbert+int8@13"] and data["seeds"] == [13, 14]
    # int8 of the teacher trains nothing and samples nothing: one run serves both seeds
    assert sorted(p.name for p in (out / "runs" / "seed-14").iterdir()) == ["distilbert", "distilbert+int8"]
    by_name = {m["method"]: m for m in data["methods"]}
    assert [r["seed"] for r in by_name["distilbert"]["per_seed"]] == [13, 14]
    assert [r["seed"] for r in by_name["int8"]["per_seed"]] == [13]
    for m in data["methods"]:
        assert m["accuracy"] == pytest.approx(np.mean([r["accuracy"] for r in m["per_seed"]]))
        assert m["accuracy_interval"]["low"] <= m["accuracy"] <= m["accuracy_interval"]["high"]
    chain = json.loads((run_dir_of(out, "distilbert+int8", 14) / "metrics.json").read_text())["chain"]
    assert chain[0]["run_dir"] == str(run_dir_of(out, "distilbert", 14))   # seed 14's int8 is of seed 14's student
    assert "2 training seeds (13, 14)" in (out / "comparison.md").read_text()

    # A run whose predictions changed since it wrote them is made again, not read.
    kept = run_dir_of(out, "distilbert+int8", 14) / "predictions.safetensors"
    changed = bytearray(kept.read_bytes())
    changed[-1] ^= 1
    kept.write_bytes(bytes(changed))
    again = run_cli(*args, env=compared["env"])
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reused"] == ["distilbert@13", "int8@13", "distilbert+int8@13", "distilbert@14"]


def test_unknown_method_is_one_line(compared):
    done = run_cli("compare", "--methods", "albert,pruning", "--out", str(compared["root"] / "never"),
                   env=compared["env"])
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "pruning" in done.stderr and f"known: {', '.join(names())}" in done.stderr
    assert not (compared["root"] / "never").exists()


@pytest.mark.parametrize("methods, expected", [
    ("int8+distilbert", "distilbert trains a student and can only be a pipeline's first step"),
    ("distilbert[width=3]+int8", "--width do(es) not apply to distilbert"),
    ("distilbert+bf16[backend=onnxruntime]", "bf16 runs on torch or openvino, not onnxruntime"),
    # minilm has 6 layers, its DistilBERT student 3: checked against the student before it trains
    ("distilbert+prune[drop_layers=3]", "--drop-layers 3 would remove every layer: the model has 3"),
])
def test_a_bad_pipeline_fails_in_one_line_before_any_work(compared, methods, expected):
    done = run_cli("compare", "--methods", f"albert,{methods}", "--out", str(compared["root"] / "never"),
                   env=compared["env"])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    assert not (compared["root"] / "never").exists()


def test_ray_executor_trains_through_a_local_ray_instance_and_writes_the_same_rows(compared):
    out = compared["root"] / "cmp-ray"
    args = [*compared["args"], "--methods", "distilbert,distilbert+int8", "--executor", "ray", "--cpus-per-run", "1"]
    args[args.index("--out") + 1] = str(out)
    # a cache of its own: the run store would give it the fixture's runs (the teacher is fine-tuned again, the same);
    # a token of its own for Ray's token authentication, which a new local instance otherwise generates and saves
    # in the user's ~/.ray/auth_token (its session folder goes under RAY_TMPDIR, the suite's root: tests/conftest.py)
    done = run_cli(*args, env={**compared["env"], "OMP_NUM_THREADS": "2",
                               "COMPRESS_CACHE": str(compared["root"] / "cache-ray"),
                               "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Started a local Ray instance" in done.stderr and "finished distilbert+int8@13 (ray)" in done.stderr
    ours = json.loads(done.stdout)
    assert ours["reused"] == [] and [m["method"] for m in ours["methods"]] == ["distilbert", "distilbert+int8"]
    theirs = {m["method"]: m for m in compared["first"]["methods"]}
    for row in ours["methods"]:
        same = ("params", "size_bytes", "accuracy", "macro_f1", "retention", "backend", "steps")
        assert {k: row[k] for k in same} == {k: theirs[row["method"]][k] for k in same}
    parent = json.loads((run_dir_of(out, "distilbert+int8", 13) / "metrics.json").read_text())["chain"][0]
    assert parent["run_dir"] == str(run_dir_of(out, "distilbert", 13))   # the pipeline's step ran after its parent


def test_another_directory_reuses_the_runs_from_the_store_with_its_own_paths(compared):
    """A comparison with another --out and the same teacher, data, recipe, seed and precision trains nothing: its
    runs come from the run store, each naming its new directory and its new parent, the same models and scores;
    a damaged stored run is not used but trained again."""
    out = compared["root"] / "elsewhere"
    args = [*compared["args"], "--methods", "distilbert,distilbert+int8"]
    args[args.index("--out") + 1] = str(out)
    done = run_cli(*args, env=compared["env"])
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["reused"] == ["distilbert@13", "distilbert+int8@13"] and data["time"]["runs_made"] == 0
    first = {m["method"]: m for m in compared["first"]["methods"]}
    for row in data["methods"]:
        assert {k: row[k] for k in ("accuracy", "params", "size_bytes", "backend")} == \
            {k: first[row["method"]][k] for k in ("accuracy", "params", "size_bytes", "backend")}
    student, quantized = run_dir_of(out, "distilbert", 13), run_dir_of(out, "distilbert+int8", 13)
    config = json.loads((quantized / "config.json").read_text())
    assert config["run"]["out"] == str(quantized) and config["run"]["target"] == config["parent"] == str(student)
    chain = json.loads((quantized / "metrics.json").read_text())["chain"]
    assert [step["run_dir"] for step in chain] == [str(student), str(quantized)]
    assert str(compared["out"]) not in (quantized / "report.md").read_text()
    entries = sorted((compared["root"] / "cache" / "run-store").iterdir())
    # The store and the user's directories share no file: a byte changed in place on one side leaves the other intact.
    _flip_first_byte(student / PREDICTIONS_FILE)
    assert all(verify(entry) is None for entry in entries)
    for entry in entries:   # damage every stored run in place: none is used, each is trained again
        _flip_first_byte(next(p for p in entry.rglob("*.safetensors")))
    for made in (run_dir_of(compared["out"], "distilbert", 13), quantized):
        recorded = json.loads((made / "metrics.json").read_text())["predictions"]
        assert hashlib.sha256((made / PREDICTIONS_FILE).read_bytes()).hexdigest() == recorded
    again = [*args]
    again[again.index("--out") + 1] = str(compared["root"] / "elsewhere-again")
    retrained = run_cli(*again, env=compared["env"])
    assert retrained.returncode == 0, retrained.stderr
    assert json.loads(retrained.stdout)["reused"] == [] and "damaged" in retrained.stderr


def _flip_first_byte(path):
    """Change one byte of ``path`` where it lies (as a disk fault or a tool writing in place would)."""
    with open(path, "r+b") as f:
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xFF]))


def test_the_runs_compress_run_finished_are_reused_by_a_comparison(compared):
    """Each step `compress run` finishes is kept in the run store: a comparison elsewhere that asks for the same runs
    (the same settings, with a seed no comparison here trained) trains nothing, and its rows hold the runs' models."""
    root = compared["root"]
    pipeline = "distilbert+int8[backend=onnxruntime]"
    settings = [a for a in FAST if a not in ("--repeats", "3")]   # the comparison's training, as `compress run` takes it
    made = run_cli("run", pipeline, "--teacher", str(root / "teacher"), "--dataset", str(compared["csv"]),
                   "--out", str(root / "made"), "--seed", "21", *settings, "--json", env=compared["env"])
    assert made.returncode == 0, made.stderr
    runs = json.loads(made.stdout)
    args = [*compared["args"], "--methods", f"distilbert,{pipeline}", "--seed", "21"]
    args[args.index("--out") + 1] = str(root / "after-run")
    done = run_cli(*args, env=compared["env"])
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["reused"] == ["distilbert@21", f"{pipeline}@21"] and data["time"]["runs_made"] == 0
    rows = {m["method"]: m for m in data["methods"]}
    assert rows["distilbert"]["accuracy"] == runs["student"]["accuracy"]
    assert rows[pipeline]["accuracy"] == runs["chained"]["student"]["accuracy"]
    assert rows[pipeline]["size_bytes"] == runs["chained"]["student"]["size_bytes"]


def test_a_run_made_from_other_weights_at_the_teachers_path_is_not_found_complete(compared, tmp_path):
    """A run names the teacher's weights in its config.json: replaced at the same path by other weights, the teacher
    is another one, and the run is made again rather than found complete; a run recorded before runs named them is
    judged as before."""
    teacher, run_dir = tmp_path / "teacher", tmp_path / "distilbert"
    shutil.copytree(compared["root"] / "teacher", teacher)
    shutil.copytree(run_dir_of(compared["out"], "distilbert", 13), run_dir)
    saved = json.loads((run_dir / "config.json").read_text())
    saved["run"]["teacher"] = str(teacher)
    (run_dir / "config.json").write_text(json.dumps(saved))
    config, split = RunConfig(**saved["run"]), read_run_record(run_dir).dataset.fingerprint
    assert completed_run(run_dir, config, split) is not None   # the same weights, copied: complete
    shutil.rmtree(teacher)
    make_tiny_teacher(teacher, layers=4, hidden=312, seed=1)
    assert completed_run(run_dir, config, split) is None
    del saved["teacher_weights"]
    (run_dir / "config.json").write_text(json.dumps(saved))
    assert completed_run(run_dir, config, split) is not None


def test_ray_executor_without_ray_is_one_line(compared, tmp_path):
    script = "import sys; sys.modules['ray'] = None; from compress.cli.app import main; main()"
    done = subprocess.run([sys.executable, "-c", script, "compare", "--teacher", str(compared["root"] / "teacher"),
                           "--dataset", str(compared["csv"]), "--methods", "int8", "--executor", "ray",
                           "--out", str(tmp_path / "never")], capture_output=True, text=True,
                          env={**os.environ, **compared["env"]}, timeout=HANG_GUARD)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == \
        "error: --executor ray needs Ray, which is not installed: pip install 'compress[ray]'."
    assert not (tmp_path / "never").exists()


def test_a_run_made_with_other_option_defaults_is_trained_again(compared):
    # A run recorded when an option's default was another value (here ALBERT's augmentation, int8's backend),
    # or when its method's recipe was another (DistilBERT's epochs), is not reused.
    saved = run_dir_of(compared["out"], "albert", 13) / "config.json"
    config = json.loads(saved.read_text())
    assert config["options"]["augment_copies"] is None   # the recipe's
    config["options"]["augment_copies"] = 1
    saved.write_text(json.dumps(config))
    distilled = run_dir_of(compared["out"], "distilbert", 13) / "config.json"
    recipe = json.loads(distilled.read_text())["recipe"]
    recipe["stages"][0]["epochs"] += 1
    distilled.write_text(json.dumps(json.loads(distilled.read_text()) | {"recipe": recipe}))
    quantized = run_dir_of(compared["out"], "int8", 13) / "config.json"
    defaults = {"backend": "auto", "min_retention": 0.99, "choose_by": "latency", "batch_shape": "filled"}
    assert json.loads(quantized.read_text())["options"] == defaults
    quantized.write_text(json.dumps(json.loads(quantized.read_text()) | {"options": {**defaults, "backend": "torch"}}))
    done = run_cli(*compared["args"], "--methods", "albert,distilbert,int8", env=compared["env"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reused"] == []
    assert json.loads(saved.read_text())["options"]["augment_copies"] is None
    assert json.loads(distilled.read_text())["recipe"]["stages"][0]["epochs"] == recipe["stages"][0]["epochs"] - 1
    assert json.loads(quantized.read_text())["options"] == defaults


def test_changed_data_is_trained_again(compared):
    # Same file name, other content (runs last: it rewrites the module's CSV).
    write_tiny_csv(compared["csv"], copies=5)
    done = run_cli(*compared["args"], "--methods", "int8", env=compared["env"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reused"] == []

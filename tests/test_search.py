"""`compress search`: the space the methods declare (a toy method's range is tried), the schedule's rules, the bar
that stops training, the refusals before any work, and the real CLI end to end on a tiny teacher: interrupted,
resumed, and run again without training anything."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import torch
from helpers import (
    HANG_GUARD,
    REPO,
    assert_refused_before_work,
    make_tiny_teacher,
    run_cli,
    tiny_config,
    wait_for,
    write_tiny_csv,
)

from compress.data.load import load_task
from compress.registry import Context, Details, Transform, Transformed, get_method
from compress.registry import method as registry
from compress.registry.pipeline import Pipeline, Step
from compress.search.space import Candidate, Space, candidates, compresses_at_least, declared
from compress.train_config import TrainConfig
from compress.training import out_of_reach

pytestmark = pytest.mark.minutes(2)   # on one CI worker: see tests/conftest.py

TEACHER_ARGS = ["--teacher-epochs", "8", "--teacher-lr", "3e-3", "--teacher-batch-size", "8", "--batch-size", "8",
                "--threads", "1", "--repeats", "5"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("search")
    teacher = make_tiny_teacher(root / "teacher", layers=2, hidden=32)
    csv = write_tiny_csv(root / "reviews.csv", copies=12)
    env = {"COMPRESS_CACHE": str(root / "cache"), "OMP_NUM_THREADS": "1"}
    return {"root": root, "teacher": teacher, "csv": csv, "env": env,
            "args": ["--teacher", str(teacher), "--dataset", str(csv), *TEACHER_ARGS]}


# --- the space ------------------------------------------------------------------------------------


def _text(steps: str) -> Candidate:
    from compress.registry.pipeline import parse

    pipeline = parse(steps)
    return Candidate(Pipeline(tuple(Step(s.name, get_method(s.name).option_values(dict(s.options)))
                                    for s in pipeline.steps)), tiny_config())


def test_a_candidate_compresses_at_least_as_much_as_another_only_step_by_step_and_value_by_value():
    space = Space({"distilbert": {"num_layers": (None, 2)}, "prune": {"keep_heads": (0.75, 0.5, 0.25)}, "int8": {}})
    harsher, milder = _text("distilbert+prune[keep_heads=0.25]+int8"), _text("distilbert+prune")
    assert compresses_at_least(harsher, milder, space)        # one more step, a harsher value of the same option
    assert not compresses_at_least(milder, harsher, space)
    assert compresses_at_least(_text("distilbert[num_layers=2]+prune"), milder, space)   # a shallower student
    assert compresses_at_least(_text("distilbert+prune"), _text("prune"), space)  # the teacher is the mildest start
    assert not compresses_at_least(_text("prune+int8"), _text("distilbert+int8"), space)   # the student is missing
    assert not compresses_at_least(_text("distilbert+int8"), _text("distilbert+prune"), space)   # prune is missing


def test_candidates_follow_the_pipeline_rules():
    """At most one student, first; each transform at most once, in the registry's order; a quantization last;
    pruning never after low-rank; every searched option at a declared value and the rest at their defaults."""
    teacher = tiny_config(num_layers=6, num_labels=2)
    space = declared(teacher, ["distilbert", "prune", "lowrank", "int8", "bf16"])
    found = candidates(space, teacher, Context())
    texts = {c.text for c in found}
    assert "distilbert+prune+lowrank+int8" in texts and "int8" in texts and "distilbert[num_layers=2]" in texts
    for candidate in found:
        names = [s.name for s in candidate.pipeline.steps]
        assert len(names) == len(set(names))
        assert all(get_method(n).kind == "transform" for n in names[1:])
        assert sum(n in ("int8", "bf16") for n in names) <= 1 and names[-1] in ("int8", "bf16") or \
            not {"int8", "bf16"} & set(names)
        assert "prune" not in names or "lowrank" not in names or names.index("prune") < names.index("lowrank")
        for step in candidate.pipeline.steps:
            assert set(step.options) <= set(space.values[step.name])
    # the shape it carries is the one the steps give: prune keeps its share of the heads in every layer
    pruned = next(c for c in found if c.text == "distilbert+prune[keep_heads=0.25]")
    assert pruned.shape.num_layers == 3 and pruned.shape.heads == (1,) * 3


def test_each_step_is_timed_at_the_shape_it_is_given_after_a_vocabulary_pruned_for_the_task(tiny):
    """A step after prune-vocab trains the vocabulary the task keeps, as a run does: the search's training estimate
    times it at the shapes the space found (it once timed it at the teacher's vocabulary, a step in the middle of a
    pipeline at one shape and the same step last at another)."""
    from compress.data.batching import tokenize_task
    from compress.search.costs import trained_steps
    from compress.search.probe import _time_steps, training_stage
    from compress.teachers.registry import load_tokenizer, teacher_config

    teacher = teacher_config(str(tiny["teacher"])).replace(num_labels=2)
    task = load_task(str(tiny["csv"]))
    context = Context(task=task, tokenizer=load_tokenizer(str(tiny["teacher"])))
    found = {c.text: c for c in candidates(declared(teacher, ["prune-vocab", "lowrank", "int8"]), teacher, context)}
    middle, last = found["prune-vocab+lowrank+int8"], found["prune-vocab+lowrank"]
    kept = last.shape.vocab_size
    assert kept < teacher.vocab_size and middle.shape.vocab_size == kept
    given = {text: [(m.name, g.vocab_size, made.vocab_size) for m, _, g, made in trained_steps(c, teacher)]
             for text, c in (("middle", middle), ("last", last))}
    assert given["middle"] == [("prune-vocab", teacher.vocab_size, kept), ("lowrank", kept, kept), ("int8", kept, kept)]
    assert given["last"] == given["middle"][:2]
    assert middle.prefix(2).shape == last.shape and middle.prefix(2) == last and middle.prefix(1).shape.vocab_size == kept
    # and its steps are timed there: the task's token ids (of the teacher's tokenizer) read by the smaller vocabulary
    method, options, given_shape, made = trained_steps(middle, teacher)[1]
    data = tokenize_task(task, context.tokenizer, max_length=32)
    assert _time_steps(made, given_shape, training_stage(method, options, given_shape), data, "fp32", 8, 1, steps=1) > 0


def test_a_size_search_looks_through_int4_and_its_group_sizes_by_default_and_a_speed_search_does_not():
    teacher = tiny_config(num_layers=6, num_labels=2)
    size, latency = declared(teacher, objective="size"), declared(teacher, objective="latency")
    assert size.values["int4"] == {"group_size": (32, 128)} and "int4" not in latency.values
    assert size.values["qat-int4"] == {"group_size": (32, 128)} and "qat-int4" not in latency.values
    found = {c.text for c in candidates(declared(teacher, ["distilbert", "int4"]), teacher, Context())}
    assert {"distilbert+int4", "distilbert+int4[group_size=128]", "int4[group_size=128]"} <= found
    # the size objective counts int4's bytes at each group size: a larger group stores fewer scales, unless the
    # input channels are fewer than a group (32 here), which it pads
    int4, wide = get_method("int4"), teacher.replace(embedding_size=256, hidden_size=256, ffn_size=512)
    assert int4.size(int4.options(group_size=128), wide) < int4.size(int4.options(), wide)
    assert int4.size(int4.options(group_size=128), teacher) > int4.size(int4.options(), teacher)


def test_a_search_cuts_students_down_to_three_layers_of_width_256_and_every_value_it_declares_cuts():
    """On minilm (6 layers, width 384, FFN 1536, 12 heads of 32) cut's declared values reach the frontier's model: 3
    layers (and 2) of width 256 (four fifths of 312 in groups of 32), FFN 1024 and 8 heads; a narrow teacher declares
    only values below the shape's, never one equal to it."""
    from compress.teachers.registry import teacher_config

    minilm = teacher_config("minilm")
    space = declared(minilm, ["cut", "int8"])
    assert space.values["cut"] == {"num_layers": (0, 3, 2), "width": (0, 256), "ffn": (0, 1024), "num_heads": (0, 8),
                                   "cuts": (1, 2)}
    frontier = "cut[num_layers=3,width=256,ffn=1024,num_heads=8]+int8"
    assert frontier in {c.text for c in candidates(space, minilm, Context())}
    narrow = tiny_config(num_layers=2, hidden_size=64, num_heads=4, ffn_size=128)   # shape: 2 layers, 64, 128
    # layers 1 (2 - 1 and 2 // 2); width 48 (groups of 8 below 160); FFN 4 x 48 = 192, not below 128; 48 // 16 = 3 heads
    assert declared(narrow, ["cut"]).values["cut"] == {"num_layers": (0, 1), "width": (0, 48), "ffn": (0,),
                                                       "num_heads": (0, 3), "cuts": (1, 2)}


@dataclass
class Scaled(Details):
    factor: int


@dataclass
class ToyOptions:
    factor: int = field(default=1, metadata={"help": "a toy's knob.", "search": (1, 2, 3)})


def _scale(model, options: ToyOptions, context: Context) -> Transformed:
    return Transformed(model, Scaled(options.factor))


TOY = Transform(
    name="toy-scale", rank=998, family="testing", label="toy (a test's)", summary="changes nothing, in three ways",
    options=ToyOptions, why="It changes nothing: {params:.2f}x the parameters of {against}.",
    explain=lambda teacher, shape, seq_len, options: {}, run_kind="identity", details=Scaled,
    check=lambda config, options: None, apply=_scale, shape=lambda options, shape, context: shape,
)


def test_a_toy_methods_declared_range_is_searched(tiny, tmp_path, monkeypatch):
    """A method's options declare the values worth trying; the search enumerates them and trains one, with nothing
    in the search naming it."""
    from compress.search.search import SearchConfig, search
    from compress.teachers.finetune import FinetuneConfig

    monkeypatch.setitem(registry._REGISTRY, "toy-scale", TOY)
    monkeypatch.setenv("COMPRESS_CACHE", tiny["env"]["COMPRESS_CACHE"])
    space = declared(tiny_config(), ["toy-scale"])
    assert space.values == {"toy-scale": {"factor": (1, 2, 3)}}
    assert [c.text for c in candidates(space, tiny_config(), Context())] == \
        ["toy-scale", "toy-scale[factor=2]", "toy-scale[factor=3]"]
    config = SearchConfig(methods=["toy-scale"], teacher=str(tiny["teacher"]), dataset=str(tiny["csv"]), seeds=[13],
                          against=None, finalists=1, threads=1, repeats=5, batch_size=8, out=str(tmp_path / "s"),
                          teacher_finetune=FinetuneConfig(train=TrainConfig(epochs=4, lr=3e-3, batch_size=8)))
    out, record = search(config, show_progress=False)
    by_text = {c.text: c for c in record.candidates}
    assert set(by_text) == {"toy-scale", "toy-scale[factor=2]", "toy-scale[factor=3]"}
    assert record.status == "complete" and record.chosen == "toy-scale"   # one structure: the shortest text first
    assert by_text["toy-scale"].order == 1 and by_text["toy-scale"].fidelity == "final"
    assert by_text["toy-scale"].held_out_retention == 1.0   # it changes nothing
    assert json.loads((Path(record.chosen_run) / "metrics.json").read_text())["details"]["factor"] == 1


def test_a_throughput_search_runs_each_candidate_on_the_runtime_fastest_in_its_batches(tiny, tmp_path, monkeypatch):
    """Minimizing throughput in bucketed batches: a quantization left to choose its backend (the candidates' and the
    reference's) chooses by throughput in those batches, as the probes ranked it, and its run says so."""
    from compress.search.search import SearchConfig, search
    from compress.teachers.finetune import FinetuneConfig

    monkeypatch.setenv("COMPRESS_CACHE", tiny["env"]["COMPRESS_CACHE"])
    config = SearchConfig(methods=["int8"], minimize="throughput", batch_shape="bucketed", teacher=str(tiny["teacher"]),
                          dataset=str(tiny["csv"]), seeds=[13], against="onnx", finalists=1, threads=1, repeats=5,
                          batch_size=8, out=str(tmp_path / "s"),
                          teacher_finetune=FinetuneConfig(train=TrainConfig(epochs=4, lr=3e-3, batch_size=8)))
    out, record = search(config, show_progress=False)
    assert [c.text for c in record.candidates] == ["int8[choose_by=throughput,batch_shape=bucketed]"]
    assert record.status == "complete" and record.chosen == record.candidates[0].text
    assert record.against == "onnx[choose_by=throughput,batch_shape=bucketed]"
    # against the reference, in what it was chosen for: each pass's large batches, and at batch 1
    low, high = record.differences[f"throughput of {record.chosen} over {record.against}, passes"][1:]
    assert 0 < low <= high and f"x its throughput (passes {low:.2f}-{high:.2f}x)" in (out / "search.md").read_text()
    details = json.loads((Path(record.chosen_run) / "metrics.json").read_text())["details"]
    assert {m["batch_shape"] for m in details["measured"].values()} == {"bucketed"} and len(details["measured"]) > 1
    assert "the fastest at batch 32, test sentences bucketed by length" in details["chosen_by"]


# --- the bar ------------------------------------------------------------------------------------


def test_a_stage_stops_once_its_dev_accuracy_cannot_reach_the_bar():
    config = TrainConfig(epochs=4, stop_below=0.85, gain_per_epoch=0.02)
    assert out_of_reach(config, [0.70], 1) is not None           # 0.70 + 3 x 0.02 < 0.85
    assert out_of_reach(config, [0.80], 1) is None               # 0.80 + 3 x 0.02 = 0.86
    assert out_of_reach(config, [0.70, 0.78], 2) is None         # it gained 0.08 in an epoch: 0.78 + 2 x 0.08
    assert out_of_reach(config, [0.70, 0.70, 0.70, 0.70], 4) is None   # done: nothing left to stop
    assert out_of_reach(TrainConfig(epochs=4), [0.1], 1) is None  # no bar
    assert out_of_reach(TrainConfig(epochs=4, stop_below=0.9, metric="loss"), [0.1], 1) is None


def test_a_run_stopped_by_a_bar_says_so_and_is_not_reused_without_that_bar(tiny, tmp_path, monkeypatch):
    from compress.runs.compare import _run_or_reuse
    from compress.runs.compare_plan import CompareConfig, plan_runs, plan_seeds
    from compress.teachers.finetune import FinetuneConfig

    monkeypatch.setenv("COMPRESS_CACHE", tiny["env"]["COMPRESS_CACHE"])
    torch.set_num_threads(1)
    csv = write_tiny_csv(tmp_path / "reviews.csv", copies=8)   # small enough that no student reaches 100% on dev
    config = CompareConfig(teacher=str(tiny["teacher"]), dataset=str(csv), out=str(tmp_path), batch_size=8,
                           teacher_finetune=FinetuneConfig(train=TrainConfig(epochs=4, lr=3e-3, batch_size=8)),
                           stop_below=1.0, threads=1, recipe="fast")   # no patience: a bar alone stops it
    task = load_task(str(csv))
    step = plan_seeds(plan_runs(["distilbert"]), [13])[0]
    _, record, reused = _run_or_reuse(config, step, tmp_path, None, task.fingerprint, show_progress=False)
    assert not reused and record.stages[0]["stop_reason"] == "bar" and record.stages[0]["stopped_early"]
    assert "cannot reach 1.0000" in record.stages[0]["warnings"][-1]
    _, _, reused = _run_or_reuse(config, step, tmp_path, None, task.fingerprint, show_progress=False)
    assert reused   # the same bar: the same run
    without = CompareConfig(**{**config.__dict__, "stop_below": None})
    _, record, reused = _run_or_reuse(without, step, tmp_path, None, task.fingerprint, show_progress=False)
    assert not reused and "stop_reason" not in record.stages[0]


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "expected"), [
    (["--min-retention", "1.5"], "--min-retention is a share of the teacher's score in (0, 1]"),
    (["--minimize", "energy"], "'energy' is not an objective compress can measure"),
    (["--batch-size", "1", "--budget", "1s"], "one full training of the cheapest candidate"),
    (["--seq-len", "65"], "--seq-len must be between 2 and the teacher's 64 positions"),
    (["--space", "{space}"], "prune has no option 'keep_everything'"),
    (["--selection-size", "900"], "would leave no training example, or hold out none, of 'neg', 'pos'"),
    (["--select-on", "test"], "--select-on takes held-out or dev, not 'test'"),
    (["--select-on", "dev", "--selection-size", "10"], "--selection-size is a number of training sentences"),
    (["--executor", "ray", "--address", "127.0.0.1:9"], "no Ray cluster answers at 127.0.0.1:9"),
])
def test_bad_input_is_one_line_before_any_work(tiny, tmp_path, args, expected):
    space = tmp_path / "space.toml"
    space.write_text("[prune]\nkeep_everything = [1]\n")
    out = tmp_path / "s"
    cache = tmp_path / "cache"   # empty: the teacher is not fine-tuned yet
    done = run_cli("search", *tiny["args"], "--methods", "distilbert,prune", *(a.format(space=space) for a in args),
                   "--out", str(out), env={**tiny["env"], "COMPRESS_CACHE": str(cache)})
    assert_refused_before_work(done, expected, out)
    assert not (cache / "teachers").exists()   # refused before the teacher's fine-tuning, not after it
    if "1s" in args:   # it says which budget would fit, from the steps it timed, the teacher's fine-tuning counted
        assert "give at least --budget" in done.stderr and "fine-tuning the teacher (about" in done.stderr


@pytest.mark.parametrize(("space", "expected"), [
    ('[nope]\n', "unknown method 'nope'"),
    ('[prune]\nkeep_everything = [1]\n', "prune has no option 'keep_everything'"),
    ('[prune]\nkeep_heads = "half"\n', "--keep-heads takes a number, not 'half'"),
    ('[prune\n', "is not valid TOML"),
    ('{"prune": {"keep_heads": []}}', "prune.keep_heads lists no value"),
])
def test_a_bad_space_file_is_one_sentence(tmp_path, space, expected):
    from compress.errors import CompressError
    from compress.search.space import from_file

    path = tmp_path / ("space.json" if space.startswith("{") else "space.toml")
    path.write_text(space)
    with pytest.raises(CompressError, match=re.escape(expected)):
        from_file(path, tiny_config())


def test_a_space_file_narrows_the_declared_values(tmp_path):
    from compress.search.space import from_file

    path = tmp_path / "space.toml"
    path.write_text('[distilbert]\n[prune]\nkeep_heads = [0.5, 0.25]\n[int8]\nbackend = "onnxruntime"\n')
    space = from_file(path, tiny_config(num_layers=6))
    assert space.values == {"distilbert": {"num_layers": (None, 2)},
                            "prune": {"keep_heads": (0.5, 0.25), "keep_ffn": (0.75, 0.5, 0.25)},
                            "int8": {"backend": ("onnxruntime",)}}


# --- end to end ----------------------------------------------------------------------------------

SPACE = '[distilbert]\n[prune]\nkeep_heads = [0.5]\nkeep_ffn = [0.5]\n[int8]\nbackend = "onnxruntime"\n'


def _metrics(out: Path) -> dict[str, int]:
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in out.glob("runs/*/*/metrics.json")}


def test_the_cli_searches_resumes_after_an_interrupt_and_reuses_what_it_trained(tiny, tmp_path):
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    out = tmp_path / "search"
    args = ["search", *tiny["args"], "--space", str(space), "--seeds", "2", "--against", "none", "--finalists", "1",
            "--budget", "20m", "--seq-len", "64", "--out", str(out)]
    # Interrupted once its first run is complete: Ctrl-C keeps that run and search.json.
    process = subprocess.Popen([sys.executable, "-m", "compress", *args], cwd=REPO, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **tiny["env"]})
    def complete() -> list[Path]:   # whichever candidate the search trains first (it orders them by timed speed)
        return list((out / "runs" / "seed-13").glob("*/.compress.json"))

    try:
        wait_for(complete, process, "the search's first complete run")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=HANG_GUARD)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert complete() and json.loads((out / "search.json").read_text())["status"] == "interrupted"
    kept = _metrics(out)
    # The same command resumes: what finished is reused, the rest is trained, and the search completes.
    done = run_cli(*args, env=tiny["env"])
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "search.json").read_text())
    assert record["status"] == "complete" and record["chosen"]
    assert record["teacher_held_out_accuracy"] >= 0.8   # a teacher that learned the task: retention means something
    # it selected on training sentences held out (twice dev), not on dev, and said first how finely they resolve
    task = load_task(str(tiny["csv"]))
    held_out = 2 * len(task.splits["dev"])
    assert record["selection"] == "held-out" and 0 < record["resolution"] < 1
    assert f"{held_out:,} held-out sentences resolve a retention of the teacher's accuracy near 97%" in done.stderr
    assert all(_metrics(out)[name] == mtime for name, mtime in kept.items())
    by_text = {c["text"]: c for c in record["candidates"]}
    assert len(by_text) == 7 and by_text[record["chosen"]]["fidelity"] == "final"
    assert {c["fidelity"] for c in record["candidates"]} >= {"shape", "timed", "final"}
    assert record["spent_s"] > sum(v for k, v in record["seconds"].items() if k != "teacher")
    chosen = Path(record["chosen_run"])
    assert json.loads((chosen / "config.json").read_text())["run"]["hold_out"] == held_out
    sizes = json.loads((chosen / "metrics.json").read_text())["dataset"]["sizes"]
    assert sizes["train"] == len(task.splits["train"]) - held_out and sizes["select"] == held_out
    assert (chosen / "metrics.json").is_file() and (chosen / "model" / "model.onnx").is_file()
    final = next(f for f in record["finals"] if f["role"] == "chosen")
    assert final["retention_interval"][0] <= final["retention"] <= final["retention_interval"][1]
    for name in ("search.md", "search.html", "search.png", "comparison.md"):
        assert (out / name).is_file()
    markdown = (out / "search.md").read_text()
    assert record["chosen"] in markdown and "biased upward by the selection" in markdown
    # Once more: everything is reused, nothing trains, and the verdict is the same.
    before = _metrics(out)
    again = run_cli(*args, env=tiny["env"])
    assert again.returncode == 0, again.stderr
    assert _metrics(out) == before and json.loads((out / "search.json").read_text())["chosen"] == record["chosen"]
    # Again with another directory: every run comes from the run store and every timing from the probes, charged
    # at what they cost the first time, so the walk decides as the first did and gives the same answer.
    elsewhere = tmp_path / "elsewhere"
    moved = run_cli(*args[:-1], str(elsewhere), env=tiny["env"])
    assert moved.returncode == 0, moved.stderr
    replayed = json.loads((elsewhere / "search.json").read_text())
    assert replayed["chosen"] == record["chosen"] and replayed["reused_s"] > 0
    assert [(c["text"], c["status"], c["fidelity"]) for c in replayed["candidates"]] == \
        [(c["text"], c["status"], c["fidelity"]) for c in record["candidates"]]
    assert "work reused from another search or comparison" in (elsewhere / "search.md").read_text()


def test_the_speed_fit_orders_untimed_structures_by_flops():
    from compress.search.probe import SpeedFit

    fit = SpeedFit()
    fit.add("int8", 1e8, 1.0)
    assert fit.estimate("int8", 5e8) is None   # one structure tells no slope
    fit.add("int8", 3e8, 2.0)
    assert fit.estimate("int8", 2e8) == pytest.approx(1.5) and fit.estimate("onnx", 2e8) is None
    assert fit.estimate("int8", 0) == pytest.approx(0.5)   # never below half the fastest measured


def test_every_declared_range_goes_from_the_mildest_compression_to_the_harshest():
    """The search reads a declared range as mildest first (compresses_at_least): along it, the model a step gives
    never grows."""
    from compress.models.accounting import count_parameters
    from compress.registry import StudentMethod, all_methods, default_of, option_fields
    from compress.search.space import declared_values

    teacher = tiny_config(vocab_size=1000, num_layers=6, embedding_size=256, hidden_size=256, num_heads=4,
                          ffn_size=512, num_labels=2)
    checked = 0
    for method in all_methods():
        for key, values in declared_values(method, teacher).items():
            sizes = []
            default = default_of(option_fields(method.options)[key])
            for value in values:
                # as a candidate writes it: the default left out (cut's 0 given is refused, standing for the shape's)
                options = method.make_options({} if value == default else {key: value})
                if getattr(method, "shape", True) is None:   # a quantization keeps every parameter: bytes change
                    sizes.append(method.size(options, teacher))
                    continue
                shape = method.student_config(teacher, options) if isinstance(method, StudentMethod) else \
                    method.shape(options, teacher, Context())
                sizes.append(count_parameters(shape).total)
            assert sizes == sorted(sizes, reverse=True), f"{method.name} --{key}: {values} gives {sizes}"
            checked += 1
    assert checked >= 6


def test_speed_probes_stop_at_their_share_of_the_budget_and_say_so_once():
    """The walk times untrained structures only while the probes have taken less than PROBE_SHARE of the budget
    (a 45-minute search once spent all of it probing); past it, it says so once, in a line and in the record."""
    from types import SimpleNamespace

    from compress.search.clock import Clock
    from compress.search.ledger import SearchRecord
    from compress.search.walk import PROBE_SHARE, Walk

    walk = Walk.__new__(Walk)
    said: list[str] = []
    walk.config, walk.say, walk.states = SimpleNamespace(budget_s=2700.0), said.append, []
    walk.record, walk.probes_spent = SearchRecord.__new__(SearchRecord), False
    walk.record.notes = []
    walk.clock = Clock({"speed probes": PROBE_SHARE * 2700 - 1}, 0.0, time.perf_counter())
    assert walk.may_probe() and not said
    walk.clock.seconds["speed probes"] = PROBE_SHARE * 2700
    assert not walk.may_probe() and not walk.may_probe()
    assert len(said) == 1 and "10% of the budget" in said[0] and len(walk.record.notes) == 1


def test_what_the_walk_trained_is_timed_even_once_the_probes_share_is_spent():
    """Past the probes' share the walk orders by the fit, optimistic on purpose; what it trained it ranks and takes to
    the finals by its objective, so a trained structure the fit only estimated is timed then (keeping the fidelity it
    reached), once; a miss still sets the floor at its place in the order; a size search times nothing."""
    from types import SimpleNamespace

    from compress.search.clock import Clock
    from compress.search.ledger import CandidateRecord
    from compress.search.probe import SpeedFit, Timed
    from compress.search.walk import PROBE_SHARE, State, Walk

    walk = Walk.__new__(Walk)
    walk.config = SimpleNamespace(min_retention=0.97, minimize="latency", budget_s=100.0)
    walk.clock = Clock({"speed probes": PROBE_SHARE * 100}, 0.0, time.perf_counter())
    walk.fit, walk.winners, walk.floor, walk.teacher = SpeedFit(), {}, None, None
    for flops, ms in ((1e8, 4.0), (2e8, 3.0), (3e8, 8.0)):
        walk.fit.add("torch", flops, ms)
    timed: list[str] = []
    walk.probes = SimpleNamespace(take_charged=dict, time=lambda candidate, *_: timed.append(candidate.text) or
                                  Timed(latency_ms=5.0, throughput=200.0, backend="torch"))

    def trained(text: str, status: str, retention: float) -> State:
        record = CandidateRecord(text=text, params=1, size_bytes=1, flops=int(2e8), trains=True, fidelity="full",
                                 status=status, held_out_retention=retention)
        return State(SimpleNamespace(text=text), record, "torch")

    met = trained("met", "kept", 0.98)
    assert walk.objective(met) < 5.0   # the fit's estimate lies below what its kind times at these FLOPs
    walk.after_training(met, 2.5)
    assert timed == ["met"] and walk.objective(met) == 5.0 and met.record.objective == 5.0
    assert (met.record.fidelity, met.record.latency_ms, walk.floor) == ("full", 5.0, None)
    walk.after_training(met, 2.5)
    assert timed == ["met"]                       # timed once
    missed = trained("missed", "below", 0.95)
    walk.after_training(missed, 2.5)
    assert timed == ["met", "missed"] and walk.floor == (2.5, "missed")
    walk.after_training(trained("failed", "failed", None), 3.0)
    walk.config.minimize = "size"
    walk.after_training(trained("small", "kept", 0.98), 3.0)
    assert timed == ["met", "missed"] and walk.floor == (2.5, "missed")


def test_the_walk_ends_only_once_enough_candidates_meet_the_bar_on_their_held_out_mean():
    """A candidate kept because its interval reaches the bar, its mean below it, does not end the walk; the finals
    take those that met the bar on the mean first, then the best of the others."""
    from types import SimpleNamespace

    from compress.search.walk import State, Walk

    walk = Walk.__new__(Walk)
    walk.config = SimpleNamespace(min_retention=0.97, finalists=2, minimize="size")

    def kept(text: str, size: int, retention: float) -> State:
        record = SimpleNamespace(size_bytes=size, held_out_retention=retention)
        return State(SimpleNamespace(text=text), record, "torch")

    small, smaller, larger = kept("a", 3, 0.955), kept("b", 2, 0.962), kept("c", 9, 0.975)
    walk.kept = [small, smaller]
    assert walk.enough() is None                      # kept, but neither meets 97% on its mean: walk on
    walk.kept.append(larger)
    assert walk.enough() is None and [s.candidate.text for s in walk.finalists()] == ["c", "b"]
    walk.kept.append(kept("d", 12, 0.98))
    assert walk.enough().candidate.text == "d" and [s.candidate.text for s in walk.finalists()] == ["c", "d"]


def test_after_a_miss_the_walk_bisects_between_what_missed_and_what_met():
    """The most compressed first; after a miss, the candidate nearest the geometric middle of the miss and the best
    that met the bar (the worst left while none has); nothing between: the best above the miss; nothing above it:
    what is left below it; and while none has met the bar, the best above the miss that trains nothing first."""
    from types import SimpleNamespace

    from compress.search.walk import State, Walk

    walk = Walk.__new__(Walk)
    walk.config = SimpleNamespace(min_retention=0.97, finalists=2, minimize="size")
    walk.kept, walk.floor, walk.cheap_left = [], None, True
    walk.trains_nothing = lambda index: False

    def order(*sizes: float) -> list[tuple[float, int, int]]:
        return [(size, 1, i) for i, size in enumerate(sizes)]

    assert walk.next_position(order(1, 2, 4, 8, 16, 32, 64)) == 0
    walk.floor = (1.0, "a")                                        # 1 missed: sqrt(1 x 64) = 8
    assert walk.next_position(order(2, 4, 8, 16, 32, 64, float("inf"))) == 2
    walk.kept = [State(SimpleNamespace(text="m"), SimpleNamespace(size_bytes=16, held_out_retention=0.975), "torch")]
    assert walk.next_position(order(2, 3, 4, 7, 32, 64)) == 2     # 16 met: sqrt(1 x 16) = 4
    walk.floor = (4.0, "b")                                        # 4 missed too: sqrt(4 x 16) = 8, 7 nearest
    assert walk.next_position(order(2, 3, 7, 32, 64)) == 2
    walk.floor = (7.0, "c")                                        # nothing between 7 and 16: the best above 7
    assert walk.next_position(order(2, 3, 32, 64)) == 2
    walk.floor = (64.0, "d")                                       # nothing above the floor: below it
    assert walk.next_position(order(2, 3)) == 0
    # while nothing has met the bar, after a miss the best above it that trains nothing (seconds to make) comes first
    walk.kept, walk.floor, walk.cheap_left = [], (1.0, "a"), True
    walk.trains_nothing = lambda index: index in (0, 4, 5)   # 0.5 lies below the miss
    assert walk.next_position(order(0.5, 3, 4, 8, 16, 32, 64)) == 4
    walk.kept = [State(SimpleNamespace(text="m"), SimpleNamespace(size_bytes=16, held_out_retention=0.975), "torch")]
    assert walk.next_position(order(0.5, 3, 4, 8, 32, 64)) == 2   # one has met: bisect again, sqrt(1 x 16) = 4


def test_the_ledger_reads_a_search_written_when_its_held_out_numbers_were_named_dev(tmp_path):
    """search.json names the numbers a search selects on after the sentences they are on (held_out_*); a search
    written before (schema 1: dev_*, teacher_dev_accuracy, whichever sentences it selected on) still reads, and is
    written back under the new names."""
    from compress.search.ledger import SEARCH_SCHEMA, read_record, write_record

    old = {"schema_version": 1, "created": "2026-11-28T10:00:00+00:00", "command": None, "teacher": "minilm",
           "dataset": "mr", "minimize": "size", "min_retention": 0.97, "budget_s": 5400.0, "seeds": [13, 14, 15],
           "space": {}, "cpu": "AMD EPYC", "threads": 2, "seq_len": 64, "teacher_dev_accuracy": 0.84, "bar": 0.8148,
           "selection": "held-out", "status": "complete",
           "candidates": [{"text": "int8", "params": 22, "size_bytes": 23, "flops": 24, "trains": False,
                           "fidelity": "final", "status": "chosen", "dev_accuracy": 0.83, "dev_retention": 0.988,
                           "dev_interval": [0.975, 1.001]}],
           "finals": [{"text": "int8", "role": "chosen", "accuracy": 0.82, "accuracy_interval": [0.8, 0.84],
                       "retention": 0.99, "retention_interval": [0.98, 1.0], "speedup": 2.0, "speedup_iqr": [1.9, 2.1],
                       "throughput_speedup": 1.5, "size_bytes": 23, "params": 22, "latency_ms": 3.0,
                       "run_dir": "runs/seed-13/int8", "dev_retention": 0.987,
                       "dev_retention_interval": [0.98, 0.995]}]}
    (tmp_path / "search.json").write_text(json.dumps(old))
    record = read_record(tmp_path)
    assert record.teacher_held_out_accuracy == 0.84
    [candidate], [final] = record.candidates, record.finals
    assert (candidate.held_out_accuracy, candidate.held_out_retention, candidate.held_out_interval) == \
        (0.83, 0.988, [0.975, 1.001])
    assert (final.held_out_retention, final.held_out_retention_interval) == (0.987, [0.98, 0.995])
    written = json.loads(write_record(record, tmp_path).read_text())
    assert written["schema_version"] == SEARCH_SCHEMA == 2 and written["teacher_held_out_accuracy"] == 0.84
    assert written["candidates"][0]["held_out_retention"] == 0.988 and "dev_retention" not in written["candidates"][0]
    assert written["finals"][0]["held_out_retention_interval"] == [0.98, 0.995]
    assert "teacher_dev_accuracy" not in written and read_record(tmp_path).candidates[0] == candidate


def test_the_finals_reserve_counts_a_run_the_reference_shares_with_a_candidate_once():
    """distilbert+prune+prune-vocab+int4 and the reference distilbert+prune+int8 share distilbert and prune seed by
    seed: the walk's reserve for its finals counted them twice (once for the finalists, once for the reference),
    which left the first 90-minute size search unable to afford any distilbert student after 40 minutes."""
    from types import SimpleNamespace

    from compress.search.costs import RunCosts
    from compress.search.walk import State, Walk

    cost = {"distilbert": 600.0, "prune": 120.0, "prune-vocab": 30.0, "int4": 20.0, "int8": 10.0}
    walk = Walk.__new__(Walk)
    walk.config = SimpleNamespace(min_retention=0.97, finalists=2, minimize="size", seeds=[13, 14, 15],
                                  against="distilbert+prune+int8")
    walk.kept = []
    reserve = RunCosts.__new__(RunCosts)
    reserve.complete = {("distilbert", 13)}
    reserve.made = lambda step: (step.planned.name, step.seed) in reserve.complete
    reserve.step_costs = lambda candidate: [cost[m] for m in (step.split("[")[0] for step in candidate.text.split("+"))]

    def state(text: str, size: int) -> State:
        return State(SimpleNamespace(text=text), SimpleNamespace(size_bytes=size, held_out_retention=None), "torch")

    candidate, reference = state("distilbert+prune+prune-vocab+int4", 5), state("distilbert+prune+int8", 15)
    walk.states = [candidate, reference]
    first = ([candidate.candidate], [13])
    assert reserve.missing(first) == 120 + 30 + 20                     # distilbert@13 is made already
    runs = walk.finals_runs(candidate)
    assert runs == [([candidate.candidate], [14, 15]), ([reference.candidate], [13, 14, 15])]
    # seeds 14 and 15 of the candidate's four steps, then the reference's int8 on each seed: its distilbert and
    # prune are the candidate's
    assert reserve.missing(first, *runs) - reserve.missing(first) == 2 * (600 + 120 + 30 + 20) + 3 * 10
    assert reserve.missing(*runs) < reserve.missing(runs[0]) + reserve.missing(runs[1])


def test_the_finals_reserve_counts_the_candidate_among_the_finalists_it_would_join_by_meeting_the_bar():
    """A candidate not yet trained has no held-out mean: the reserve counted it behind every kept candidate that met
    the bar, so with two slower ones met it reserved their seeds, not its own. The 120-minute latency search on the AMX
    Xeon reserved a quantized teacher's seeds (seconds), then a pruned chain (15 minutes a seed) met the bar and
    joined the finals in their place: 140 minutes of 120."""
    from types import SimpleNamespace

    from compress.search.walk import State, Walk

    walk = Walk.__new__(Walk)
    walk.config = SimpleNamespace(min_retention=0.97, finalists=2, minimize="size", seeds=[13, 14, 15],
                                  against="none")
    walk.states = []

    def state(text: str, size: int, retention: float | None) -> State:
        return State(SimpleNamespace(text=text), SimpleNamespace(size_bytes=size, held_out_retention=retention),
                     "torch")

    met_small, met_large, below = state("a", 20, 0.975), state("b", 25, 0.997), state("c", 6, 0.96)
    walk.kept = [met_small, met_large, below]
    candidate = state("d", 19, None)
    assert walk.finals_runs(candidate) == [([candidate.candidate, met_small.candidate], [14, 15])]
    assert walk.finals_runs(state("e", 30, None)) == [([met_small.candidate, met_large.candidate], [14, 15])]


def test_probes_are_shared_by_every_search_of_the_task_on_this_machine(tmp_path, monkeypatch):
    """Timings live under the cache root, keyed by what they depend on: a second search (another directory) reads
    what the first timed; two searches saving at once keep both's; another thread count is another entry."""
    from types import SimpleNamespace

    from compress.search.probe import Probes, Timed

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    data = SimpleNamespace(cache_key="mr-tokens")
    first, second = Probes(data, 64, 2, 30), Probes(data, 64, 2, 30)
    for probes in (first, second):
        probes.writable = True
    first.timed["a"] = Timed(1.0, 100.0, "torch")
    first._save()
    second.timed["b"] = Timed(2.0, 50.0, "onnxruntime")
    second._save()                                    # after the first: its entry stays
    later = Probes(data, 64, 2, 30)
    assert set(later.timed) == {"a", "b"} and later.timed["a"] == Timed(1.0, 100.0, "torch")
    assert Probes(data, 64, 1, 30).timed == {} and Probes(SimpleNamespace(cache_key="bbc"), 64, 2, 30).timed == {}
    assert first.path.parent == tmp_path / "cache" / "search-probes"


def test_a_reused_probe_is_charged_once_at_what_it_cost_and_a_measured_one_not_again(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from compress.search import probe
    from compress.search.probe import Probes, Timed

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    data = SimpleNamespace(cache_key="mr-tokens")
    first = Probes(data, 64, 2, 30)
    first.writable = True
    first.timed["a"] = Timed(1.0, 100.0, "torch", seconds=5.0)
    first._save()
    keys = iter(["a", "a", "b", "b"])
    monkeypatch.setattr(probe, "structure_key", lambda candidate, teacher: next(keys))
    monkeypatch.setattr(Probes, "_measure", lambda self, *args: Timed(2.0, 50.0, "onnxruntime"))
    later = Probes(data, 64, 2, 30)
    assert later.time(None, None, "latency").seconds == 5.0 and later.time(None, None, "latency")
    assert later.take_charged() == {"speed probes": 5.0, "step timing": 0.0}     # once, at its first cost
    measured = later.time(None, None, "latency")                                  # "b": timed by this search
    assert measured.seconds > 0 and later.time(None, None, "latency") == measured
    assert later.take_charged() == {"speed probes": 0.0, "step timing": 0.0}     # on its clock as it ran


def test_a_training_step_between_two_timed_of_its_kind_is_interpolated_in_flops_not_timed(tmp_path, monkeypatch):
    """A search estimates many shapes' training it never trains (a candidate that does not fit what is left): each
    was timed (a 45-minute throughput search spent 18 of its minutes so). A step whose FLOPs lie between two steps of
    its kind this search timed is read off the line between them, at no cost; outside them, or of another kind, it
    is timed. Run again on the same cache, a search is served the same values at the same cost."""
    from types import SimpleNamespace

    from compress.distill.layer_maps import LayerMap
    from compress.distill.recipe import LossTerm, Recipe, Stage
    from compress.models.accounting import flops_per_sequence
    from compress.search import probe
    from compress.search.probe import Probes, StepPoint, interpolate

    assert interpolate(StepPoint("k", 15.0), [(10.0, 1.0), (20.0, 3.0), (40.0, 9.0)]) == 2.0
    assert interpolate(StepPoint("k", 20.0), [(10.0, 1.0), (20.0, 3.0)]) == 3.0
    assert interpolate(StepPoint("k", 50.0), [(10.0, 1.0), (20.0, 3.0)]) is None
    assert interpolate(StepPoint("k", 5.0), [(10.0, 1.0)]) is None
    # the teacher's outputs are read from their cache (one kind of attention map at most): its width and depth are
    # what a step reads of it, not its pruned heads or vocabulary; two kinds of map run it live, all of it counts
    from compress.distill.objective import teacher_runs_live
    from compress.search.probe import step_point

    base, pruned = tiny_config(num_layers=2, num_labels=2), tiny_config(num_layers=2, num_labels=2, vocab_size=77)
    cached = Stage("distil", [LossTerm("kd_kl"), LossTerm("attention_kl")])
    live = Stage("distil", [LossTerm("attention_mse"), LossTerm("attention_kl")])
    assert not teacher_runs_live(cached) and teacher_runs_live(live)
    for stage, same in ((cached, True), (live, False)):
        kinds = {step_point(base, t, (stage, None), "fp32", 8, 16).kind for t in (base, pruned)}
        assert (len(kinds) == 1) == same

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    timed = []

    def line(shape) -> float:   # seconds on a line in FLOPs, with an intercept: what an interpolation reads off
        return flops_per_sequence(shape, 16) / 1e6 + 0.5

    def fake_time_steps(student, teacher, stage, data, precision, batch_size, threads):
        timed.append((student.ffn_size, precision))
        return line(student)
    monkeypatch.setattr(probe, "_time_steps", fake_time_steps)
    teacher = tiny_config(num_layers=2, num_labels=2)
    stage = Stage("distil", [LossTerm("hard_ce")])
    recipe = (stage, Recipe("student", [stage], LayerMap("uniform")))
    small, middle, large, larger = (teacher.replace(ffn_size=f) for f in (32, 96, 128, 256))

    def served(probes: Probes, shape, precision: str = "fp32") -> float:
        return probes.step_seconds_of(shape, teacher, recipe, precision, 8)

    data = SimpleNamespace(cache_key="mr-tokens")
    first = Probes(data, 16, 2, 30)
    first.writable = True
    assert served(first, small) > 0 and served(first, large) > 0 and timed == [(32, "fp32"), (128, "fp32")]
    between = served(first, middle)
    assert timed == [(32, "fp32"), (128, "fp32")] and between == pytest.approx(line(middle))
    assert len(first.interpolated) == 1
    served(first, larger)
    served(first, middle, "bf16")   # outside, and another kind: each timed
    assert timed[2:] == [(256, "fp32"), (96, "bf16")]
    charged_first = first.take_charged()["step timing"]

    # primed with a kind's steps, a search times the fewest FLOPs, the median and the most, and interpolates the rest
    timed.clear()
    primed = Probes(SimpleNamespace(cache_key="other-task"), 16, 2, 30)
    shapes = [teacher.replace(ffn_size=f) for f in (256, 32, 128, 64, 96)]
    assert primed.prime([(shape, teacher, recipe) for shape in shapes], "fp32", 8) == 1
    assert timed == [(32, "fp32"), (96, "fp32"), (256, "fp32")]
    assert [served(primed, shape) for shape in shapes] and len(timed) == 3 and len(primed.interpolated) == 2

    timed.clear()
    again = Probes(data, 16, 2, 30)   # the same calls, on the cache the first filled: served, charged, not timed
    values = [served(again, small), served(again, large), served(again, middle), served(again, larger),
              served(again, middle, "bf16")]
    assert timed == [] and values[2] == between and len(again.interpolated) == 1
    assert charged_first == 0 and len(first.step_costs) == 4   # timed by the first: on its clock as they ran
    assert again.take_charged()["step timing"] == pytest.approx(sum(first.step_costs.values()))


def test_a_search_trains_its_candidates_and_finals_as_tasks_on_a_two_node_ray_cluster(tiny, tmp_path, ray_cluster):
    """`compress search --executor ray --address HOST:PORT`: every run, the candidates' one at a time and the finals'
    seeds side by side, is a Ray task on the cluster's two nodes; the answer is the one a search here gives."""
    space = tmp_path / "space.toml"
    space.write_text(SPACE.split("[int8]")[0])   # candidates that train, so the finals train a second seed
    out = tmp_path / "search-ray"
    done = run_cli("search", *tiny["args"], "--space", str(space), "--seeds", "2", "--against", "none",
                   "--finalists", "1", "--budget", "20m", "--seq-len", "64", "--out", str(out), "--executor", "ray",
                   "--address", ray_cluster.address, "--cpus-per-run", "1",
                   env={**tiny["env"], "COMPRESS_CACHE": str(tmp_path / "cache")})   # no stored runs: it trains
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ray: 2 CPUs" in done.stderr                        # the finals saw both nodes
    record = json.loads((out / "search.json").read_text())
    trained = [c["text"] for c in record["candidates"] if c["fidelity"] in ("partial", "full", "final")]
    assert record["status"] == "complete" and record["chosen"] and trained
    for name in {*trained, record["chosen"]}:              # every run it made finished as a task
        assert f"finished {name}@13 (ray)" in done.stderr
    assert f"finished {record['chosen']}@14 (ray)" in done.stderr


def test_a_search_resumed_with_another_recipe_starts_its_ledger_afresh(tmp_path):
    """The recipe is part of the question: a search interrupted under --recipe fast and run again with --recipe
    default keeps none of the candidates' evidence (their runs trained otherwise); under the same recipe it does."""
    from compress.search.ledger import CandidateRecord, read_record, write_record
    from compress.search.search import SearchConfig, _record
    from compress.search.space import Space
    from compress.task_metrics import resolve_metric

    metric = resolve_metric("accuracy", regression=False, classes=2)
    space = Space(values={})
    config = SearchConfig(recipe="fast")
    first = _record(config, space, 2, 64, None, metric)
    assert first.recipe == "fast"
    first.status, first.spent_s = "interrupted", 60.0
    first.candidates = [CandidateRecord(text="int8", params=1, size_bytes=2, flops=3, trains=False)]
    write_record(first, tmp_path)
    previous = read_record(tmp_path)
    assert previous.recipe == "fast"
    again = _record(config, space, 2, 64, previous, metric)
    assert [c.text for c in again.candidates] == ["int8"] and again.spent_s == 60.0
    other = _record(replace(config, recipe="default"), space, 2, 64, previous, metric)
    assert other.candidates == [] and other.spent_s == 0.0 and other.recipe == "default"
    from compress.search.report import render_markdown

    assert "every candidate and final trained with the default recipe" in render_markdown(other)


def test_a_search_begun_under_an_older_meaning_of_its_recipe_name_starts_afresh(tmp_path):
    """A search interrupted under ``default`` when that name meant another recipe (its search.json from before the
    record kept what the recipe does, or kept another) keeps none of its candidates' evidence when resumed; one
    begun under today's ``default`` does, and ``fast``, which still does what it always did, keeps its own too."""
    import json

    from compress.search.ledger import CandidateRecord, read_record, write_record
    from compress.search.search import SearchConfig, _record
    from compress.search.space import Space
    from compress.task_metrics import resolve_metric

    metric = resolve_metric("accuracy", regression=False, classes=2)
    space = Space(values={})

    def interrupted(recipe: str, **edit) -> None:
        first = _record(SearchConfig(recipe=recipe), space, 2, 64, None, metric)
        first.status, first.spent_s = "interrupted", 60.0
        first.candidates = [CandidateRecord(text="int8", params=1, size_bytes=2, flops=3, trains=False)]
        write_record(first, tmp_path)
        data = json.loads((tmp_path / "search.json").read_text())
        for key, value in edit.items():   # None: the field left out, as a record written before it existed
            if value is None:
                del data[key]
            else:
                data[key] = value
        (tmp_path / "search.json").write_text(json.dumps(data))

    def resumed(recipe: str) -> list[str]:
        return [c.text for c in _record(SearchConfig(recipe=recipe), space, 2, 64, read_record(tmp_path),
                                        metric).candidates]

    interrupted("default")
    assert read_record(tmp_path).recipe_does["copies"] >= 1 and resumed("default") == ["int8"]
    interrupted("default", recipe_does=None)                       # written before records said what it does
    assert resumed("default") == []
    interrupted("default", recipe_does={"copies": 1, "patience": 1})   # what the name meant in round 7
    assert resumed("default") == []
    interrupted("fast", recipe_does=None)                          # fast's key never changed
    assert read_record(tmp_path).recipe_does is None and resumed("fast") == ["int8"]

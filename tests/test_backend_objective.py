"""Backends chosen for the objective asked: a quantization left to choose its backend chooses by batch throughput at
the batch shape a throughput search (or `--choose-by throughput --batch-shape`) names, and a row whose runtime was
the fastest for one column only says so, with what the other would have given."""

from __future__ import annotations

import copy

import pytest
from helpers import make_tiny_teacher, write_tiny_csv

from compress.data.batching import tokenize_task
from compress.data.load import load_task
from compress.errors import CompressError
from compress.methods.quantization.details import CpuRecord, QuantDetails
from compress.models.checkpoints import load_encoder
from compress.registry import Context, get_method
from compress.registry.pipeline import for_throughput, parse
from compress.runs.compare_plan import chosen_by
from compress.teachers.registry import load_tokenizer


@pytest.mark.parametrize(("text", "bucketed", "filled"), [
    ("int8", "int8[choose_by=throughput,batch_shape=bucketed]", "int8[choose_by=throughput]"),
    ("distilbert+prune+int8", "distilbert+prune+int8[choose_by=throughput,batch_shape=bucketed]",
     "distilbert+prune+int8[choose_by=throughput]"),
    ("bf16", "bf16[choose_by=throughput,batch_shape=bucketed]", "bf16[choose_by=throughput]"),
    # a backend named, one backend only, one trained for, a choice already said, no runtime at all: as they are
    ("int8[backend=onnxruntime]", "int8[backend=onnxruntime]", "int8[backend=onnxruntime]"),
    ("mixed-bits", "mixed-bits", "mixed-bits"),
    ("qat-int8", "qat-int8", "qat-int8"),
    ("int8[choose_by=latency]", "int8[choose_by=latency]", "int8[choose_by=latency]"),
    ("distilbert+prune", "distilbert+prune", "distilbert+prune"),
])
def test_a_step_left_to_choose_its_backend_chooses_by_throughput_at_the_shape_asked(text, bucketed, filled):
    assert str(for_throughput(parse(text), "bucketed")) == bucketed
    assert str(for_throughput(parse(text), "filled")) == filled


def test_compare_choose_by_throughput_names_each_run_as_it_chooses():
    methods = ["int8", "distilbert", "distilbert+bf16", "int8[backend=torch]"]
    assert chosen_by(methods, "latency", "padded") == methods
    assert chosen_by(methods, "throughput", "padded") == [
        "int8[choose_by=throughput,batch_shape=padded]", "distilbert",
        "distilbert+bf16[choose_by=throughput,batch_shape=padded]", "int8[backend=torch]"]
    with pytest.raises(CompressError, match="--choose-by must be latency or throughput, got 'speed'"):
        chosen_by(methods, "speed", "filled")


def _speed(latency_ms: float, throughput: float, shape: str = "filled") -> dict:
    return {"seq_len": 48, "threads": 2, "latency_ms_p50": latency_ms, "throughput": throughput,
            "batch_ms_p50": 32_000 / throughput, "config": {"batch_size": 32, "repeats": 30, "batch_repeats": 10},
            "batch_shape": shape, "padding": 0.25 if shape != "filled" else 0.0}


def _details(backend: str, dev: dict[str, float]) -> QuantDetails:
    measured = {"onnxruntime": _speed(2.0, 400.0, "bucketed"), "openvino": _speed(2.5, 600.0, "bucketed"),
                "torch": _speed(4.0, 300.0, "bucketed")}
    return QuantDetails(backend=backend, dtype="int8", chosen_by="...", measured=measured, skipped={},
                        fp32_speed=_speed(8.0, 150.0), cpu=CpuRecord(), max_abs_logit_diff=0.1,
                        prediction_agreement=0.99, fp32_accuracy=0.8, accuracy_drop_points=0.1,
                        dev_accuracy=dev, fp32_dev_accuracy=0.8 if dev else None, min_retention=0.99 if dev else None)


def test_a_runtime_fastest_for_one_column_only_says_which_and_what_the_other_gave():
    kept = {"onnxruntime": 0.80, "openvino": 0.80, "torch": 0.80}
    by_latency = _details("onnxruntime", kept).runtime_note
    assert by_latency is not None and by_latency.startswith("timed on onnxruntime, the fastest at batch 1")
    assert ("openvino was the fastest at batch 32, test sentences bucketed by length" in by_latency
            and "(2.50 ms against 2.00 at batch 1, 600 examples/s against 400 at batch 32)" in by_latency
            and by_latency.endswith("choose_by=throughput runs on it"))
    by_throughput = _details("openvino", kept).runtime_note
    assert by_throughput is not None and by_throughput.startswith("timed on openvino, the fastest at batch 32")
    assert "onnxruntime was the fastest at batch 1 (2.00 ms against 2.50" in by_throughput
    assert by_throughput.endswith("choose_by=latency runs on it")
    # OpenVINO lost accuracy on dev (below 99% of fp32's): it could not be kept, so nothing else was faster
    assert _details("onnxruntime", kept | {"openvino": 0.78}).runtime_note is None
    # one backend measured, or the fastest for both: nothing to say
    one = _details("onnxruntime", {})
    one.measured = {"onnxruntime": one.measured["onnxruntime"]}
    assert one.runtime_note is None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("objective")
    teacher = make_tiny_teacher(root / "teacher", layers=2, hidden=32)
    task = load_task(str(write_tiny_csv(root / "reviews.csv", copies=2)))
    data = tokenize_task(task, load_tokenizer(str(teacher)), max_length=16, cache=False)
    return {"model": load_encoder(teacher).model.eval(), "task": task, "data": data}


def test_int8_chosen_by_throughput_times_every_backend_at_the_batch_shape_asked(tiny, tmp_path):
    method = get_method("int8")
    options = method.make_options({"choose_by": "throughput", "batch_shape": "bucketed", "min_retention": 1e-6})
    made = method.apply(copy.deepcopy(tiny["model"]), options,
                        Context(data=tiny["data"], task=tiny["task"], threads=1, workdir=tmp_path))
    details = made.details
    assert len(details.measured) > 1   # the choice was among several backends, each timed in bucketed batches
    assert {m["batch_shape"] for m in details.measured.values()} == {"bucketed"}
    assert made.speed["student"]["batch_shape"] == made.speed["source"]["batch_shape"] == "bucketed"
    # every backend kept the accuracy (min_retention 1e-6, the least it takes): the one of most examples a second is kept
    assert details.backend == max(details.measured, key=lambda b: details.measured[b]["throughput"])
    assert "the fastest at batch 32, test sentences bucketed by length" in details.chosen_by

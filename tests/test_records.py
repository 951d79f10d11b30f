"""metrics.json as a typed record: written and read back unchanged, schema 2 still read, anything else refused."""

from __future__ import annotations

import json

import pytest

from compress.errors import CompressError
from compress.reports.records import RUN_SCHEMA, ChainStep, DatasetRecord, ModelRecord, RunRecord, read_run_record

COMPONENTS = {"token_embeddings": 100, "attention": 40, "ffn": 60}


def _model(params: int, accuracy: float, **more) -> ModelRecord:
    return ModelRecord(params=params, classifier_params=2, params_by_component=COMPONENTS, flops=10 * params,
                       size_bytes=4 * params, accuracy=accuracy, macro_f1=accuracy - 0.01, **more)


def _speed(latency: float) -> dict:
    return {"latency_ms_p50": latency, "latency_ms_p90": latency * 1.1, "throughput": 1000 / latency,
            "threads": 1, "seq_len": 16, "config": {"batch_size": 32}}


@pytest.fixture
def record(tmp_path) -> RunRecord:
    student = _model(100, 0.8, layout="bert", config={"hidden_size": 8})
    return RunRecord(
        method="distilbert", kind="distillation", seconds=1.5, seq_len=16,
        dataset=DatasetRecord(name="mr", fingerprint="abc", sizes={"train": 8, "dev": 2, "test": 2},
                              label_names=["negative", "positive"]),
        teacher=_model(200, 0.82, dev_accuracy=0.83), student=student,
        retention=0.8 / 0.82, ratios={"params": 2.0, "flops": 2.0, "size_bytes": 2.0}, stages=[{"stage": "distill"}],
        speed={"teacher": _speed(10.0), "student": _speed(5.0)},
        chain=[ChainStep.of("distilbert", tmp_path, student, _speed(5.0))],
    )


def test_a_record_is_written_and_read_back_unchanged(record, tmp_path):
    data = record.to_dict()
    assert data["schema_version"] == RUN_SCHEMA == 4 and list(data)[0] == "schema_version"
    assert "source" not in data and "details" not in data           # only what the run has
    assert "backend" not in data["student"] and data["teacher"]["dev_accuracy"] == 0.83
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    assert read_run_record(tmp_path) == record
    assert read_run_record(tmp_path).chain[0].latency_ms_p50 == 5.0


def test_schema_2_is_read_with_the_run_as_its_one_step(record, tmp_path):
    data = record.to_dict() | {"schema_version": 2}
    del data["chain"]
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    old = read_run_record(tmp_path)
    assert old.chain == [ChainStep("distilbert", str(tmp_path), 100, 400, 1000, 0.8, 0.79, 5.0, 200.0)]


@pytest.mark.parametrize(("change", "expected"), [
    ({"schema_version": 1}, "schema version 1, this compress reads 2, 3 or 4; run it again"),
    ({"schema_version": None}, "schema version None"),
    ({"student": None}, "lacks student"),
    ({"teacher": {"params": 1}}, "does not have the shape of a run record"),
])
def test_other_records_are_refused_in_one_sentence(record, tmp_path, change, expected):
    data = {k: v for k, v in (record.to_dict() | change).items() if v is not None or k == "schema_version"}
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    with pytest.raises(CompressError) as raised:
        read_run_record(tmp_path)
    assert expected in str(raised.value) and "\n" not in str(raised.value)
    (tmp_path / "metrics.json").write_text("[1, 2]")
    with pytest.raises(CompressError, match="not a JSON object"):
        read_run_record(tmp_path)
    (tmp_path / "metrics.json").unlink()
    with pytest.raises(CompressError, match="no readable metrics.json"):
        read_run_record(tmp_path)


def _quantized(record: RunRecord) -> RunRecord:
    from compress.methods.quantization.details import CpuRecord, QuantDetails

    details = QuantDetails(backend="torch", dtype="int8", chosen_by="asked for with --backend torch",
                           measured={"torch": _speed(2.0)}, skipped={}, fp32_speed=_speed(5.0),
                           cpu=CpuRecord("a CPU", {"avx2": True}, "AVX2"), max_abs_logit_diff=0.01,
                           prediction_agreement=0.99, fp32_accuracy=0.8, accuracy_drop_points=0.5)
    record.method, record.kind, record.details = "int8", "quantization", details
    record.student.backend, record.student.dtype = "torch", "int8"
    return record


def test_a_methods_details_are_typed_and_read_back_unchanged(record, tmp_path):
    record = _quantized(record)
    data = record.to_dict()
    assert data["details"]["schema_version"] == 1 and data["details"]["cpu"]["features"] == {"avx2": True}
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    back = read_run_record(tmp_path)
    assert back == record and type(back.details).__name__ == "QuantDetails" and back.details.cpu.model == "a CPU"


def test_schema_3_keeps_the_details_in_the_block_of_the_methods_family(record, tmp_path):
    record = _quantized(record)
    data = record.to_dict() | {"schema_version": 3}
    data["quantization"] = {k: v for k, v in data.pop("details").items() if k != "schema_version"}
    del data["quantization"]["batched_accuracy"]   # older records lack what was measured later
    (tmp_path / "metrics.json").write_text(json.dumps(data))
    old = read_run_record(tmp_path)
    assert old.details == record.details and old.details.batched_accuracy is None

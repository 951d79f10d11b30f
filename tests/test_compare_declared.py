"""A comparison declared in a file (`compress compare --config`, TOML or YAML) and made again from its record
(`--like`): the same methods, seeds, precision and backends, the same accuracies; other package versions refused."""

from __future__ import annotations

import json

import pytest
from helpers import make_tiny_teacher, run_cli, write_tiny_csv

from compress.errors import CompressError
from compress.runs import declared
from compress.runs.declared import pin_backends, read_declared, version_differences

FAST = ("--batch-size", "16", "--teacher-epochs", "8", "--teacher-lr", "3e-3", "--teacher-batch-size", "16",
        "--threads", "1", "--repeats", "3")


def test_a_file_declares_settings_by_their_option_names(tmp_path):
    toml = tmp_path / "compare.toml"
    toml.write_text('methods = ["distilbert", "int8"]\nseeds = [13, 14]\nbatch-size = 16\nteacher_lr = 0.003\n')
    assert read_declared(toml)[0] == {"methods": ["distilbert", "int8"], "seeds": [13, 14], "batch_size": 16,
                                      "teacher_lr": 0.003}
    yaml = tmp_path / "compare.yaml"
    yaml.write_text("methods: distilbert,int8\nseeds: 3\ndedupe: true\n")
    assert read_declared(yaml)[0] == {"methods": "distilbert,int8", "seeds": 3, "dedupe": True}
    for text, expected in (("metods = ['int8']\n", "unknown setting 'metods'"),
                           ("epochs = 'two'\n", "epochs must be int, not 'two'"),
                           ("dedupe = 1\n", "dedupe must be bool"),
                           ("seeds = [13, 'x']\n", "seeds must list integers"),
                           ("methods = \n", "is not valid TOML")):
        toml.write_text(text)
        with pytest.raises(CompressError, match=expected):
            read_declared(toml)
    yaml.write_text("- int8\n")
    with pytest.raises(CompressError, match="must declare settings by name"):
        read_declared(yaml)


def test_the_backend_auto_chose_is_pinned_and_a_named_one_kept():
    record = {"methods": [{"method": "int8", "backend": "onnxruntime"}, {"method": "distilbert", "backend": None},
                          {"method": "distilbert+int8", "backend": "torch"},
                          {"method": "int8[backend=torch]", "backend": "torch"}]}
    assert pin_backends(["int8", "distilbert", "distilbert+int8", "int8[backend=torch]"], record) == \
        ["int8[backend=onnxruntime]", "distilbert", "distilbert+int8[backend=torch]", "int8[backend=torch]"]


def test_other_package_versions_are_named(monkeypatch):
    monkeypatch.setattr(declared, "package_versions", lambda names: {"torch": "2.13.0+cpu", "onnx": None})
    record = {"manifest": {"packages": {"torch": "2.12.0", "onnx": "1.23.2"}}}
    assert version_differences(record) == ["torch 2.13.0+cpu (recorded 2.12.0)", "onnx not installed (recorded 1.23.2)"]
    assert version_differences({"manifest": {"packages": {"torch": "2.13.0+cpu"}}}) == []


@pytest.fixture(scope="module")
def declared_comparison(tmp_path_factory):
    root = tmp_path_factory.mktemp("declared")
    teacher = make_tiny_teacher(root / "teacher", layers=2, hidden=32)
    csv = write_tiny_csv(root / "reviews.csv", copies=4)
    env = {"COMPRESS_CACHE": str(root / "cache")}
    config = root / "compare.toml"
    config.write_text(f'teacher = "{teacher}"\ndataset = "{csv}"\nmethods = ["distilbert", "distilbert+int8"]\n'
                      'seeds = 1\nepochs = 2\nprecision = "fp32"\nbatch_shape = "bucketed"\n')
    # a flag given on the command line wins over the file (--epochs), the file over the defaults
    done = run_cli("compare", "--config", str(config), "--epochs", "3", "--out", str(root / "first"), *FAST,
                   "--json", env=env)
    assert done.returncode == 0, done.stderr
    return {"root": root, "env": env, "config": config, "teacher": teacher, "csv": csv,
            "first": json.loads(done.stdout)}


def test_a_declared_comparison_records_its_settings_and_file(declared_comparison):
    first, config = declared_comparison["first"], declared_comparison["config"]
    assert [m["method"] for m in first["methods"]] == ["distilbert", "distilbert+int8"]
    assert first["config"]["epochs"] == 3 and first["config"]["precision"] == "fp32" and first["seeds"] == [13]
    assert first["config"]["methods"] == ["distilbert", "distilbert+int8"] and first["config"]["batch_size"] == 16
    assert first["config_file"] == {"name": "compare.toml", "text": config.read_text()}
    # throughput in the batch shape the file asked for, said in the record and the report
    speed = first["speed"]
    assert first["config"]["batch_shape"] == speed["batch_shape"] == "bucketed" and 0 < speed["padding"] < 1
    assert set(speed["batch_lengths"]) <= {16, 32, 64, max(speed["batch_lengths"])}
    report = (declared_comparison["root"] / "first" / "comparison.md").read_text()
    assert "test sentences bucketed by length" in report
    assert f"{speed['padding']:.0%} of the positions padding" in report


def test_like_makes_the_same_comparison_again(declared_comparison):
    root, env, first = declared_comparison["root"], declared_comparison["env"], declared_comparison["first"]
    record = root / "first" / "comparison.json"
    again = run_cli("compare", "--like", str(record), "--out", str(root / "again"), "--json", env=env)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    backend = first["methods"][1]["backend"]
    assert [m["method"] for m in second["methods"]] == ["distilbert", f"distilbert+int8[backend={backend}]"]
    # elsewhere, the student comes from the run store; its int8 step, its backend now pinned, is made afresh
    assert second["methods"][1]["backend"] == backend and second["reused"] == ["distilbert@13"]
    for key in ("seeds", "precision"):
        assert second[key] == first[key]
    assert {k: v for k, v in second["config"].items() if k != "methods"} == \
        {k: v for k, v in first["config"].items() if k != "methods"}
    # same seeds, same settings, same machine: the same models, so the same accuracies
    assert [m["accuracy"] for m in second["methods"]] == [m["accuracy"] for m in first["methods"]]

    # a record made with other package versions is refused in one line, before any work; told to, it goes on
    changed = json.loads(record.read_text())
    changed["manifest"]["packages"]["torch"] = "1.0.0"
    other = root / "other.json"
    other.write_text(json.dumps(changed))
    refused = run_cli("compare", "--like", str(other), "--out", str(root / "again"), env=env)
    assert refused.returncode != 0 and "torch" in refused.stderr and "(recorded 1.0.0)" in refused.stderr
    assert "--ignore-versions" in refused.stderr and "Traceback" not in refused.stderr
    went_on = run_cli("compare", "--like", str(other), "--ignore-versions", "--out", str(root / "again"), "--json",
                      env=env)
    assert went_on.returncode == 0, went_on.stderr
    assert len(json.loads(went_on.stdout)["reused"]) == 2   # the runs of --out made above, found complete


def test_like_reads_a_record_made_before_comparisons_kept_their_settings(declared_comparison, tmp_path):
    """An older record has only its command line: the methods are its rows, with the backends auto chose."""
    root, env = declared_comparison["root"], declared_comparison["env"]
    old = json.loads((root / "first" / "comparison.json").read_text())
    del old["config"], old["config_file"]
    old["command"] = f"compress compare --teacher {declared_comparison['teacher']} --dataset " \
                     f"{declared_comparison['csv']} --epochs 3 --batch-size 16 --teacher-epochs 8 --teacher-lr 3e-3 " \
                     "--teacher-batch-size 16 --threads 1 --repeats 3 --out /elsewhere"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    again = run_cli("compare", "--like", str(path), "--out", str(root / "again"), "--json", env=env)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert len(second["reused"]) == 2 and second["config"]["epochs"] == 3 and second["config"]["precision"] == "fp32"
    no_command = tmp_path / "bare.json"
    no_command.write_text(json.dumps(old | {"command": None}))
    refused = run_cli("compare", "--like", str(no_command), env=env)
    assert refused.returncode != 0 and "cannot be made again" in refused.stderr


def test_a_file_chooses_backends_by_throughput_at_its_batch_shape(declared_comparison, tmp_path):
    """`choose_by` in a file does what --choose-by does: each quantization left to choose its backend is named for
    the objective and the file's batch shape; a value it does not know is refused before any work."""
    root, env = declared_comparison["root"], declared_comparison["env"]
    config = tmp_path / "throughput.toml"
    config.write_text(f'teacher = "{declared_comparison["teacher"]}"\ndataset = "{declared_comparison["csv"]}"\n'
                      'methods = ["int8"]\nchoose_by = "throughput"\nbatch_shape = "padded"\n')
    done = run_cli("compare", "--config", str(config), "--out", str(root / "by-throughput"), *FAST, "--json", env=env)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert [m["method"] for m in made["methods"]] == ["int8[choose_by=throughput,batch_shape=padded]"]
    assert made["methods"][0]["backend"] in ("onnxruntime", "openvino", "torch")
    config.write_text(config.read_text().replace('"throughput"', '"speed"'))
    refused = run_cli("compare", "--config", str(config), "--out", str(root / "refused"), env=env)
    assert refused.returncode != 0 and "--choose-by must be latency or throughput, got 'speed'" in refused.stderr
    assert not (root / "refused").exists()

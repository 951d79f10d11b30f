"""What a user sees when their data is bad, and when `teachers verify` loads a run's model: our one line only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli, tiny_config

GOOD = [{"text": f"a review number {i}", "label": "pos" if i % 2 else "neg"} for i in range(30)]


def _jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_broken_jsonl_line_is_reported_once_with_its_1_based_line_number(tmp_path):
    # Line 5 is broken; a blank line before it makes the reader's 0-based row count (3) differ from it.
    lines = [json.dumps(row) for row in GOOD[:3]] + ["", '{"text": "oops, "label": "pos"}'] + \
        [json.dumps(row) for row in GOOD[3:]]
    path = _jsonl(tmp_path / "broken.jsonl", lines)
    done = run_cli("data", "show", str(path), env={"COMPRESS_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: could not read broken.jsonl as jsonl: line 5 is not valid JSON (Expecting ',' delimiter); "
        "fix or remove that line."]


def test_a_broken_json_array_names_its_line(tmp_path):
    from compress.data.load import load_task
    from compress.errors import CompressError

    rows = [json.dumps(row) for row in GOOD]
    rows[7] = '{"text": "oops" "label": "pos"}'
    path = tmp_path / "broken.json"
    path.write_text("[\n" + ",\n".join(rows) + "\n]\n", encoding="utf-8")
    with pytest.raises(CompressError, match=r"broken\.json as json: line 9 is not valid JSON"):
        load_task(path)


@pytest.mark.parametrize(("suffix", "blank"), [(".jsonl", ""), (".jsonl", "   "), (".jsonl", "\t"), (".csv", "   ")])
def test_blank_or_whitespace_only_text_is_refused(tmp_path, suffix, blank):
    rows = [dict(row) for row in GOOD]
    rows[4]["text"] = blank
    path = tmp_path / f"blank{suffix}"
    if suffix == ".jsonl":
        _jsonl(path, [json.dumps(row) for row in rows])
    else:
        path.write_text("text,label\n" + "".join(f"{r['text']},{r['label']}\n" for r in rows), encoding="utf-8")
    done = run_cli("data", "show", str(path), env={"COMPRESS_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: row 5 of blank{suffix} has no text in column 'text'; fill it in or drop the row."]


def test_teachers_verify_on_an_albert_run_prints_nothing_from_transformers(tmp_path):
    from compress.models.checkpoints import save_encoder
    from compress.models.encoder import Encoder
    from compress.teachers.registry import load_tokenizer, resolve_teacher_dir

    # An ALBERT run's student: shared layers, a factorised embedding and a classifier, which the bare
    # AutoModel that verify compares with leaves out (transformers reports those keys as unexpected).
    tokenizer = load_tokenizer(str(resolve_teacher_dir("minilm")))
    student = Encoder(tiny_config(vocab_size=tokenizer.vocab_size, embedding_size=16, sharing="all",
                                  max_positions=64, num_labels=2))
    assert save_encoder(student, tmp_path / "student", tokenizer=tokenizer, label_names=["neg", "pos"]) == "albert"
    done = run_cli("teachers", "verify", str(tmp_path / "student"))
    assert done.returncode == 0, done.stderr
    assert "(albert)" in done.stdout and "match" in done.stdout
    assert done.stderr == ""

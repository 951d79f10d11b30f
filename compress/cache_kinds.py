"""The kinds of entry the cache root (:func:`compress.paths.cache_dir`) holds, one folder each (:data:`KINDS`):
fine-tuned teachers, tokenized splits, the teacher's stored outputs, the run store, transfer data, probes and the rest.
Each entry is recognised by content compress wrote, never by its name (the ``checksums.json`` of :mod:`compress.cache`,
a dataset source's ``manifest.json``, an unfinished training's digest record, a probe file's own keys), and described
by what made it, read from the records it carries. Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The marker files entries carry, as the modules that write them name them (compress.cache.CHECKSUMS,
# compress.data.sources.MANIFEST; tests/test_cache_command.py checks they agree). Imported by name they would pull in
# torch, which `compress cache` does not need.
CHECKSUMS = "checksums.json"
MANIFEST = "manifest.json"
UNFINISHED_DIGESTS = "state.sha256.json"

_READ_LIMIT = 64 << 20         # the largest record read to recognise an entry or say what made it (a probe file grows)


def _read_json(path: Path) -> object:
    """The JSON value in ``path`` (a regular file of at most :data:`_READ_LIMIT` bytes), else None."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _READ_LIMIT:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _field(data: object, *keys: str) -> str | None:
    """``data[keys[0]][keys[1]]...`` as a short string where every step is there, else None."""
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    if data is None or isinstance(data, (dict, list)):
        return None
    text = str(data)
    return Path(text).name if "/" in text else text   # a teacher or corpus given as a path: its last part


def _has_checksums(entry: Path) -> bool:
    checksums = _read_json(entry / CHECKSUMS)
    return isinstance(checksums, dict) and isinstance(checksums.get("files"), dict)


def _is_data_source(entry: Path) -> bool:
    manifest = _read_json(entry / MANIFEST)
    return isinstance(manifest, dict) and isinstance(manifest.get("archive"), dict) and "files" in manifest


def _is_unfinished(entry: Path) -> bool:
    digests = _read_json(entry / UNFINISHED_DIGESTS)
    return isinstance(digests, dict) and isinstance(digests.get("sha256"), list)


def _is_ray_attempts(entry: Path) -> bool:
    """A comparison's record of its Ray tasks' starts (compress.runs.executors): a folder per run, a file per start,
    each holding ``{"ray_attempt": {...}}``."""
    try:
        starts = [f for run in entry.iterdir() if run.is_dir() for f in run.iterdir()]
    except OSError:
        return False
    return bool(starts) and all(isinstance(data := _read_json(f), dict) and "ray_attempt" in data for f in starts)


def _is_probe_file(entry: Path) -> bool:
    data = _read_json(entry)
    return isinstance(data, dict) and isinstance(data.get("context"), dict)


def _is_step_precision_file(entry: Path) -> bool:
    data = _read_json(entry)
    return isinstance(data, dict) and "schema" in data and isinstance(data.get("key"), dict)


def _made_by_teacher(entry: Path) -> str | None:
    record = _read_json(entry / "record.json")
    teacher, dataset = _field(record, "teacher"), _field(record, "dataset")
    return f"{teacher} fine-tuned on {dataset}" if teacher and dataset else None


def _made_by_general(entry: Path) -> str | None:
    record = _read_json(entry / "record.json")
    teacher, corpus = _field(record, "teacher"), _field(record, "corpus")
    return f"general distillation of {teacher} on {corpus}" if teacher and corpus else None


def _made_by_pretrain(entry: Path) -> str | None:
    record = _read_json(entry / "record.json")
    objective, teacher, corpus = _field(record, "objective"), _field(record, "teacher"), _field(record, "corpus")
    return f"{objective} pre-training from {teacher} on {corpus}" if objective and teacher and corpus else None


def _made_by_tokenized(entry: Path) -> str | None:
    meta = _read_json(entry / "meta.json")
    task, length = _field(meta, "task"), _field(meta, "max_length")
    return f"{task} tokenized to {length} tokens" if task and length else None


def _made_by_data(entry: Path) -> str | None:
    source = _field(_read_json(entry / MANIFEST), "archive", "source")
    return f"dataset {entry.name} from {source}" if source else None


def _made_by_run(entry: Path) -> str | None:
    config = _read_json(entry / "config.json")
    method, teacher, dataset = (_field(config, "run", key) for key in ("method", "teacher", "dataset"))
    if not method:   # a run whose config.json says less: its record names the method and the data
        metrics = _read_json(entry / "metrics.json")
        method, dataset = _field(metrics, "method"), _field(metrics, "dataset", "name")
    if not method:
        return None
    return f"run {method}" + (f" of {teacher}" if teacher else "") + (f" on {dataset}" if dataset else "")


def _split_of(entry: Path) -> str | None:
    """The split a stored teacher output is of: its name is TEACHER-TOKENIZATION-SPLIT[-...]."""
    parts = entry.name.split("-")
    return parts[2] if len(parts) >= 3 and parts[2].isalpha() else None


def _made_by_logits(entry: Path) -> str | None:
    split = _split_of(entry)
    return f"teacher logits on {split}" if split else None


def _made_by_targets(entry: Path) -> str | None:
    split = _split_of(entry)
    return f"teacher hidden states and attention on {split}" if split else None


def _made_by_probes(entry: Path) -> str | None:
    data = _read_json(entry)
    threads, seq = _field(data, "context", "threads"), _field(data, "context", "seq_len")
    return f"a search's speed probes ({threads} threads, {seq} tokens)" if threads and seq else None


def _made_by_step_precision(entry: Path) -> str | None:
    device = _field(_read_json(entry), "key", "device")
    return f"training-step timing on {device}" if device else None


@dataclass(frozen=True)
class Kind:
    """One folder under the cache root: what its entries are, whether they are files (else directories), how an
    entry of ours is recognised and what made it."""

    folder: str
    what: str                                  # what an entry holds, in a few words (also the fallback "made by")
    group: str                                 # the group the kind belongs to, as `compress cache list` sums them
    ours: Callable[[Path], bool]
    made_by: Callable[[Path], str | None] = lambda entry: None
    files: bool = False


KINDS: dict[str, Kind] = {kind.folder: kind for kind in (
    Kind("teachers", "fine-tuned teacher", "teachers", _has_checksums, _made_by_teacher),
    Kind("teacher_logits", "teacher logits", "stored teacher outputs", _has_checksums, _made_by_logits),
    Kind("teacher_targets", "teacher hidden states and attention", "stored teacher outputs", _has_checksums,
         _made_by_targets),
    Kind("run-store", "finished run", "run store", _has_checksums, _made_by_run),
    Kind("transfer", "augmented copies (transfer data)", "augmented copies", _has_checksums),
    Kind("search-probes", "a search's speed and step probes", "probes", _is_probe_file, _made_by_probes, files=True),
    Kind("step-precision", "training-step precision timing", "probes", _is_step_precision_file,
         _made_by_step_precision, files=True),
    Kind("data", "dataset source", "data", _is_data_source, _made_by_data),
    Kind("tokenized", "tokenized splits", "data", _has_checksums, _made_by_tokenized),
    Kind("general", "general-distilled student", "students", _has_checksums, _made_by_general),
    Kind("pretrain", "pre-trained encoder", "students", _has_checksums, _made_by_pretrain),
    Kind("unfinished", "checkpoint of an unfinished training", "unfinished training", _is_unfinished),
    Kind("ray-attempts", "starts of a running comparison's Ray tasks", "unfinished training", _is_ray_attempts),
)}

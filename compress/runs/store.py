"""Finished runs kept under the cache root, content-addressed, so a run made once is reused by every comparison and
search that asks for it again, whatever its ``--out``.

Every run that finishes, whether `compress run` made it or a comparison or a search did (they train through
:func:`compress.runs.pipeline.run`), is kept as ``run-store/KEY/``: a copy of the run directory as it was written
(a copy-on-write clone where the filesystem makes one, never a hard link: the store and the user's directories share
no file, so a byte changed on either side leaves the other as it was), with ``checksums.json`` verified before every use, built under the
entry's lock, like every cache entry (:mod:`compress.cache`). KEY is a digest of what decides the run's result and
nothing else: its settings as :func:`~compress.runs.config.result_settings` keeps them (not where it is written) with
the bar a search may stop it at, its options and recipe as its method resolves them today, the task's split
fingerprint, the teacher's weights (and a student's starting checkpoint's, ``init_from``) by their digest, what it
transforms (the teacher, or its parent run, named by the SHA-256 of the parent's test predictions, which changes
whenever the parent's model does), the method's ``revision`` past its first, and :data:`STORE_VERSION`.

Another directory that asks for the same run gets a copy of the entry, its paths rewritten to where it now lives
(its directory, its parent's, the chain of steps before it), and the copy is checked as a run found there would be
(:func:`~compress.runs.compare.completed_run`) before it is used. A run made by a version of compress whose training
gives other results is not reused: :data:`STORE_VERSION` changes with such a change, and so does every key.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from compress.cache import cached, verify
from compress.models.checkpoints import weights_digest
from compress.ownership import mark_run
from compress.paths import atomic_dir, cache_dir, clone_or_copy, reading
from compress.registry import StudentMethod, get_method
from compress.reports.records import RunRecord
from compress.runs.config import RunConfig, result_settings
from compress.teachers.registry import teacher_weights

# Bump when a change to training, evaluation or a method changes what a run with the same settings gives: every key
# changes with it, so no run made before is reused. 2: the keys name the teacher's weights (and a student's starting
# checkpoint's) by their digest, not only by their path.
STORE_VERSION = 2
CHECKSUMS = "checksums.json"


def _recorded(value: Any) -> Any:
    """``value`` as a JSON file holds it (paths and other objects as strings)."""
    return json.loads(json.dumps(value, default=str))


def run_key(config: RunConfig, parent: RunRecord | None, split_fingerprint: str) -> str:
    """The store's key of the run ``config`` asks for on the split ``split_fingerprint``, transforming ``parent``'s
    model (None: the teacher's)."""
    method = get_method(config.method)
    options = method.make_options(config.options)
    settings = {k: v for k, v in result_settings(asdict(config)).items() if k != "target"}
    # A bar (stop_below) may cut a run short: such a run is another run than one trained to the end.
    material: dict[str, object] = {"version": STORE_VERSION, "settings": settings,
                                "options": method.as_recorded(asdict(options)),
                                "split": split_fingerprint, "from": parent.predictions if parent else "teacher",
                                "bar": config.stop_below,
                                # a teacher (or a starting checkpoint) replaced at the same path is another run's
                                "teacher_weights": teacher_weights(config.teacher)}
    if getattr(options, "init_from", None):
        material["init_from_weights"] = weights_digest(Path(options.init_from))
    if method.revision > 1:   # absent at 1, so that the keys made before revisions existed still hold
        material["revision"] = method.revision
    if isinstance(method, StudentMethod):
        material["recipe"] = method.recipe(options).for_run(config.epochs, config.lr, config.layer_map).to_dict()
    text = json.dumps(_recorded(material), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _entry(key: str) -> Path:
    return cache_dir() / "run-store" / key


def keep(key: str, run_dir: Path) -> None:
    """Keep the finished run in ``run_dir`` under ``key`` (nothing when an intact entry is there already)."""
    cached(_entry(key), "stored run", lambda tmp: shutil.copytree(run_dir, tmp, dirs_exist_ok=True,
                                                                  copy_function=clone_or_copy), lambda t: t)


def restore(key: str, run_dir: Path, config: RunConfig, parent: tuple[Path, RunRecord] | None) -> bool:
    """Put the run stored under ``key`` at ``run_dir`` (which must not exist), its paths rewritten to its new place;
    whether there was one to restore."""
    entry = _entry(key)
    with reading(entry):   # a prune of the cache meanwhile leaves the entry alone
        if run_dir.exists() or verify(entry) is not None:
            return False
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        with atomic_dir(run_dir) as tmp:
            shutil.copytree(entry, tmp, dirs_exist_ok=True, copy_function=clone_or_copy,
                            ignore=shutil.ignore_patterns(CHECKSUMS))
            _relocate(tmp, run_dir, config, parent)
            mark_run(tmp)
    return True


def _relocate(directory: Path, run_dir: Path, config: RunConfig, parent: tuple[Path, RunRecord] | None) -> None:
    """Rewrite the paths a run's files name (its own directory and its parent's) from where it was made to
    ``run_dir``, whose parent run is ``parent`` (None: the teacher)."""
    saved = json.loads((directory / "config.json").read_text())
    old = {str(saved["run"]["out"]): str(run_dir)}
    if parent is not None and saved.get("parent"):
        old[str(saved["parent"])] = str(parent[0])

    def moved(text: str) -> str:
        for before, after in old.items():
            if text == before or text.startswith(before + os.sep):
                return after + text[len(before):]
        return text

    saved["run"] = _recorded(asdict(config))
    if isinstance(saved.get("parent"), str):
        saved["parent"] = moved(saved["parent"])
    if isinstance(saved.get("source"), dict):
        saved["source"] = {k: moved(v) if isinstance(v, str) else v for k, v in saved["source"].items()}
    (directory / "config.json").write_text(json.dumps(saved, indent=2, default=str))
    metrics = json.loads((directory / "metrics.json").read_text())
    chain = metrics.get("chain", [])
    if chain:
        before = [asdict(step) for step in parent[1].chain] if parent is not None else chain[:-1]
        metrics["chain"] = [*before, {**chain[-1], "run_dir": str(run_dir)}]
    if isinstance(metrics.get("source"), dict):
        metrics["source"] = {k: moved(v) if isinstance(v, str) else v for k, v in metrics["source"].items()}
    (directory / "metrics.json").write_text(json.dumps(metrics, indent=2))
    report = directory / "report.md"
    if report.is_file():
        text = report.read_text()
        for before, after in old.items():
            text = text.replace(before, after)
        report.write_text(text)

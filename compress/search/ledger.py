"""search.json: what a search asked, every candidate it considered and how far each got, where the time went, and
the verdict. Written after every candidate (atomically), so an interrupted search leaves what it found.

Fidelities, cheapest first (a candidate's ``fidelity`` is the last it reached):

    shape    parameters, bytes and FLOPs from its shape alone (every candidate)
    timed    its structure's speed measured here, untrained (candidates a speed objective could choose)
    partial  trained on one seed until its dev score could no longer reach the bar
    full     trained to the end on one seed, scored on the held-out sentences
    final    trained with every seed and scored on test in the finals (paired intervals)

The ``held_out_*`` numbers are on the sentences the search selects on (``selection``): training examples held out of
every run (no model trains on them or picks an epoch on them), or dev with ``--select-on dev``. Records of schema 1
named them ``dev_*`` (``dev_accuracy``, ``dev_retention``, ``dev_interval``, ``dev_retention_interval``,
``teacher_dev_accuracy``) whichever sentences they were on; they are read under the new names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from compress.errors import CompressError
from compress.paths import atomic_write_text

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

SEARCH_SCHEMA = 2
READABLE_SEARCH_SCHEMAS = (1, 2)
# Schema 1's names of the held-out numbers, by record: old name -> new name.
RENAMED_IN_2 = {
    "candidate": {"dev_accuracy": "held_out_accuracy", "dev_retention": "held_out_retention",
                  "dev_interval": "held_out_interval"},
    "final": {"dev_retention": "held_out_retention", "dev_retention_interval": "held_out_retention_interval"},
    "search": {"teacher_dev_accuracy": "teacher_held_out_accuracy"},
}
FIDELITIES = ("shape", "timed", "partial", "full", "final")


@dataclass
class CandidateRecord:
    """One candidate, as far as the search took it."""

    text: str
    params: int
    size_bytes: int
    flops: int
    trains: bool
    fidelity: str = "shape"
    status: str = "not reached"         # chosen, kept, below, ruled out, failed, not reached
    reason: str = ""                    # why it stopped where it did, in words
    objective: float | None = None      # ms at batch 1, ms per example at batch 32, or bytes (less is better)
    latency_ms: float | None = None     # measured on its untrained structure ("timed"), then on the trained model
    throughput: float | None = None
    backend: str | None = None
    held_out_accuracy: float | None = None    # its score on the held-out sentences, in the search's metric
    held_out_retention: float | None = None   # that score over the teacher's there
    held_out_interval: list[float] | None = None   # the retention's paired 95% interval (one seed, those sentences)
    run_dir: str | None = None
    seconds: float = 0.0                # this search's time on it: timing, training, evaluation
    order: int | None = None            # when it was trained (the path the search took), from 1

    @classmethod
    def from_dict(cls, data: JSONObject) -> CandidateRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in _renamed(data, "candidate").items() if k in names})


@dataclass
class Final:
    """A model of the finals: its test accuracy and retention over the seeds with their intervals, and speed."""

    text: str
    role: str                           # "chosen", "kept" (another candidate kept by the walk) or "reference"
    accuracy: float
    accuracy_interval: list[float]
    retention: float
    retention_interval: list[float]
    speedup: float                      # over the teacher at batch 1, median of the rounds, with its IQR
    speedup_iqr: list[float]
    throughput_speedup: float
    size_bytes: int
    params: int
    latency_ms: float
    run_dir: str
    held_out_retention: float           # over every seed: what chose it (the chosen one's is biased upward)
    held_out_retention_interval: list[float]
    speedup_passes: list[float] = field(default_factory=list)   # each timing pass's speed-up (none: before passes)

    def speedup_spread(self) -> str:
        """The speed-up's spread in words: its passes' range, or (recorded before passes) its rounds' IQR."""
        low, high, kind = (min(self.speedup_passes), max(self.speedup_passes), "passes") if self.speedup_passes \
            else (*self.speedup_iqr, "IQR")
        return f"{kind} {low:.2f}-{high:.2f}x"


# The share of the selection sentences a candidate near the bar and the teacher differ on in correctness, for the
# resolution a search states before training: on MR's dev split, distilbert differed from the teacher on 12.4% of the
# sentences, albert (further from the bar) on 18.6% (seed 13, the AMD EPYC, 2026-11-28).
DISAGREEMENT = 0.12


@dataclass
class SearchRecord:
    """search.json (see the module docstring)."""

    created: str
    command: str | None
    teacher: str
    dataset: str
    minimize: str
    min_retention: float
    budget_s: float
    seeds: list[int]
    space: dict[str, dict[str, list[Any]]]
    cpu: str
    threads: int
    seq_len: int
    teacher_held_out_accuracy: float | None = None   # the teacher's score, in ``metric``, on the held-out sentences
    bar: float | None = None            # the score a candidate needs there: min_retention x the teacher's
    resolution: float | None = None     # the half-width of a retention's paired interval near the bar on the
                                        # selection sentences, known before training (selection_resolution)
    selection: str = "dev"              # what it selected on: "held-out" training sentences, or "dev" (the
                                        # held_out_* fields of candidates and finals are on these sentences)
    status: str = "running"             # running, interrupted, complete
    spent_s: float = 0.0                # budget seconds over every invocation of this search: wall time, and work
                                        # reused from other searches or comparisons at what it cost then
    reused_s: float = 0.0               # of spent_s, that reused work
    seconds: dict[str, float] = field(default_factory=dict)   # by what it went to (see clock.TIME_CATEGORIES)
    candidates: list[CandidateRecord] = field(default_factory=list)
    chosen: str | None = None
    chosen_run: str | None = None
    finals: list[Final] = field(default_factory=list)
    differences: dict[str, list[float]] = field(default_factory=dict)   # "a - b" -> [estimate, low, high] points
    against: str | None = None
    notes: list[str] = field(default_factory=list)
    metric: str = "accuracy"            # what the bar, retention and every interval are of (a task metric's name)
    recipe: str | None = None           # what every candidate and final trained with (None: before recipes)
    copies_per_epoch: int | None = None  # the augmented copies each of their epochs learned from (None: the recipe's)
    recipe_does: dict[str, object] | None = None   # what that recipe did then, where its name no longer says
                                                   # (compress.distill.schedule.recipe_does; None: what it always did)
    schema_version: int = SEARCH_SCHEMA

    def to_dict(self) -> JSONObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSONObject) -> SearchRecord:
        if data.get("schema_version") not in READABLE_SEARCH_SCHEMAS:
            raise CompressError(f"search.json has schema version {data.get('schema_version')}, this compress reads "
                                f"{', '.join(map(str, READABLE_SEARCH_SCHEMAS))}.")
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in _renamed(data, "search").items() if k in names}
        values["candidates"] = [CandidateRecord.from_dict(c) for c in data.get("candidates", [])]
        values["finals"] = [Final(**_renamed(f, "final")) for f in data.get("finals", [])]
        values["schema_version"] = SEARCH_SCHEMA   # read under this schema's names: written back as this schema
        return cls(**values)

    def counts(self) -> dict[str, int]:
        """How many candidates reached each fidelity (a candidate that reached ``full`` passed ``timed`` too)."""
        reached = {name: 0 for name in FIDELITIES}
        for candidate in self.candidates:
            top = FIDELITIES.index(candidate.fidelity)
            for name in FIDELITIES[:top + 1]:
                if name == "timed" and candidate.latency_ms is None:
                    continue   # a size search never times: it passed from shape to training
                if name == "partial" and candidate.fidelity != "partial":
                    continue   # partial is a stop, not a step on the way to full
                reached[name] += 1
        return reached


_V = TypeVar("_V")


def _renamed(data: Mapping[str, _V], kind: str) -> dict[str, _V]:
    """``data`` with schema 1's names of the held-out numbers (:data:`RENAMED_IN_2`) under this schema's."""
    renames = RENAMED_IN_2[kind]
    return {renames.get(k, k): v for k, v in data.items()}


def write_record(record: SearchRecord, directory: Path) -> Path:
    path = Path(directory) / "search.json"
    atomic_write_text(path, json.dumps(record.to_dict(), indent=1) + "\n")
    return path


def read_record(directory: Path) -> SearchRecord | None:
    """The search.json in ``directory``, or None when there is none (one that cannot be read is an error)."""
    path = Path(directory) / "search.json"
    if not path.is_file():
        return None
    try:
        return SearchRecord.from_dict(json.loads(path.read_text()))
    except (ValueError, TypeError, KeyError) as e:
        raise CompressError(f"{path} cannot be read ({e}); move it away or choose another --out.") from None

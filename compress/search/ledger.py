"""search.json: what a search asked, every candidate it considered and how far each got, where the time went, and
the verdict. Written after every candidate (atomically), so an interrupted search leaves what it found.

Fidelities, cheapest first (a candidate's ``fidelity`` is the last it reached):

    shape    parameters, bytes and FLOPs from its shape alone (every candidate)
    timed    its structure's speed measured here, untrained (candidates a speed objective could choose)
    partial  trained on one seed until its dev accuracy could no longer reach the bar
    full     trained to the end on one seed, scored on dev
    final    trained with every seed and scored on test in the finals (paired intervals)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from compress.errors import CompressError
from compress.paths import atomic_write_text

SEARCH_SCHEMA = 1
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
    dev_accuracy: float | None = None
    dev_retention: float | None = None
    dev_interval: list[float] | None = None   # its paired 95% interval (one seed, the dev sentences)
    run_dir: str | None = None
    seconds: float = 0.0                # this search's time on it: timing, training, evaluation
    order: int | None = None            # when it was trained (the path the search took), from 1

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CandidateRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


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
    dev_retention: float                # over every seed: what chose it (the chosen one's is biased upward)
    dev_retention_interval: list[float]
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
    teacher_dev_accuracy: float | None = None   # the teacher's score, in ``metric``, on the selection sentences
    bar: float | None = None            # the score a candidate needs there: min_retention x the teacher's
    resolution: float | None = None     # the half-width of a retention's paired interval near the bar on the
                                        # selection sentences, known before training (selection_resolution)
    selection: str = "dev"              # what it selected on: "held-out" training sentences, or "dev" (the dev_*
                                        # fields of candidates and finals are on these sentences)
    status: str = "running"             # running, interrupted, complete
    spent_s: float = 0.0                # budget seconds over every invocation of this search: wall time, and work
                                        # reused from other searches or comparisons at what it cost then
    reused_s: float = 0.0               # of spent_s, that reused work
    seconds: dict[str, float] = field(default_factory=dict)   # by what it went to (see search.TIME_CATEGORIES)
    candidates: list[CandidateRecord] = field(default_factory=list)
    chosen: str | None = None
    chosen_run: str | None = None
    finals: list[Final] = field(default_factory=list)
    differences: dict[str, list[float]] = field(default_factory=dict)   # "a - b" -> [estimate, low, high] points
    against: str | None = None
    notes: list[str] = field(default_factory=list)
    metric: str = "accuracy"            # what the bar, retention and every interval are of (a task metric's name)
    schema_version: int = SEARCH_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchRecord:
        if data.get("schema_version") != SEARCH_SCHEMA:
            raise CompressError(f"search.json has schema version {data.get('schema_version')}, this compress reads "
                                f"{SEARCH_SCHEMA}.")
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["candidates"] = [CandidateRecord.from_dict(c) for c in data.get("candidates", [])]
        values["finals"] = [Final(**f) for f in data.get("finals", [])]
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

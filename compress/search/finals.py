"""The search's finals (stage 4 of :mod:`compress.search.search`): the candidates the walk kept, and the reference,
trained with every seed and compared on test in one comparison; the chosen model is the best, by the finals' own
measurement, of those whose held-out retention over every seed meets the bar (where none does, of those whose
interval still reaches it, and the ledger says so). Test judges here, once: nothing before the finals reads it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from compress.reports.records import read_run_record
from compress.runs.compare import compare as run_compare
from compress.search.ledger import Final
from compress.search.screen import Selection
from compress.stats import pass_speedup

if TYPE_CHECKING:
    from compress.search.walk import Walk


def run_finals(walk: Walk) -> None:
    """The kept candidates (the best ``finalists``) and the reference with every seed, compared in one process;
    the chosen one is the best by the finals' own measurement of those whose held-out retention over every seed
    meets the bar, or, where none does, of those it cannot be told below (the report says which); the reference
    counts when it is a candidate of the space."""
    config, record, say = walk.config, walk.record, walk.say
    kept = walk.finalists()
    if not kept:
        record.notes.append("No candidate's selection retention reached the bar within the budget: nothing was "
                            "chosen.")
        return
    met = [s.candidate.text for s in kept if walk.met_bar(s)]
    if len(met) < config.finalists:
        said = f"only {', '.join(met)} met" if met else "none met"
        reaching = [s.candidate.text for s in kept if not walk.met_bar(s)]
        also = f"the finals take {', '.join(reaching)} because their intervals reach it" if reaching else \
            "no other candidate was kept to go with it"
        record.notes.append(
            f"Of the candidates trained within the budget, {said} {config.min_retention:.0%} of the "
            f"teacher's selection {walk.metric.title} on the mean; {also}.")
        say(record.notes[-1])
    methods = [s.candidate.text for s in kept]
    if config.against and config.against not in methods:
        methods.append(config.against)
    say(f"finals: {', '.join(methods)} with seeds {', '.join(map(str, config.seeds))}")
    with walk.clock.on("finals"):
        _, comparison = run_compare(replace(walk.compare_config, methods=methods, out=str(walk.out)), say)
    rows = {m.method: m for m in comparison.methods}
    in_space, kept_texts = {s.candidate.text for s in walk.states}, {s.candidate.text for s in kept}
    finals = [final(walk.selection, rows[text], "kept" if text in kept_texts else "reference") for text in methods]
    bar = config.min_retention
    met_finals = [f for f in finals if f.text in in_space and f.held_out_retention >= bar]
    plausible = [f for f in finals if f.text in in_space and f.held_out_retention_interval[1] >= bar]
    if met_finals or plausible:
        chosen = min(met_finals or plausible, key=lambda f: final_objective(f, config.minimize))
        chosen.role = "chosen"
        record.chosen, record.chosen_run = chosen.text, chosen.run_dir
        if not met_finals:
            record.notes.append(
                f"No finalist kept {bar:.0%} of the teacher's selection {walk.metric.title} over every seed; the "
                f"chosen one kept {chosen.held_out_retention:.1%} ({chosen.held_out_retention_interval[0]:.1%} to "
                f"{chosen.held_out_retention_interval[1]:.1%}): below the bar, within its interval.")
    else:
        record.notes.append("With every seed, no finalist's selection retention could still reach the bar: "
                            "nothing was chosen.")
    record.finals = finals
    for difference in comparison.differences:
        if {difference.a, difference.b} <= set(methods):
            interval = difference.accuracy
            record.differences[f"{difference.a} - {difference.b}"] = [interval["estimate"], interval["low"],
                                                                      interval["high"]]
    if record.chosen and config.against and config.against != record.chosen:
        slow, fast = rows[config.against], rows[record.chosen]
        speedup, passes = pass_speedup(slow.latency_passes_ms, fast.latency_passes_ms)
        record.differences[f"speed-up of {record.chosen} over {config.against}, passes"] = [
            speedup, min(passes), max(passes)]
        if config.minimize == "throughput":   # what it was chosen for: each pass's large batches
            ratios = [s / f for s, f in zip(slow.batch_passes_ms, fast.batch_passes_ms, strict=True)]
            record.differences[f"throughput of {record.chosen} over {config.against}, passes"] = [
                float(np.median(ratios)), min(ratios), max(ratios)]
    for state in walk.states:
        if state.candidate.text in methods:
            state.record.fidelity = "final"
            state.record.status = "chosen" if state.candidate.text == record.chosen else state.record.status


def final_objective(final: Final, minimize: str) -> float:
    """Less is better: the finals' measured speed-up (negated) or bytes."""
    return {"latency": -final.speedup, "throughput": -final.throughput_speedup,
            "size": float(final.size_bytes)}[minimize]


def final(selection: Selection, row: Any, role: str) -> Final:
    """One finalist's row: its test numbers from the comparison, its held-out retention over every seed."""
    runs = [(Path(seed.run_dir), read_run_record(Path(seed.run_dir))) for seed in row.per_seed]
    held_out = selection.retention_over_seeds(row.method, runs)
    return Final(text=row.method, role=role, accuracy=row.accuracy, accuracy_interval=_pair(row.accuracy_interval),
                 retention=row.retention, retention_interval=_pair(row.retention_interval), speedup=row.speedup,
                 speedup_iqr=list(row.speedup_iqr or [row.speedup, row.speedup]),
                 speedup_passes=list(row.speedup_passes),
                 throughput_speedup=row.throughput_speedup, size_bytes=row.size_bytes, params=row.params,
                 latency_ms=row.latency_ms_p50, run_dir=row.run_dir, held_out_retention=held_out["estimate"],
                 held_out_retention_interval=[held_out["low"], held_out["high"]])


def _pair(interval: Any) -> list[float]:
    return [interval["low"], interval["high"]] if interval else []

"""The walk over a search's candidates (stages 2 and 3 of :mod:`compress.search.search`): the schedule.

Candidates are taken in order of their objective, measured on their untrained structure where not measured yet
(:mod:`.probe`; until then a fit of the speed of their kind against FLOPs places them), and trained on the first seed
step by step, each step screened on the held-out sentences (:mod:`.screen`); after a miss the walk bisects between
what missed and what met the bar. A candidate is ruled out without training when a step of it, or a candidate it
compresses at least as much as, missed the bar; it is left when the budget (:mod:`.clock`) cannot hold its training
and the finals it would be part of (:mod:`.costs`); the walk ends once ``finalists`` candidates that met the bar on
their held-out mean are better than everything left. The finals are :mod:`.finals`'s.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from compress.distill.schedule import epoch_examples
from compress.errors import CompressError
from compress.interrupts import raise_if_interrupted
from compress.models.config import EncoderConfig
from compress.registry import Transform
from compress.reports.records import RunRecord
from compress.runs.compare import _run_or_reuse, run_dir_of, stopped_by_bar
from compress.runs.compare_plan import CompareConfig, plan_runs, plan_seeds
from compress.runs.executors import run_step
from compress.search.clock import Clock, format_seconds
from compress.search.costs import RunCosts, trains_nothing
from compress.search.ledger import DISAGREEMENT, CandidateRecord, SearchRecord, write_record
from compress.search.probe import Probes, SpeedFit, Timed, footprint, structure_key
from compress.search.report import resolution_line
from compress.search.resolution import selection_resolution
from compress.search.screen import Screen, Selection
from compress.search.space import Candidate, Space, compresses_at_least
from compress.task_metrics import resolve_metric

SAVE_EVERY_S = 30.0   # search.json is written at least this often while candidates are left for want of budget
# Speed probes (timing untrained structures) take at most this share of the budget; past it, the structures not timed
# yet are ordered by the fit of those timed. A 45-minute search that timed 917 structures one after another spent
# its whole budget probing and trained one candidate.
PROBE_SHARE = 0.10
PROBE_REPORT_S = 30.0   # while probing, a line of progress at least this often


# --- the candidates' state ---------------------------------------------------------------------------


@dataclass
class State:
    """A candidate and what the search knows of it."""

    candidate: Candidate
    record: CandidateRecord
    kind: str                      # how its last step runs models (structures of one kind are fitted together)
    timed: Timed | None = None


def _kind(candidate: Candidate) -> str:
    last = candidate.methods[-1]
    return str(candidate.pipeline.steps[-1]) if isinstance(last, Transform) and last.probe else "torch"


class Walk:
    """The walk over the candidates (see the module docstring); :func:`.finals.run_finals` takes it from there."""

    def __init__(self, config: Any, space: Space, found: list[Candidate], probes: Probes, record: SearchRecord,
                 clock: Clock, out: Path, task: Any, say: Callable[[str], None], show_progress: bool,
                 precision: str, teacher: EncoderConfig, compare_config: CompareConfig) -> None:
        self.config, self.space, self.probes, self.record, self.clock = config, space, probes, record, clock
        self.out, self.task, self.say, self.show_progress = out, task, say, show_progress
        self.precision, self.teacher, self.compare_config = precision, teacher, compare_config
        self.states = []
        resumed = {c.text: c for c in record.candidates}   # what an interrupted run of this search found
        for candidate in found:
            size = footprint(candidate, probes.seq_len)
            self.states.append(State(candidate, resumed.get(candidate.text) or CandidateRecord(
                candidate.text, size.params, size.size_bytes, size.flops, candidate.trains), _kind(candidate)))
        record.candidates = [s.record for s in self.states]
        for state in self.states:   # timed by an interrupted run of this search: on its clock already
            if state.record.latency_ms is not None:
                probes.served.add(structure_key(state.candidate, teacher))
        self.fit = SpeedFit()
        # By kind, the backends that were fastest on one of its structures: the least and the most costly structure
        # of a kind are timed on every backend, the others only on those.
        self.winners: dict[str, set[str]] = {}
        self.kept: list[State] = []
        self.failed: list[Candidate] = []        # the steps (pipelines) that missed the bar
        self.runs: dict[str, tuple[Path, RunRecord]] = {}   # by pipeline text, first seed
        self.trained = max((s.record.order or 0 for s in self.states), default=0)
        self.costs = RunCosts(out, compare_config, task.fingerprint, teacher, probes, clock, precision,
                              config.batch_size, partial(epoch_examples, config.recipe, len(task.splits["train"]),
                                                         config.copies_per_epoch))
        self.probes_spent = False                 # speed probes took their share of the budget (may_probe)
        # The best objective that missed the bar on its mean, and its candidate (next_position bisects above it).
        self.floor: tuple[float, str] | None = None
        self.cheap: dict[int, bool] = {}          # by candidate index: whether it trains nothing (trains_nothing)
        self.cheap_left = True                    # one may lie above the floor (next_position)
        self.metric = resolve_metric(config.metric, regression=task.regression, classes=task.num_labels)
        self.selection = Selection(task, self.metric, clock, probes.speed.threads, show_progress)
        self.least_training_s: float | None = None   # the cheapest full training of a first step (search.py sets it)
        self.last_report = time.perf_counter()    # the last line of probing progress
        self.saved_at = time.perf_counter()       # search.json's last write

    # -- the teacher and the bar ----------------------------------------------------------------

    def prepare(self) -> None:
        """The fine-tuned teacher and its predictions (:meth:`.screen.Selection.prepare`), the bar, how finely the
        held-out sentences resolve a retention near it, and the dev score below which a stage stops."""
        self.selection.prepare(self.config)
        score = self.selection.teacher_score()
        self.record.teacher_held_out_accuracy = score["estimate"]
        self.bar = self.config.min_retention * score["estimate"]
        self.record.bar = self.bar
        self.record.resolution = selection_resolution(self.selection.teacher, self.metric, self.config.min_retention,
                                                      DISAGREEMENT)
        self.say(resolution_line(self.record, len(self.selection.teacher.labels)))
        self.stop_below = self.selection.stop_below(self.config.min_retention)
        self.costs.compare_config = replace(self.compare_config, stop_below=self.stop_below)

    # -- objective ------------------------------------------------------------------------------

    def objective(self, state: State) -> float | None:
        """Less is better; None while a speed objective has neither a measurement nor a fit for it."""
        if self.config.minimize == "size":
            return float(state.record.size_bytes)
        if state.timed is not None:
            return state.timed.objective(self.config.minimize)
        return self.fit.estimate(state.kind, state.record.flops)

    def time_structure(self, state: State, every_backend: bool = False) -> None:
        with self.clock.on("speed probes"):
            start = time.perf_counter()
            state.timed = self.probes.time(state.candidate, self.teacher, self.config.minimize,
                                           None if every_backend else self.winners.get(state.kind))
            state.record.seconds += time.perf_counter() - start
        self.clock.charge_all(self.probes.take_charged())
        state.record.latency_ms, state.record.throughput = state.timed.latency_ms, state.timed.throughput
        state.record.backend = state.timed.backend
        if state.record.fidelity == "shape":   # a trained one timed after (after_training) keeps what it reached
            state.record.fidelity = "timed"
        state.record.objective = state.timed.objective(self.config.minimize)
        self.fit.add(state.kind, state.record.flops, state.record.objective)
        self.winners.setdefault(state.kind, set()).add(state.timed.backend)

    def _seed_fits(self) -> None:
        """Time the structures every kind's fit starts from: its least and its most costly (by FLOPs)."""
        by_kind: dict[str, list[State]] = {}
        for state in self.states:
            by_kind.setdefault(state.kind, []).append(state)
        for states in by_kind.values():
            ends = (min(states, key=lambda s: s.record.flops), max(states, key=lambda s: s.record.flops))
            for state in {id(s): s for s in ends}.values():
                if not self.may_probe():
                    return
                self.time_structure(state, every_backend=True)
                self.probing_progress()

    # -- the walk -------------------------------------------------------------------------------

    def run(self) -> None:
        self.say(f"search: {len(self.states)} candidates, minimize {self.config.minimize} keeping "
                 f"{self.config.min_retention:.0%} of the teacher's selection {self.metric.title}, budget "
                 f"{format_seconds(self.config.budget_s)}")
        self.prepare()
        if self.config.minimize == "size":
            for state in self.states:
                state.record.objective = float(state.record.size_bytes)
        else:
            self._seed_fits()
        # By objective, then (a tie: one structure with or without a pruned vocabulary) the shorter pipeline.
        order = sorted((math.inf if (key := self.objective(state)) is None else key, len(state.candidate.methods), i)
                       for i, state in enumerate(self.states))
        while order:
            key, steps, index = order.pop(self.next_position(order))
            state = self.states[index]
            if self.least_training_s is not None and self.config.budget_s - self.clock.spent < self.least_training_s:
                self.say(f"the {format_seconds(self.config.budget_s - self.clock.spent)} left of the budget cannot "
                         f"hold any training (the cheapest: about {format_seconds(self.least_training_s)}): the walk "
                         "ends here")
                for _, _, left_index in [(key, steps, index), *order]:
                    self.states[left_index].record.reason = "the budget ended before it was reached"
                break
            enough = self.enough()
            if enough is not None and key >= (self.objective(enough) or math.inf):
                self._not_reached(order + [(key, steps, index)], enough)
                break
            if (reason := self.ruled_out(state)) is not None:   # before timing it: no need to know its speed
                state.record.status, state.record.reason = "ruled out", reason
                continue
            if self.config.minimize != "size" and state.timed is None and self.may_probe():
                self.time_structure(state)
                self.probing_progress()
                bisect.insort(order, (self.objective(state) or math.inf, steps, index))
                continue
            try:
                self.consider(state)
            except CompressError as e:   # a candidate its steps cannot make (a shape a step refuses): the next one
                raise_if_interrupted(e)
                state.record.status, state.record.reason = "failed", str(e)
                self.say(f"    failed: {e}")
            self.after_training(state, key)
            # search.json after every candidate trained; one only left for want of budget (a reason, nothing to
            # resume from) waits for the next save: each save writes every candidate (1.8 MB for 3,209), and
            # saving after each of the 1,580 left in the first 90-minute search took minutes of its budget.
            if state.record.order is not None or time.perf_counter() - self.saved_at >= SAVE_EVERY_S:
                self.save()

    def after_training(self, state: State, key: float) -> None:
        """Once ``state`` is trained: its structure timed where the probes' share left it to the fit, and, below the
        bar on its mean, the floor the walk bisects above (at ``key``, its place in the order). The fit is optimistic
        on purpose (so an untimed structure is timed before the walk passes it over); what the walk trained it ranks,
        ends on, rules out by and takes to the finals by its objective, so that must be measured: a 120-minute search
        once took distilbert+prune+lowrank at the fit's floor (0.50 ms, half the fastest of its kind timed) for its
        best model, ruled out 11 that compress more as no better, reserved its finals for it, which left no room to
        train another, and timed it in those finals at 5.1 ms. A second or so of timing against minutes of
        training."""
        if state.record.status not in ("below", "kept"):
            return
        if self.config.minimize != "size" and state.timed is None:
            self.time_structure(state)
        if not self.met_bar(state) and (self.floor is None or key > self.floor[0]):
            self.floor = (key, state.candidate.text)

    def next_position(self, order: list[tuple[float, int, int]]) -> int:
        """Where in ``order`` (sorted by objective) the walk goes next: the best candidate until one misses the bar;
        after a miss, while none has met the bar, the best above the miss that trains nothing (the teacher quantized:
        seconds to make, and likely to meet it), so the walk soon holds a model that meets the bar; then the candidate
        nearest the geometric middle between the best objective that missed (the floor) and the best that met the
        bar (or, while none has, the worst objective left), a bisection that reaches the bar's edge in a few
        trainings where walking up from the most compressed spent a 90-minute size search on ten that missed; once
        nothing lies between, the best above the floor (the walk as before, from there); and once nothing is left
        above the floor, what is below it."""
        if self.floor is None:
            return 0
        floor, first = self.floor[0], (lambda entry: entry[0])
        low = bisect.bisect_right(order, floor, key=first)
        best = min((m for s in self.kept if self.met_bar(s) and (m := self.objective(s)) is not None), default=None)
        if best is None and self.cheap_left:
            cheap = next((i for i in range(low, len(order)) if self.trains_nothing(order[i][2])), None)
            if cheap is not None:
                return cheap
            self.cheap_left = False   # the floor only rises: none will lie above it again (no scan each step)
        high = bisect.bisect_left(order, best, lo=low, key=first) if best is not None else len(order)
        finite = bisect.bisect_left(order, math.inf, lo=low, hi=high, key=first)   # untimed, unfitted ones last
        if finite > low:
            middle = math.sqrt(max(floor, 1e-12) * (best if best is not None else order[finite - 1][0]))
            near = bisect.bisect_left(order, middle, lo=low, hi=finite, key=first)
            return min((i for i in (near - 1, near) if low <= i < finite),
                       key=lambda i: abs(math.log(max(order[i][0], 1e-12) / middle)))
        return low if low < len(order) else 0

    def trains_nothing(self, index: int) -> bool:
        if index not in self.cheap:
            self.cheap[index] = trains_nothing(self.states[index].candidate, self.teacher)
        return self.cheap[index]

    def met_bar(self, state: State) -> bool:
        """Whether a kept candidate's selection retention (its mean on the selection sentences) meets the bar."""
        return state.record.held_out_retention is not None and \
            state.record.held_out_retention >= self.config.min_retention

    def enough(self) -> State | None:
        """The last of the ``finalists`` best candidates that met the bar on their held-out mean, once that many have:
        anything worse is not needed. Candidates kept only because their interval reaches the bar do not end the
        walk: it goes on to less compressed ones until enough meet it on the mean, or the budget ends."""
        met = sorted((s for s in self.kept if self.met_bar(s)), key=lambda s: self.objective(s) or math.inf)
        return met[self.config.finalists - 1] if len(met) >= self.config.finalists else None

    def finalists(self, joining: State | None = None) -> list[State]:
        """The finals' candidates: the best of those that met the bar on their held-out mean, then, where fewer did,
        the best of those kept because their interval reaches it; ``joining``, a candidate not yet trained, among
        them as if it met the bar."""
        kept = [*self.kept, joining] if joining is not None else self.kept
        ranked = sorted(kept, key=lambda s: (not (s is joining or self.met_bar(s)), self.objective(s) or math.inf))
        return ranked[:self.config.finalists]

    def _not_reached(self, order: list[tuple[float, int, int]], enough: State) -> None:
        what = "larger" if self.config.minimize == "size" else "slower"
        last = self.objective(enough) or math.inf
        for key, _, index in order:
            state = self.states[index]
            if state.record.status == "not reached":
                measured = "measured" if state.timed or self.config.minimize == "size" else "estimated"
                below = "at most as large as" if self.config.minimize == "size" else "at least as fast as"
                state.record.reason = f"{measured} {what} than {enough.candidate.text}, the finals' last candidate" \
                    if key >= last or self.floor is None else f"{measured} {below} {self.floor[1]}, which missed " \
                    "the bar on its selection mean (the walk bisected above it)"

    def ruled_out(self, state: State) -> str | None:
        """Why ``state`` cannot meet the bar without training it, or None."""
        for failed in self.failed:   # a step that missed it: its own pipelines, and whatever compresses more
            if compresses_at_least(state.candidate, failed, self.space):
                return f"it compresses at least as much as {failed.text}, which missed the bar"
        for kept in self.kept:   # no better, and (by the same rule) no more accurate: nothing to learn from it
            if compresses_at_least(state.candidate, kept.candidate, self.space) and \
                    (self.objective(state) or math.inf) >= (self.objective(kept) or math.inf):
                return f"it compresses at least as much as {kept.candidate.text}, kept, and is no better"
        return None

    def may_probe(self) -> bool:
        """Whether speed probes may go on: they take at most :data:`PROBE_SHARE` of the budget; the first time they
        may not, the walk says so and goes on with the fit's estimates for the structures not timed."""
        if self.clock.seconds["speed probes"] < PROBE_SHARE * self.config.budget_s:
            return True
        if not self.probes_spent:
            self.probes_spent = True
            timed = sum(s.timed is not None for s in self.states)
            self.say(f"speed probes have taken their {PROBE_SHARE:.0%} of the budget ({timed} structures timed): the "
                     "others are ordered by the fit of those timed")
            self.record.notes.append(f"Speed probes stopped at {PROBE_SHARE:.0%} of the budget after {timed} "
                                     "structures; the candidates not timed were ordered by the fit of those timed.")
        return False

    def probing_progress(self) -> None:
        """A line every :data:`PROBE_REPORT_S` seconds while structures are timed one after another."""
        now = time.perf_counter()
        if now - self.last_report < PROBE_REPORT_S:
            return
        self.last_report = now
        timed = [s for s in self.states if s.timed is not None]
        fastest = min(timed, key=lambda s: self.objective(s) or math.inf)
        self.say(f"  probing: {len(timed)} structures timed ({format_seconds(self.clock.seconds['speed probes'])} of "
                 f"the {format_seconds(PROBE_SHARE * self.config.budget_s)} probes may take); fastest so far "
                 f"{fastest.candidate.text}, {self._shown(fastest)} untrained")

    def consider(self, state: State) -> None:
        """Leave ``state`` for want of budget, or train it (the first seed, step by step)."""
        first = ([state.candidate], self.config.seeds[:1])
        estimate = self.costs.missing(first)
        reserve = self.costs.missing(first, *self.finals_runs(state)) - estimate   # what they share counted once
        left = self.config.budget_s - self.clock.spent
        if estimate + reserve > left:
            state.record.reason = (f"its training (about {format_seconds(estimate)}) and the finals (about "
                                   f"{format_seconds(reserve)}) did not fit the {format_seconds(left)} left")
            return
        if state.record.order is None:   # a candidate an interrupted run of this search took keeps its place
            self.trained += 1
            state.record.order = self.trained
        best = min(self.kept, key=lambda s: self.objective(s) or math.inf) if self.kept else None
        settled = sum(s.record.status != "not reached" for s in self.states)
        self.say(f"[{state.record.order}] {state.candidate.text}: {self._shown(state)}, about "
                 f"{format_seconds(estimate)} to train; {settled} of {len(self.states)} candidates settled, "
                 f"{format_seconds(left)} of the budget left; best kept so far: "
                 f"{best.candidate.text if best else 'none'}")
        self.train(state)

    def _shown(self, state: State) -> str:
        value = self.objective(state)
        if value is None:
            return "?"
        return f"{value / 1e6:.2f} MB" if self.config.minimize == "size" else f"{value:.3f} ms"

    def finals_runs(self, state: State) -> list[tuple[list[Candidate], list[int]]]:
        """The finals' runs if ``state`` were kept and met the bar on its mean (not yet trained, it may): the other
        seeds of the finalists it would be among, and every seed of the reference."""
        finalists = [s.candidate for s in self.finalists(joining=state)]
        against = next((s for s in self.states if s.candidate.text == self.config.against), None)
        return [(finalists, self.config.seeds[1:])] + ([([against.candidate], self.config.seeds)] if against else [])

    def train(self, state: State) -> None:
        """Train ``state``'s steps on the first seed (reusing finished ones), each stopped below the bar, and screen
        each step's selection retention."""
        start = time.perf_counter()
        seed = self.config.seeds[0]
        config = replace(self.compare_config, seeds=[seed], out=str(self.out), stop_below=self.stop_below)
        estimates = self.costs.steps(state.candidate)
        parent: tuple[Path, RunRecord, bool] | None = None
        for step in plan_seeds(plan_runs([state.candidate.text]), [seed]):
            name = step.planned.name
            if name not in self.runs:
                before = time.perf_counter()
                out, fingerprint = self.out, self.task.fingerprint
                here = (run_dir_of(out, name, seed) / "metrics.json").is_file()   # a resumed search's own run
                run_dir, record, reused = run_step(
                    step, parent, lambda s, p, show_progress=self.show_progress: _run_or_reuse(
                        config, s, out, p, fingerprint, show_progress), self.config.executor, self.say)
                if not reused or not here:   # made now, or made by another search or comparison: on the budget
                    spent = time.perf_counter() - before if not reused else record.seconds
                    self.costs.account(record, spent, step.planned.method.name,
                                       estimates[len(step.planned.steps) - 1], reused=reused)
                self.runs[name] = (run_dir, record)
            run_dir, record = self.runs[name]
            parent = (run_dir, record, True)
            screen = self.selection.screen(run_dir, record)
            self._show(state, run_dir, screen)
            if stopped_by_bar(record) or screen.below(self.config.min_retention):
                state.record.fidelity = "partial" if stopped_by_bar(record) else "full"
                state.record.status = "below"
                said = [w for s in record.stages for w in s.get("warnings", []) if "cannot reach" in w]
                state.record.reason = f"{name} stopped: {said[-1]}" if said else \
                    f"{name} kept {screen.retention:.1%} of the teacher's selection {self.metric.title} " \
                    f"({screen.low:.1%} to {screen.high:.1%}), below {self.config.min_retention:.0%}"
                self.failed.append(state.candidate.prefix(len(step.planned.steps)))
                break
        else:
            state.record.fidelity, state.record.status = "full", "kept"
            state.record.reason = (f"selection retention {screen.retention:.1%} ({screen.low:.1%} to "
                                   f"{screen.high:.1%}) "
                                   f"cannot be told below {self.config.min_retention:.0%}")
            # Its objective stays its structure's, like every candidate's it is ordered against; the finals time
            # the trained models themselves.
            self.kept.append(state)
        state.record.seconds += time.perf_counter() - start
        self.say(f"    {state.record.status}: {state.record.reason}")

    def _show(self, state: State, run_dir: Path, screen: Screen) -> None:
        state.record.run_dir, state.record.held_out_accuracy = str(run_dir), screen.score
        state.record.held_out_retention = screen.retention
        state.record.held_out_interval = [screen.low, screen.high]

    def save(self) -> None:
        self.saved_at = time.perf_counter()
        self.record.spent_s, self.record.reused_s = self.clock.spent, round(self.clock.reused, 1)
        self.record.seconds = {k: round(v, 1) for k, v in self.clock.seconds.items()}
        write_record(self.record, self.out)

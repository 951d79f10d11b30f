"""Comparisons over seeds: which runs a seed repeats, the predictions the statistics pair, and what the report may
claim from intervals (the front, the 97% bar, the sentences at its top)."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
from helpers import run_cli

from compress.errors import CompressError
from compress.predictions import Predictions, load_predictions, save_predictions
from compress.reports.comparison_data import read_comparison
from compress.reports.comparison_html import render_html
from compress.reports.comparison_markdown import render_markdown
from compress.reports.verdicts import chosen, front_names, verdict
from compress.runs.compare_plan import count_note, parse_seeds, plan_runs, plan_seeds
from compress.stats import ratio_quartiles


@pytest.mark.parametrize(("text", "seeds"), [("13,14,15", [13, 14, 15]), ("3", [13, 14, 15]), ("14,", [14]),
                                             ("1", [13]), ("7, 5", [7, 5])])
def test_seeds_are_a_list_or_a_count_from_the_default(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["0", "a,b", "13,13", "-1,2", "21", ",", "1.5", ""])
def test_bad_seeds_are_one_sentence(text):
    with pytest.raises(CompressError, match="--seeds"):
        parse_seeds(text)


@pytest.mark.parametrize(("text", "said"), [("13", "13 seeds, 13 to 25; for seed 13 alone give --seed 13 or --seeds 13,"),
                                            ("20", "20 seeds, 13 to 32"), ("12", None), ("3", None), ("13,", None),
                                            ("13,14", None)])
def test_a_count_that_also_reads_as_a_seed_says_what_it_trains(text, said):
    assert (count_note(text) is None) if said is None else (said in count_note(text))


def test_the_cli_says_a_count_that_reads_as_a_seed_in_one_line_before_any_work():
    done = run_cli("compare", "--seeds", "14", "--methods", "int8", "--repeats", "0")   # refused after the seeds
    assert done.returncode == 2
    assert "--seeds 14 is a count: 14 seeds, 13 to 26; for seed 14 alone give --seed 14 or --seeds 14," in done.stderr
    assert "is a count" not in run_cli("compare", "--seeds", "3", "--methods", "int8", "--repeats", "0").stderr


def test_a_run_that_does_not_depend_on_the_seed_is_made_once_and_parents_every_seed():
    runs = plan_seeds(plan_runs(["distilbert", "int8", "prune-vocab+int8", "distilbert+int8", "static-int8"]),
                      [13, 14])
    assert [(r.name, r.parent) for r in runs] == [
        ("distilbert@13", None), ("int8@13", None), ("prune-vocab@13", None), ("prune-vocab+int8@13", "prune-vocab@13"),
        ("distilbert+int8@13", "distilbert@13"), ("static-int8@13", None),
        # dynamic int8 and vocabulary pruning of the teacher sample nothing and train nothing: made once;
        # static int8 samples its calibration sentences with the seed, and a student's int8 follows the student
        ("distilbert@14", None), ("distilbert+int8@14", "distilbert@14"), ("static-int8@14", None)]
    assert [r.seed for r in runs] == [13] * 6 + [14] * 3


def test_predictions_round_trip_and_a_changed_file_is_refused(tmp_path):
    logits = np.array([[0.2, 0.9], [1.5, -0.3], [0.1, 0.0]], dtype=np.float32)
    made = Predictions(logits, np.array([1, 1, 0]))
    assert made.correct.tolist() == [True, False, True] and made.metrics().accuracy == pytest.approx(2 / 3)
    digest = save_predictions(made, tmp_path)
    back = load_predictions(tmp_path, digest)
    assert np.array_equal(back.logits, logits) and back.labels.tolist() == [1, 1, 0]
    from safetensors.numpy import load_file   # readable without compress: the answers stand on their own too

    assert load_file(tmp_path / "predictions.safetensors")["predicted"].tolist() == [1, 0, 0]
    raw = bytearray((tmp_path / "predictions.safetensors").read_bytes())
    raw[-1] ^= 1
    (tmp_path / "predictions.safetensors").write_bytes(bytes(raw))
    with pytest.raises(CompressError, match="changed since"):
        load_predictions(tmp_path, digest)
    with pytest.raises(CompressError, match="older compress"):
        load_predictions(tmp_path, None)


def test_ratio_quartiles_are_numpys_percentiles_of_the_per_round_ratios():
    teacher, model = [10.0, 12.0, 11.0, 30.0, 10.5], [5.0, 5.0, 5.5, 6.0, 5.0]
    ratios = np.array(teacher) / np.array(model)
    assert ratio_quartiles(teacher, model) == pytest.approx(tuple(np.percentile(ratios, [50, 25, 75])))


# --- what a report with intervals claims --------------------------------------------------------------

def _interval(estimate: float, half: float) -> dict:
    return {"estimate": estimate, "low": estimate - half, "high": estimate + half, "level": 0.95}


def _model(accuracy: float, half: float, latency: float, spread: float = 0.02) -> dict:
    rounds = [latency * (1 + spread * ((i % 3) - 1)) for i in range(15)]
    return {"params": 1e6, "size_bytes": 4e6, "flops": 1e9, "accuracy": accuracy, "latency_ms_p50": latency,
            "throughput": 100.0, "accuracy_interval": _interval(accuracy, half), "latency_rounds_ms": rounds}


def _comparison() -> dict:
    """A teacher (0.85, 10 ms) and three methods: fast (4 ms, 0.84), precise (6 ms, 0.845) and slow (8 ms, 0.80,
    beaten beyond the intervals by fast on both axes)."""
    teacher = _model(0.85, 0.02, 10.0) | {"name": "t"}
    methods = []
    for name, accuracy, latency, retention in (("fast", 0.84, 4.0, (0.988, 0.975, 1.0)),
                                               ("precise", 0.845, 6.0, (0.994, 0.96, 1.02)),
                                               ("slow", 0.80, 8.0, (0.941, 0.92, 0.96))):
        estimate, low, high = retention
        methods.append(_model(accuracy, 0.02, latency) | {
            "method": name, "retention": estimate, "speedup": 10.0 / latency,
            "speedup_iqr": [9 / latency, 11 / latency],
            "retention_interval": {"estimate": estimate, "low": low, "high": high, "level": 0.95}})
    differences = [("teacher", "fast", 0.01, 0.015), ("teacher", "precise", 0.005, 0.015),
                   ("teacher", "slow", 0.05, 0.015), ("fast", "precise", -0.005, 0.012),
                   ("fast", "slow", 0.04, 0.012), ("precise", "slow", 0.045, 0.012)]
    return {"schema_version": 3, "teacher": teacher, "methods": methods, "seeds": [13, 14, 15],
            "speed": {"rounds": 15}, "dataset": {"name": "mr", "sizes": {"test": 1031}},
            "differences": [{"a": a, "b": b, "accuracy": _interval(d, h)} for a, b, d, h in differences]}


def test_the_front_drops_only_a_model_beaten_beyond_both_intervals():
    shown = read_comparison(_comparison())
    assert shown.has_intervals
    # fast beats slow beyond both intervals; fast and precise tie on accuracy, so precise stays; the teacher,
    # slowest, is not beaten on accuracy beyond the interval by anyone, so it stays too
    assert front_names(shown) == ["fast", "precise", "teacher"]
    # the same numbers with accuracy differences inside the intervals: nothing is dropped
    close = _comparison()
    for d in close["differences"]:
        d["accuracy"] = _interval(d["accuracy"]["estimate"], 0.1)
    assert front_names(read_comparison(close)) == ["fast", "precise", "slow", "teacher"]
    # and without intervals (an older comparison), the standard-error tie rule: the fast model wins every tie,
    # the teacher's 1 point among them
    old = {k: v for k, v in _comparison().items() if k != "differences"} | {"accuracy_standard_error": 0.012}
    assert not read_comparison(old).has_intervals
    assert front_names(read_comparison(old)) == ["fast"]


def test_a_difference_counts_on_the_front_only_after_holms_correction_for_every_pair():
    """fast beats slow by 4 points with its 95% interval above 0; with its p-value recorded at 0.02 among 6 pairs
    (Holm's first step needs 0.05 / 6) that is not enough, and slow stays on the front; at 0.001 it is dropped."""
    weak = _comparison()
    for d in weak["differences"]:
        d["p"] = 0.02 if {d["a"], d["b"]} == {"fast", "slow"} else 0.5
    said = verdict(read_comparison(weak)).scope
    assert front_names(read_comparison(weak)) == ["fast", "precise", "slow", "teacher"]
    assert "6 pairwise accuracy differences were compared: one is claimed only where it holds after Holm's " \
           "correction for all 6 (a family-wise 5%)" in said
    strong = copy.deepcopy(weak)
    next(d for d in strong["differences"] if {d["a"], d["b"]} == {"fast", "slow"})["p"] = 0.001
    assert front_names(read_comparison(strong)) == ["fast", "precise", "teacher"]
    # recorded before p-values were: the uncorrected rule, said as such
    assert "each at 95% and uncorrected for their number" in verdict(read_comparison(_comparison())).scope


def test_with_several_seeds_the_one_run_rows_say_their_intervals_count_sentences_only():
    data = _comparison()
    data["methods"][0]["per_seed"] = [{"seed": 13, "accuracy": 0.84}]   # fast: made once (not seeded)
    page = render_markdown(data)
    teacher_row = next(line for line in page.splitlines() if line.startswith("| **teacher"))
    fast_row = next(line for line in page.splitlines() if "fast" in line and line.startswith("| ["))
    assert teacher_row.count("¹") == 1 and fast_row.count("¹") == 2   # the teacher's retention has no interval
    assert "¹ one run (the teacher, or a method that neither trains nor samples)" in page
    assert "each method's first seed's model (seed 13)" in page and "relative to one fine-tuned teacher" in page
    assert "¹" not in render_markdown(_comparison() | {"seeds": [13]})   # one seed: every interval is one run's


def _pair(found, faster: str, slower: str):
    return next(p for p in found.pairs if (p.faster, p.slower) == (faster, slower))


def test_the_verdict_claims_97_percent_only_above_the_interval_and_says_which_differences_are_real():
    found = verdict(read_comparison(_comparison()))
    assert "3 training seeds (13, 14, 15) and 1,031 test sentences" in found.scope
    assert found.keep == (("fast", "97.5–100.0%"),)
    assert found.unsure == (("precise", "96.0–102.0%"),)
    assert found.below == (("slow", "92.0–96.0%"),)
    assert found.front == ("fast", "precise", "teacher")
    [off] = found.off_front
    assert off.startswith("slow (fast is faster by 2.00×") and "more accurate by +4.0 points" in off
    pair = _pair(found, "fast", "precise")
    assert pair.speed.startswith("1.50× (IQR") and pair.speed_told == "yes"
    assert pair.accuracy == "+0.5 points (interval −0.7 to +1.7)" and pair.accuracy_told == "no"
    # the list names each claim once, in this order, and the table has one row per neighbouring pair
    assert [what.split(" (")[0] for what, _ in found.items()] == [
        "Keep at least 97% of the teacher", "Cannot be told from 97%", "Below 97% beyond the interval", "On the front",
        "Off the front"]
    assert [row[0] for row in found.pair_rows()] == ["fast → precise", "precise → the teacher"]
    # one seed: the intervals say they count the test sentences only
    one = _comparison() | {"seeds": [13]}
    assert "one training seed" in verdict(read_comparison(one)).scope
    # the answer compare offers to export: the fastest on the front that keeps the bar; none where none keeps it
    assert chosen(read_comparison(_comparison())) == "fast"
    below = copy.deepcopy(_comparison())
    below["methods"][0]["retention_interval"] = _interval(0.965, 0.01)
    assert chosen(read_comparison(below)) is None


def test_the_verdict_is_a_list_and_a_table_in_markdown_and_html():
    page = render_markdown(_comparison())
    assert "- **Keep at least 97% of the teacher (the whole retention interval at or above it)**: fast " \
           "(97.5–100.0%)" in page
    assert "| neighbours on the front | faster by | told apart in speed | accuracy, slower − faster | told apart in " \
           "accuracy |" in page
    assert re.search(r"^\| fast → precise \| 1\.50× \(IQR [^|]+\| yes \| \+0\.5 points \(interval −0\.7 to "
                     r"\+1\.7\) \| no \|$", page, re.M)
    longest = max(len(line) for line in page.split("## How to read")[0].splitlines() if not line.startswith("|"))
    assert longest < 400   # no paragraph of claims: each line one claim
    page = render_html(_comparison(), {})
    assert '<ul class="verdict">' in page and '<table class="verdict">' in page
    assert "<th scope=\"row\">fast → precise</th>" in page


def test_the_table_prints_mean_and_interval_and_the_speed_ups_quartiles():
    page = render_markdown(_comparison())
    assert "| 84.0 (82.0–86.0) | 98.8 (97.5–100.0) |" in page and "| 2.50x (2.25–2.75) |" in page
    assert page.index("Keep at least 97%") < page.index("| method |")   # the verdicts come first


def test_a_hand_edited_interval_that_makes_no_sense_falls_back_to_the_tie_rule():
    broken = copy.deepcopy(_comparison())
    broken["methods"][0]["accuracy_interval"] = {"estimate": 0.8, "low": 0.9, "high": 0.7}
    shown = read_comparison(broken)
    assert not shown.has_intervals and verdict(shown) is None
    assert re.search(r"\| \d+\.\d \(\d+\.\d–\d+\.\d\) \|", render_markdown(broken))   # the others still show theirs


def _in_passes(data: dict, slower: dict[str, list[float]] | None = None) -> dict:
    """``data`` as a comparison timed in 3 passes of 5 rounds; ``slower``: a model's latency factor in each pass."""
    timed = copy.deepcopy(data) | {"speed": {"rounds": 5, "passes": 3, "speedup": "passes"}}
    for model in [timed["teacher"], *timed["methods"]]:
        rounds = model.pop("latency_rounds_ms")
        factors = (slower or {}).get(model.get("method", "teacher"), [1.0, 1.0, 1.0])
        model["latency_passes_ms"] = [[ms * factor for ms in rounds[5 * p:5 * p + 5]] for p, factor in enumerate(factors)]
        if "method" in model:
            model["speedup_passes"] = [10.0 / (model["latency_ms_p50"] * factor) for factor in factors]
    return timed


def test_timed_in_passes_a_model_is_faster_only_by_more_than_the_margin_in_every_pass():
    found = verdict(read_comparison(_in_passes(_comparison())))
    assert "speed-ups are from 3 passes of 5 rounds (each pass loading every model afresh), with the lowest and " \
           "highest pass's, and a model is called faster only when it is more than 5% faster in every pass" in found.scope
    assert _pair(found, "fast", "precise").speed == "1.50× (passes 1.50–1.50×)"
    assert found.off_front[0].startswith("slow (fast is faster by 2.00× (passes 2.00–2.00×)")
    # precise within 4% of fast in one pass of three: no longer "faster", though the rounds' quartiles
    # (the rule before passes) would still say so
    close = _in_passes(_comparison(), {"precise": [1.0, 0.69, 1.0]})
    pair = _pair(verdict(read_comparison(close)), "fast", "precise")
    assert pair.speed_told == "no" and "(passes 1.03–1.50×)" in pair.speed
    rounds = [[ms for one_pass in m["latency_passes_ms"] for ms in one_pass] for m in close["methods"][:2]]
    assert ratio_quartiles(rounds[1], rounds[0])[1] > 1
    # the table's brackets are the lowest and highest pass's speed-up
    page = render_markdown(close)
    assert "| 1.67x (1.67–2.42) |" in page and "the speed-up the median of the passes', and in brackets the lowest and highest" in page


def test_the_verdict_reads_as_a_list_and_a_table_in_headless_chromium(tmp_path):
    """comparison.html as a reader sees it: above the results table, the list of claims and a table with one row per
    neighbouring pair on the front, its cells the facts the verdict holds, on screen at 1300 pixels."""
    from helpers import chromium_page

    from compress.reports.comparison import write_comparison

    write_comparison(_comparison(), tmp_path)
    with chromium_page(tmp_path / "comparison.html") as (page, _):
        page.set_viewport_size({"width": 1300, "height": 900})
        items = page.locator("ul.verdict li").all_inner_texts()
        assert items[0] == ("Keep at least 97% of the teacher (the whole retention interval at or above it): fast "
                            "(97.5–100.0%)")
        assert items[3].endswith(": fast, precise, the teacher")
        rows = page.locator("table.verdict tbody tr")
        assert rows.count() == 2
        cells = rows.nth(0).locator("th, td").all_inner_texts()
        assert cells[0] == "fast → precise" and cells[1].startswith("1.50×") and cells[2] == "yes"
        assert cells[3] == "+0.5 points (interval −0.7 to +1.7)" and cells[4] == "no"
        verdict_box = page.locator("table.verdict").bounding_box()
        results_box = page.locator("table#comparison").bounding_box()
        assert verdict_box["y"] + verdict_box["height"] <= results_box["y"]   # the verdict comes first
        assert verdict_box["x"] + verdict_box["width"] <= 1300                # and fits the screen


def test_each_rows_recipe_and_held_out_retention_are_in_the_report_the_page_and_the_results_page(tmp_path):
    """`compress compare --hold-out N`: each row's retention on the held-out training sentences beside test's, with
    the recipe that trained it, in comparison.md, comparison.html and the results page's section."""
    import json

    from compress.reports.comparison_markdown import render_summary

    data = copy.deepcopy(_comparison())
    data["methods"][0] |= {"recipe": "default", "held_out_retention": _interval(0.962, 0.012)}
    row = "| fast | default | 96.2% (95.0%-97.4%) | 98.8% (97.5%-100.0%) |"
    assert row in render_markdown(data)
    page = render_html(data, {})
    assert '<table class="held-out">' in page and "<th scope=\"row\">fast</th><td class=\"num\">default</td>" in page
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(data))
    assert row in render_summary(path)
    assert "held-out" not in render_markdown(_comparison())   # a comparison that held nothing out says nothing of it

"""The comparison report: Pareto front, validation, files written, and the page in a real browser."""

from __future__ import annotations

import copy
import io
import json

import pytest
from helpers import chromium_page
from matplotlib.image import imread

from compress.errors import CompressError
from compress.models.accounting import COMPONENTS
from compress.ownership import MARKER
from compress.reports.comparison import render_directory, write_comparison
from compress.reports.comparison_data import REQUIRED_METHOD_FIELDS, validate_comparison
from compress.reports.comparison_markdown import render_markdown
from compress.reports.comparison_rows import HEADERS
from compress.reports.verdicts import pareto_front

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FILES = ("comparison.json", "comparison.md", "comparison.html", "accuracy_vs_latency.png",
         "params_by_component.png")


def _components(scale: float) -> dict[str, int]:
    """A plausible split of parameters, scaled; the projection only exists for factorized embeddings."""
    base = {"token_embeddings": 11_720_448, "embedding_projection": 0, "position_embeddings": 196_608,
            "token_type_embeddings": 768, "attention": 3_548_160, "ffn": 7_089_408,
            "layer_norms": 19_200, "pooler": 147_840, "classifier": 770}
    return {key: int(base[key] * scale) for key in COMPONENTS}


def _method(name: str, label: str, kind: str, params: int, accuracy: float, latency: float | None,
            scale: float) -> dict:
    teacher_accuracy, teacher_latency = 0.8177, 12.3
    return {
        "method": name, "label": label, "run_dir": f"runs/compare-test/{name}", "kind": kind,
        "params": params, "size_bytes": params * (1 if kind == "quantization" else 4), "flops": 1.1e9 * scale,
        "accuracy": accuracy, "macro_f1": accuracy - 0.002, "retention": accuracy / teacher_accuracy,
        "latency_ms_p50": latency, "latency_ms_p90": None if latency is None else latency * 1.1,
        "throughput": None if latency is None else 1000 / latency,
        "speedup": None if latency is None else teacher_latency / latency,
        "peak_memory_bytes": 200_000_000, "backend": "torch", "dtype": "fp32",
        "params_by_component": _components(scale),
        "explanation": f"{label} changed something <specific> & saved | something else.",
    }


@pytest.fixture
def comparison() -> dict:
    """A teacher and four methods; int8's latency could not be measured."""
    return {
        "schema_version": 1, "created": "2026-11-21T09:00:00Z",
        "dataset": {"name": "mr", "fingerprint": "60537d673c51900e",
                    "sizes": {"train": 8529, "dev": 1066, "test": 1067}},
        "seq_len": 48, "threads": 2,
        "manifest": {"cpu": {"model": "Test CPU @ 2.0GHz"}, "python": "3.11"},
        "teacher": {"name": "minilm", "params": 22_713_216, "size_bytes": 90_900_000, "flops": 1.1e9,
                    "accuracy": 0.8177, "macro_f1": 0.8176, "latency_ms_p50": 12.3, "latency_ms_p90": 13.0,
                    "throughput": 148.0, "peak_memory_bytes": 123_456_789,
                    "params_by_component": _components(1.0)},
        "methods": [
            _method("albert", "ALBERT (E=128, shared)", "distillation", 5_940_000, 0.7847, 12.0, 0.26),
            _method("distilbert", "DistilBERT (3 layers)", "distillation", 17_100_000, 0.801, 6.4, 0.75),
            _method("tinybert", "TinyBERT (4 x 312)", "distillation", 4_400_000, 0.772, 2.9, 0.19),
            _method("int8", "dynamic int8", "quantization", 22_713_216, 0.812, None, 1.0),
        ],
    }


def test_pareto_front_known_answer():
    points = [
        (1.0, 0.70),   # 0 fastest: on the front
        (2.0, 0.80),   # 1 on the front
        (2.0, 0.75),   # 2 same latency as 1, less accurate: dominated
        (3.0, 0.78),   # 3 slower and less accurate than 1: dominated
        (4.0, 0.90),   # 4 most accurate: on the front
        (4.0, 0.90),   # 5 exact duplicate of 4: kept too
        (0.5, 0.60),   # 6 fastest of all: on the front
        (5.0, 0.90),   # 7 as accurate as 4 but slower: dominated
    ]
    assert pareto_front(points) == [0, 1, 4, 5, 6]
    assert pareto_front([]) == []
    assert pareto_front([(1.0, 0.5)]) == [0]


def test_pareto_front_counts_differences_inside_the_standard_error_as_ties():
    # bf16 emulated on an AVX2 CPU: 0.3 points above int8 and 3.6x slower, inside a 1.2-point error.
    int8, bf16 = (15.6, 82.0), (56.6, 82.3)
    assert pareto_front([int8, bf16]) == [0, 1]
    assert pareto_front([int8, bf16], tie=1.2) == [0]
    # Ties are not chained: 81 ties 80 and 82 ties 81, but 82 is more than a standard error above 80,
    # the last point on the front, so it joins it.
    assert pareto_front([(1.0, 80.0), (2.0, 81.0), (3.0, 82.0)], tie=1.2) == [0, 2]


def test_validate_names_method_and_missing_field(comparison):
    validate_comparison(comparison)
    for field in REQUIRED_METHOD_FIELDS:
        broken = copy.deepcopy(comparison)
        del broken["methods"][2][field]
        with pytest.raises(CompressError, match=f"'tinybert'.*'{field}'"):
            validate_comparison(broken)
    nulls = copy.deepcopy(comparison)
    nulls["methods"][0].update(dict.fromkeys(REQUIRED_METHOD_FIELDS))
    validate_comparison(nulls)  # null values are allowed, only the keys are required


def test_validate_rejects_schema_version_and_empty_methods(comparison):
    for version in (4, "1", None):
        with pytest.raises(CompressError, match="schema_version"):
            validate_comparison({**comparison, "schema_version": version})
    without = {k: v for k, v in comparison.items() if k != "schema_version"}
    with pytest.raises(CompressError, match="no schema_version"):
        validate_comparison(without)
    for methods in ([], None):
        with pytest.raises(CompressError, match="no methods"):
            validate_comparison({**comparison, "methods": methods})


def test_write_comparison_writes_every_file(comparison, tmp_path):
    written = write_comparison(comparison, tmp_path / "out")
    assert sorted(p.name for p in written) == sorted(FILES)
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    # no temporary files left; the one hidden file is the marker that makes the directory ours
    assert [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".")] == [MARKER]
    assert json.loads((tmp_path / "out" / "comparison.json").read_text()) == comparison

    markdown = (tmp_path / "out" / "comparison.md").read_text()
    assert markdown == render_markdown(comparison)
    for method in comparison["methods"]:
        assert f"(#method-{method['method']})" in markdown and f'<a id="method-{method["method"]}">' in markdown
    assert "teacher: minilm" in markdown
    int8_row = next(line for line in markdown.splitlines() if line.startswith("| [dynamic int8]"))
    assert "| – |" in int8_row and "| 22.7 |" in int8_row   # null latency shown as a dash; params in M
    tiny_row = next(line for line in markdown.splitlines() if line.startswith("| [TinyBERT"))
    assert "| 77.2 |" in tiny_row and "| 4.24x |" in tiny_row

    for name in ("accuracy_vs_latency.png", "params_by_component.png"):
        data = (tmp_path / "out" / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        image = imread(tmp_path / "out" / name)
        assert image.ndim == 3 and image.shape[0] >= 300 and image.shape[1] >= 600


@pytest.fixture
def with_pipeline(comparison) -> dict:
    """Schema 2: the comparison plus a distilbert+int8 pipeline, a flagged bf16 and a standard error."""
    c = copy.deepcopy(comparison) | {"schema_version": 2, "accuracy_standard_error": 0.0118}
    for m in c["methods"]:
        m["steps"] = [m["method"]]
    pipeline = _method("distilbert+int8", "DistilBERT → dynamic int8", "pipeline", 17_100_000, 0.798, 2.5, 0.75)
    bf16 = _method("bf16", "bfloat16", "quantization", 22_713_216, 0.8185, 30.0, 1.0)
    c["methods"] += [bf16 | {"steps": ["bf16"], "note": "this CPU has neither AVX512-BF16 nor AMX."},
                     pipeline | {"size_bytes": 17_100_000, "steps": ["distilbert", "distilbert+int8"]}]
    return c


def test_pipelines_get_a_step_table_and_a_step_plot(with_pipeline, tmp_path):
    written = {p.name for p in write_comparison(with_pipeline, tmp_path)}
    assert written == {*FILES, "steps-distilbert-int8.png"}
    assert imread(tmp_path / "steps-distilbert-int8.png").shape[1] >= 600
    markdown = (tmp_path / "comparison.md").read_text()
    steps = markdown.split("### distilbert+int8")[1].split("## What each method")[0]
    rows = [line for line in steps.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[0] for row in rows] == ["| **teacher**", "| [distilbert](#method-distilbert)",
                                                      "| [distilbert+int8](#method-distilbert-int8)"]
    # What each step bought, against the step before: distilbert 6.40 ms -> 2.50 ms, 68.4 MB -> 17.1 MB.
    assert "size ÷4.00 · latency ÷2.56 · accuracy −0.3 points" in rows[2]
    assert "params" not in rows[2].split(" | ")[-1]    # int8 keeps every parameter
    assert "![distilbert+int8: each step](steps-distilbert-int8.png)" in markdown
    # bf16 is 0.08 points above the teacher's 81.77 but 2.4x slower; within one standard error it ties, and
    # the flag says why this CPU runs it badly.
    assert "[bfloat16 ⚠](#method-bf16)" in markdown and "⚠ bfloat16: this CPU has neither" in markdown
    front = next(line for line in markdown.splitlines() if line.startswith("On the accuracy"))
    assert "distilbert+int8" in front and "bf16" not in front and "within ±1.2 points" in front

    # Rendered again without the pipeline, its step plot goes.
    with_pipeline["methods"].pop()
    write_comparison(with_pipeline, tmp_path)
    assert not (tmp_path / "steps-distilbert-int8.png").exists()


def test_render_directory_rerenders_and_explains_bad_input(comparison, tmp_path):
    write_comparison(comparison, tmp_path)
    html_path = tmp_path / "comparison.html"
    before = html_path.read_text()
    html_path.unlink()
    assert sorted(p.name for p in render_directory(tmp_path)) == sorted(FILES)
    assert html_path.read_text() == before

    with pytest.raises(CompressError, match="no comparison.json"):
        render_directory(tmp_path / "empty")
    (tmp_path / "comparison.json").write_text("{not json")
    with pytest.raises(CompressError, match="not valid JSON"):
        render_directory(tmp_path)


def test_html_in_headless_chromium(comparison, tmp_path):
    write_comparison(comparison, tmp_path)
    with chromium_page(tmp_path / "comparison.html") as (page, requested):
        rows = page.locator("table#comparison tbody tr")
        assert rows.count() == len(comparison["methods"]) + 1
        assert "teacher" in rows.nth(0).inner_text()
        images = page.eval_on_selector_all(
            "img", "els => els.map(e => ({complete: e.complete, width: e.naturalWidth, alt: e.alt}))")
        assert len(images) == 2
        assert all(i["complete"] and i["width"] > 0 and i["alt"] for i in images)
        assert page.locator('table#comparison a[href="#method-albert"]').count() == 1
        assert page.evaluate("document.getElementById('method-albert') !== null")
        page.click('table#comparison a[href="#method-albert"]')
        assert page.evaluate("location.hash") == "#method-albert"
        assert "something <specific> & saved" in page.locator("#method-albert").inner_text()
        assert all(u.startswith(("file:", "data:")) for u in requested), requested


def test_a_pruned_row_shows_what_each_layer_kept(comparison, tmp_path):
    layers = [{"layer": 1, "heads": 9, "heads_of": 12, "ffn": 1373, "ffn_of": 1536, "dropped": False},
              {"layer": 2, "heads": 0, "heads_of": 12, "ffn": 0, "ffn_of": 1536, "dropped": True}]
    comparison["methods"].append(_method("prune", "pruning", "pruning", 17_400_000, 0.8157, 7.6, 0.7)
                                 | {"layers": layers})
    write_comparison(comparison, tmp_path)
    section = (tmp_path / "comparison.md").read_text().split("(`prune`)")[1]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| layer of the source | heads kept |")
    assert rows[1] == "| 1 | 9 / 12 | █████████░░░ | 1373 / 1536 | ███████████░ |"
    assert rows[2] == "| 2 (dropped) | 0 / 12 | ░░░░░░░░░░░░ | 0 / 1536 | ░░░░░░░░░░░░ |"
    page = (tmp_path / "comparison.html").read_text()
    assert '<table class="layers">' in page and "1373 / 1536" in page
    assert "layer of the source" not in (tmp_path / "comparison.md").read_text().split("(`prune`)")[0]


def test_a_busy_machine_during_the_speed_measurement_is_said_in_the_report(comparison):
    quiet = render_markdown(comparison | {"speed": {"other_cpus": 0.1}})
    busy = render_markdown(comparison | {"speed": {"other_cpus": 1.3}})
    assert "CPUs busy" not in quiet and "CPUs busy" not in render_markdown(comparison)
    assert "other processes kept 1.3 CPUs busy while speed was measured" in busy


def test_the_report_says_how_throughputs_batches_were_shaped(comparison):
    """Which batches throughput was timed on decides which runtime wins batch work: the notes say it where the
    record does (a comparison made before batch shapes keeps the report it had: tests/test_reports_before_after)."""
    assert "throughput: examples per second; speed-up" in render_markdown(comparison)
    filled = render_markdown(comparison | {"speed": {"batch_size": 32, "batch_shape": "filled", "padding": 0.0}})
    assert "throughput: examples per second at batch 32, every row filled to 48 real tokens; speed-up" in filled
    bucketed = render_markdown(comparison | {"speed": {"batch_size": 32, "batch_shape": "bucketed",
                                                       "padding": 0.083}})
    assert ("throughput: examples per second at batch 32, test sentences bucketed by length (bounds 16, 32, 64, ... "
            "and the longest), each padded to its bucket's bound, 8% of the positions padding") in bucketed
    padded = render_markdown(comparison | {"speed": {"batch_size": 32, "batch_shape": "padded", "padding": 0.61}})
    assert "test sentences padded to the split's longest, 61% of the positions padding" in padded


def test_a_row_timed_on_a_runtime_another_beat_in_one_column_says_so(comparison):
    """A quantized row's runtime was the fastest at batch 1 or in large batches when its run was made, not both:
    its line says which its speeds are of and what the other gave (tests/test_backend_objective)."""
    said = ("timed on onnxruntime, the fastest at batch 1 when the run was made; openvino was the fastest at batch 32 "
            "(2.50 ms against 2.00 at batch 1, 600 examples/s against 400 at batch 32): choose_by=throughput runs on it")
    assert "timed on" not in render_markdown(comparison)   # a record made before it, or nothing to say
    comparison["methods"][3] |= {"backend": "onnxruntime", "dtype": "int8", "runtime_note": said}
    assert "dynamic int8: " + said.replace("_", "\\_") + "." in render_markdown(comparison)   # markdown-escaped


def _with_long_labels(comparison: dict) -> dict:
    """The default set's pipelines, whose labels ran the results table off a 1300-pixel screen."""
    label = "DistilBERT (half the layers) → structured pruning (heads, FFN, layers) → dynamic int8"
    comparison["methods"] += [_method("distilbert+prune+int8", label, "pipeline", 9_100_000, 0.797, 1.1, 0.5),
                              _method("albert[sharing=attention]+int8", "ALBERT (E=128, one block shared by all "
                                      "layers) → dynamic int8", "pipeline", 5_940_000, 0.79, 5.0, 0.26)]
    return comparison


def test_every_column_of_the_results_table_is_on_screen_at_1300_pixels(comparison, tmp_path):
    write_comparison(_with_long_labels(comparison), tmp_path)
    with chromium_page(tmp_path / "comparison.html") as (page, _):
        page.set_viewport_size({"width": 1300, "height": 900})
        wrap = page.evaluate("() => { const w = document.querySelector('#comparison').parentElement;"
                             " return [w.scrollWidth, w.clientWidth]; }")
        assert wrap[0] <= wrap[1], wrap                   # no horizontal scroll bar
        right = page.evaluate("() => [...document.querySelectorAll('#comparison thead th')]"
                              ".map(th => th.getBoundingClientRect().right)")
        assert len(right) == len(HEADERS) and max(right) <= 1300, right
        link = page.locator('table#comparison a[href="#method-distilbert-prune-int8"]')
        assert link.inner_text() == "distilbert+prune+int8"
        assert link.get_attribute("title").startswith("DistilBERT (half the layers) → structured pruning")


def test_the_summary_table_keeps_its_headers_and_numbers_whole_without_a_terminal(comparison):
    from rich.console import Console

    from compress.cli.compare import _table
    from compress.reports.comparison_data import read_comparison

    console = Console(width=80, record=True, file=io.StringIO())
    console.print(_table(read_comparison(_with_long_labels(comparison))))
    text = console.export_text()
    for header in ("params", "accuracy", "retention", "latency ms", "speed-up"):
        assert header in text
    assert "…" not in text and "11.18x" in text


def test_the_component_plot_names_each_bar_as_the_table_does(comparison):
    from compress.reports.plots import _component_rows

    labels = [label for label, _ in _component_rows(_with_long_labels(comparison))]
    assert labels == ["teacher (minilm)", *(m["method"] for m in comparison["methods"])]


def _with_sections(comparison: dict) -> dict:
    """A method whose own part of the report arrives as a generic section (title, sentences, a table)."""
    section = {"name": "sharing", "title": "What the shared block | saves",
               "lines": ["One block serves all 6 layers.", "Embeddings are factorized: E = 128 < H."],
               "headers": ["sharing", "params", "of the teacher"], "align": ["left", "right", "right"],
               "rows": [["none", "22.7M", "100%"], ["all", "5.9M", None]]}
    comparison["methods"][0]["sections"] = [section]
    return comparison


def test_a_method_section_shows_its_title_lines_and_table_in_markdown(comparison):
    markdown = render_markdown(_with_sections(comparison))
    own = markdown.split("(`albert`)")[1].split("(`distilbert`)")[0]
    lines = own.splitlines()
    explanation = next(i for i, line in enumerate(lines) if "changed something" in line)
    title = lines.index("#### What the shared block \\| saves")    # under the explanation, escaped
    assert explanation < title
    assert lines[title + 2] == "One block serves all 6 layers."
    assert lines[title + 4] == "Embeddings are factorized: E = 128 < H.".replace("<", "\\<")
    table = [line for line in lines if line.startswith("|")]
    assert table == ["| sharing | params | of the teacher |", "|:--|--:|--:|",
                     "| none | 22.7M | 100% |", "| all | 5.9M | – |"]      # a null cell reads as not measured
    assert "What the shared block" not in markdown.split("(`albert`)")[0]   # nowhere but its own method


def test_a_method_section_is_a_table_of_its_name_in_the_page(comparison, tmp_path):
    write_comparison(_with_sections(comparison), tmp_path)
    with chromium_page(tmp_path / "comparison.html") as (page, _):
        own = page.locator("#method-albert")
        assert own.locator("h4").inner_text() == "What the shared block | saves"
        assert own.locator("p").all_inner_texts()[-2:] == ["One block serves all 6 layers.",
                                                           "Embeddings are factorized: E = 128 < H."]
        table = own.locator("table.sharing")
        assert table.count() == 1 and page.locator("table.sharing").count() == 1
        assert table.locator("thead th").all_inner_texts() == ["sharing", "params", "of the teacher"]
        assert table.locator('tbody th[scope="row"]').all_inner_texts() == ["none", "all"]
        assert table.locator("tbody td.num").all_inner_texts() == ["22.7M", "100%", "5.9M", "–"]


def test_a_row_with_both_sections_and_old_layers_shows_only_its_sections(comparison):
    layers = [{"layer": 1, "heads": 9, "heads_of": 12, "ffn": 1373, "ffn_of": 1536, "dropped": False}]
    _with_sections(comparison)["methods"][0]["layers"] = layers
    markdown = render_markdown(comparison)
    assert "| sharing | params |" in markdown and "layer of the source" not in markdown
    comparison["methods"][0]["sections"] = []           # written by a compress with sections: none to show
    assert "layer of the source" not in render_markdown(comparison)


def test_a_malformed_section_is_named_in_the_error(comparison):
    comparison["methods"][1]["sections"] = [{"name": "ok"}, "not an object"]
    with pytest.raises(CompressError, match="Section 1 of method 'distilbert'.*not an object"):
        render_markdown(comparison)
    comparison["methods"][1]["sections"] = [{"name": "x", "rows": [["a"], "b"]}]
    with pytest.raises(CompressError, match="Section 0 of method 'distilbert'.*row 1 is not a list"):
        render_markdown(comparison)

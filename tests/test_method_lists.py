"""The lists of methods in README.md and docs/tutorial.md, and the ones `compress run --help` and `compress explain
--help` print, name exactly the methods the registry has, in its (rank) order.

The docs are written by hand, a line of prose per method, so nothing regenerates them: a method added without
its line fails here, with the method and the list named. A list is marked in the markdown:

    <!-- methods: SELECTOR -->
    ... the list ...
    <!-- /methods -->

SELECTOR says which methods the list holds: ``all``, ``student``, ``transform`` or ``family=NAME`` (the methods
whose ``family`` is NAME). Inside, each bullet (``* ``, ``- ``) or table row (``|``) names the method of its first
code span; a list written in a sentence names one per code span. A code span names the method it starts with:
``albert+int8`` is albert's entry in a list of the students, each followed by int8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO, run_cli

from compress.registry import all_methods, get_method, names

DOCS = (REPO / "README.md", REPO / "docs" / "tutorial.md")
# The lists the docs must keep (a marker deleted with its list would otherwise pass unnoticed).
REQUIRED = {("README.md", "all"), ("docs/tutorial.md", "family=quantization"), ("docs/tutorial.md", "student")}

OPEN = re.compile(r"<!--\s*methods:\s*(?P<selector>.*?)\s*-->")
CLOSE = re.compile(r"<!--\s*/methods\s*-->")
CODE = re.compile(r"`([^`\n]+)`")
ITEM = re.compile(r"^\s*(?:[*-]\s|\|)")
FIRST_STEP = re.compile(r"[^+\[\s]+")


@dataclass(frozen=True)
class MarkedList:
    """One marked list: where it is, which methods it says it holds, and the names it holds."""

    doc: str
    line: int
    selector: str
    names: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def _fenced_lines(text: str) -> set[int]:
    """The (1-based) lines inside fenced code blocks, where a marker would show as text."""
    inside, fence, found = False, "", set()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if not inside and stripped.startswith(("```", "~~~")):
            inside, fence = True, stripped[:3]
        elif inside and stripped.startswith(fence):
            inside = False
        elif inside:
            found.add(number)
    return found


def _listed(region: str) -> tuple[str, ...]:
    items = [line for line in region.splitlines() if ITEM.match(line)]
    spans = [m.group(1) for line in items if (m := CODE.search(line))] if items else CODE.findall(region)
    return tuple(step.group(0) for span in spans if (step := FIRST_STEP.match(span.strip())))


def marked_lists(path: Path, root: Path = REPO) -> tuple[list[MarkedList], list[str]]:
    """The marked lists of one markdown file (named relative to ``root``), and what is wrong with its markers:
    one not closed before the next opens, or one inside a code block."""
    text, doc = path.read_text(), path.relative_to(root).as_posix()
    fenced = _fenced_lines(text)
    found: list[MarkedList] = []
    errors: list[str] = []
    for opening in OPEN.finditer(text):
        line = text.count("\n", 0, opening.start()) + 1
        closing = CLOSE.search(text, opening.end())
        nested = OPEN.search(text, opening.end(), closing.start() if closing else len(text))
        if closing is None or nested is not None:
            errors.append(f"{doc}:{line}: <!-- methods: {opening['selector']} --> has no <!-- /methods --> "
                          "before the next list starts")
            continue
        if line in fenced:
            errors.append(f"{doc}:{line}: a methods marker inside a code block shows as text; put it outside")
        found.append(MarkedList(doc, line, opening["selector"], _listed(text[opening.end():closing.start()])))
    return found, errors


def selected(selector: str) -> list[str]:
    """The registry's names a selector stands for, in rank order."""
    if selector == "all":
        return names()
    if selector in ("student", "transform"):
        return names(selector)
    if selector.startswith("family="):
        family = selector.removeprefix("family=")
        chosen = [m.name for m in all_methods() if m.family == family]
        if chosen:
            return chosen
        raise ValueError(f"no method's family is {family!r} (families: "
                         f"{', '.join(dict.fromkeys(m.family for m in all_methods()))})")
    raise ValueError(f"unknown selector {selector!r}: use all, student, transform or family=NAME")


def problems(marked: MarkedList) -> list[str]:
    """What is wrong with one list, one line each, naming the doc and the method."""
    try:
        wanted = selected(marked.selector)
    except ValueError as e:
        return [f"{marked.where}: {e}"]
    found = [
        f"{marked.where}: the list marked 'methods: {marked.selector}' lacks {name!r}; add a line for it "
        f"(its summary: {get_method(name).summary})"
        for name in wanted if name not in marked.names
    ]
    found += [f"{marked.where}: the list marked 'methods: {marked.selector}' names {name!r}, not one of them "
              f"({', '.join(wanted)})" for name in marked.names if name not in wanted]
    if not found and list(marked.names) != wanted:
        found.append(f"{marked.where}: list the {marked.selector} methods in the registry's order: {', '.join(wanted)}"
                     f" (the doc has {', '.join(marked.names)})")
    return found


PARSED = [marked_lists(doc) for doc in DOCS]
LISTS = [marked for lists, _ in PARSED for marked in lists]


def test_the_docs_mark_their_lists_of_methods_well():
    errors = [error for _, found in PARSED for error in found]
    assert not errors, "\n".join(errors)
    assert REQUIRED <= {(m.doc, m.selector) for m in LISTS}, "a marked list of methods is gone from the docs"


@pytest.mark.parametrize("marked", LISTS, ids=lambda m: m.where)
def test_each_list_in_the_docs_names_exactly_the_registrys_methods(marked):
    found = problems(marked)
    assert not found, "\n".join(found)


def test_a_method_missing_from_a_list_is_named_with_the_doc():
    """The failure a method added without documenting it meets: one line naming the method and the doc."""
    readme = next(m for m in LISTS if m.selector == "all")
    last = names()[-1]
    short = MarkedList(readme.doc, readme.line, readme.selector, tuple(n for n in readme.names if n != last))
    assert problems(short) == [f"README.md:{readme.line}: the list marked 'methods: all' lacks {last!r}; "
                               f"add a line for it (its summary: {get_method(last).summary})"]
    swapped = MarkedList(readme.doc, readme.line, readme.selector, tuple(reversed(readme.names)))
    assert len(problems(swapped)) == 1 and "registry's order" in problems(swapped)[0]
    assert "unknown selector" in problems(MarkedList("x.md", 1, "methods", ()))[0]


def test_markers_are_found_inline_and_around_blocks(tmp_path):
    doc = tmp_path / "scratch.md"
    doc.write_text("Chains (<!-- methods: student -->`albert+int8`, `tinybert[layers=2]+int8`<!-- /methods -->).\n\n"
                   "<!-- methods: all -->\n\n| method | what |\n|---|---|\n| `prune` | cuts `heads` |\n\n"
                   "* **bf16** (`bf16`) keeps `every` tensor\n  in 16 bits (`x`)\n<!-- /methods -->\n\n"
                   "```\n<!-- methods: all -->\n```\n<!-- /methods -->\n<!-- methods: all -->\n")
    found, errors = marked_lists(doc, root=tmp_path)
    name = "scratch.md"
    assert [(m.where, m.selector, m.names) for m in found] == [
        (f"{name}:1", "student", ("albert", "tinybert")), (f"{name}:3", "all", ("prune", "bf16")),
        (f"{name}:14", "all", ())]
    assert errors == [f"{name}:14: a methods marker inside a code block shows as text; put it outside",
                      f"{name}:17: <!-- methods: all --> has no <!-- /methods --> before the next list starts"]


# ---- the CLI's help ------------------------------------------------------------------------------------------

# "One of albert, distilbert, ..., onnx, or a pipeline" / "One of albert, ..., quantize (or any method ...)".
ONE_OF = re.compile(r"One of ((?:(?!or\b)[a-z0-9][a-z0-9-]*, )*(?!or\b)[a-z0-9][a-z0-9-]*)")


def _help(command: str) -> str:
    """`compress COMMAND --help` as one line of words: rich's panels and line breaks taken out."""
    done = run_cli(command, "--help")
    assert done.returncode == 0, done.stderr
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", done.stdout).split())


def _names_word(text: str, name: str) -> bool:
    """``name`` as a word of ``text`` (int8 is not named by static-int8, prune not by prune-vocab)."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def test_run_help_names_every_method_in_rank_order():
    text = _help("run")
    listed = ONE_OF.search(text)
    assert listed, text
    assert listed.group(1).split(", ") == names(), f"compress run --help lists {listed.group(1)}"
    assert f"({', '.join(names('student'))})" in text and f"({', '.join(names('transform'))})" in text, text
    assert [n for n in names() if not _names_word(text, n)] == []


def test_explain_help_names_every_method_and_lists_its_topics():
    text = _help("explain")
    listed = ONE_OF.search(text)
    assert listed, text
    topics = list(dict.fromkeys(m.explain_topic for m in all_methods()))
    assert listed.group(1).split(", ") == topics, f"compress explain --help lists {listed.group(1)}"
    unnamed = [n for n in names() if not _names_word(text, n)]
    assert unnamed == [], f"compress explain --help does not name {unnamed}"

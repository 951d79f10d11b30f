"""``docs/results.md``: the comparisons kept in ``docs/results/*.json``, rendered as one page by ``compress results``.

Every number on the page comes from a comparison.json that ``compress compare`` wrote, copied into the
repository with the command, the CPU and the date that made it; nothing on it is typed by hand, so the page is
made again (and checked to be current) by one command.
"""

from __future__ import annotations

from pathlib import Path

from compress.errors import CompressError
from compress.paths import atomic_write_text
from compress.reports.comparison_markdown import render_summary

DIRECTORY = Path("docs/results")
PAGE = Path("docs/results.md")

HEADER = """# Results

This page is generated: `compress results` renders every comparison file in `{directory}` (each a
`comparison.json` that `compress compare` wrote, kept with the command, the CPU and the date that made it).
To add a result, copy a comparison's `comparison.json` there under a name of its own and run the command
again; edit nothing here by hand. Speed-ups hold for the CPU they were measured on. Where a comparison prints
intervals (in brackets, a 95% interval from low to high, over its seeds and test sentences), the list and
the table of neighbouring pairs above its table say which differences lie beyond them; one without (made
before seeds) is one seed on one test split.
"""


def render_results(directory: Path = DIRECTORY) -> str:
    """The results page for every ``*.json`` in ``directory``, in name order."""
    files = sorted(Path(directory).glob("*.json"))
    if not files:
        raise CompressError(f"{directory} holds no comparison .json file; copy a comparison.json there first.")
    sections = [_section(path) for path in files]
    return "\n".join([HEADER.format(directory=Path(directory).as_posix()), *sections])


def _section(path: Path) -> str:
    """A comparison's section, or a table across tasks' (a tasks.json of ``compress compare --dataset A,B,C``)."""
    import json

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict) and data.get("kind") == "across-tasks":
        from compress.reports.across_tasks import read_across, render_markdown

        table = read_across(data)
        made = f"Made by `{table.command}`" if table.command else "Made by a `compress compare` across tasks"
        body = render_markdown(table, links=False).split("\n", 1)[1]    # its own title becomes a section's
        return f"## {table.teacher} across {len(table.tasks)} tasks\n\n{made}, {table.created}; rendered from " \
               f"`{Path(path).as_posix()}`.\n{body}"
    return render_summary(path)


def write_results(directory: Path = DIRECTORY, page: Path = PAGE, check: bool = False) -> bool:
    """Write the page (or, with ``check``, only compare it); True when ``page`` already held it."""
    text = render_results(directory)
    held = Path(page).read_text(encoding="utf-8") if Path(page).is_file() else None
    if held is not None and not held.startswith(HEADER.partition(":")[0]):
        raise CompressError(f"{page} was not written by `compress results` (it lacks the generated page's first "
                            "lines), so it is not replaced; choose another --out.")
    current = held == text
    if not check and not current:
        atomic_write_text(Path(page), text)
    return current

"""Every command's help reads as sentences: typer keeps a docstring's line breaks, which cut a sentence wherever the
source was wrapped, so each command's help is its docstring with each paragraph on one line."""

from __future__ import annotations

from helpers import run_cli


def _commands(command, path=("compress",)):
    for name, sub in getattr(command, "commands", {}).items():
        yield (*path, name), sub
        yield from _commands(sub, (*path, name))


def test_every_commands_help_has_its_paragraphs_on_one_line_each():
    import typer.main

    from compress.cli.app import build_app

    found = list(_commands(typer.main.get_command(build_app())))
    assert len(found) > 15    # run, compare, search, ..., and the groups' commands (teachers, data, cache)
    for path, command in found:
        for paragraph in (command.help or "").split("\n\n"):
            assert "\n" not in paragraph, f"{' '.join(path)}: {paragraph!r}"
        for parameter in command.params:
            assert "\n" not in (getattr(parameter, "help", None) or ""), f"{' '.join(path)} {parameter.name}"


def test_the_command_list_breaks_a_line_only_where_the_next_word_would_not_fit():
    """In `compress --help`'s list, each line of a command's description that another line follows is full: the next
    word would not have fitted on it (a line break kept from the source left "until two" alone on a line)."""
    done = run_cli("--help", env={"COLUMNS": "120"})
    assert done.returncode == 0, done.stderr
    box = done.stdout.split("─ Commands ─", 1)[1].splitlines()[1:]
    rows = [line[1:-1] for line in box if line.startswith("│")]   # inside the box's borders
    width = len(rows[0]) - 1
    indent = len(rows[0]) - len(rows[0].split(None, 1)[1]) if len(rows[0].split(None, 1)) > 1 else 0
    for line, following in zip(rows, rows[1:]):
        if following[:indent].strip():     # the next line starts another command
            continue
        next_word = following.split()[0]
        assert len(line.rstrip()) + 1 + len(next_word) > width, (line, following)

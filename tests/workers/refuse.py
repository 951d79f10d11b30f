"""Run compress's command-line entry point once for each argument list in the JSON file ARGV[1], one after another
in this process, and print, as JSON, each one's exit code, its stderr, and every path that appeared meanwhile under
the directories listed in ARGV[2:] (used by tests/test_refusals.py: one process instead of one per refusal)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

from compress.cli.app import main


def entries(directories: list[str]) -> list[str]:
    return sorted(str(p) for d in directories for p in Path(d).rglob("*"))


cases, watched = json.loads(Path(sys.argv[1]).read_text()), sys.argv[2:]
results = []
for args in cases:
    sys.argv[:] = ["compress", *args]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code
    results.append({"args": args, "code": code, "stderr": stderr.getvalue(), "created": entries(watched)})
print(json.dumps(results))

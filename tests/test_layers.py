"""No package of compress imports another that imports it back, directly or around a loop.

The contract is declared in pyproject.toml ([tool.importlinter]) and checked here by import-linter itself,
on the real package: a new import that closes a loop (``bench`` -> ``quantize`` -> ``training`` -> ``bench``,
as there was) fails this test with the loop named.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from helpers import REPO


def test_the_package_contract_is_declared_for_every_package():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = config["contracts"]
    assert contract["type"] == "acyclic_siblings" and contract["ancestors"] == ["compress"]


def test_no_package_imports_one_that_imports_it_back():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout

"""No package of compress imports another that imports it back, directly or around a loop, and inside every package
no module imports one that imports it back; imports made only for types (under TYPE_CHECKING) count.

The contracts are declared in pyproject.toml ([tool.importlinter]) and checked here by import-linter itself,
on the real package: a new import that closes a loop (``bench`` -> ``quantize`` -> ``training`` -> ``bench``,
as there was; ``registry`` -> ``reports.records`` -> ``registry`` through a type) fails this test with the loop named.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from helpers import HANG_GUARD, REPO


def test_the_contracts_are_declared_for_every_package_and_module_and_count_type_imports():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert config["exclude_type_checking_imports"] is False
    packages, modules = config["contracts"]
    assert packages["type"] == modules["type"] == "acyclic_siblings"
    assert packages["ancestors"] == ["compress"] and packages["depth"] == 0
    assert modules["ancestors"] == ["compress.*"] and "depth" not in modules   # every level below (the default, 10)


def test_no_package_imports_one_that_imports_it_back():
    lint = Path(sys.executable).with_name("lint-imports")
    # --no-cache: import-linter would otherwise write .import_linter_cache/ into the checkout
    done = subprocess.run([str(lint), "--no-cache"], capture_output=True, text=True, cwd=REPO, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout

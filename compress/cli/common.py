"""Console objects and output helpers shared by the CLI commands."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def print_json(obj: Any) -> None:
    """Print one JSON object on stdout, untouched by rich's markup and wrapping."""
    print(json.dumps(obj, indent=2, sort_keys=False, default=str))

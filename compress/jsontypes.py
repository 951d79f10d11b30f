"""The one name for a JSON object whose values are not known here: read from a file and about to be validated, or
made to be written as it is. Its values are ``object``, so whoever reads one narrows each value before using it."""

from __future__ import annotations

JSONObject = dict[str, object]

__all__ = ["JSONObject"]

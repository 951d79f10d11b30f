"""A comparison declared in a file (``compress compare --config FILE``, TOML or YAML) or copied from one recorded
(``compress compare --like comparison.json``).

Both speak in the command's own settings, named as its options are (``batch_size`` or ``batch-size`` for
``--batch-size``), so a file says what a command line would::

    # compare.toml
    teacher = "minilm"
    dataset = "mr"
    methods = ["distilbert", "distilbert+int8", "tinybert"]
    seeds = [13, 14, 15]
    precision = "auto"

A flag given on the command line wins over the file; a setting neither gives keeps its default. The comparison
records the settings it ran with (comparison.json's ``config``) and the file's text (``config_file``), and
``--like`` reads them back: the same methods, options, seeds, precision and training settings, with each
quantization backend that ``--backend auto`` chose pinned (``int8`` becomes ``int8[backend=onnxruntime]``), after
checking that the packages installed are the ones the comparison was made with. A record made before comparisons
kept their settings gives them through the command line it recorded.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from compress.bench.machine import package_versions
from compress.errors import CompressError
from compress.registry import get_method
from compress.registry.pipeline import Pipeline, Step, parse

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject
    from compress.reports.records import CompareSettings

# Every setting a file may declare, with the types its value may have (a command line's option names).
SETTINGS: dict[str, tuple[type, ...]] = {
    "teacher": (str,), "dataset": (str, list), "text_column": (str,), "text_pair_column": (str,),
    "label_column": (str,), "task": (str,), "dedupe": (bool,), "methods": (list, str), "out": (str,),
    "epochs": (int,), "batch_size": (int,), "seed": (int,), "seeds": (list, int, str), "threads": (int,),
    "seq_len": (int,), "repeats": (int,), "batch_shape": (str,), "choose_by": (str,), "teacher_epochs": (int,),
    "teacher_lr": (float, int), "teacher_batch_size": (int,), "teacher_layer_decay": (float, int), "device": (str,),
    "speed_device": (str,),
    "hold_out": (int,), "precision": (str,), "metric": (str,), "executor": (str,), "address": (str,),
    "cpus_per_run": (float, int), "gpus_per_run": (float, int), "recipe": (str,), "transfer_text": (str,),
    "warmup": (float, int), "decay": (str,), "copies_per_epoch": (int,),
}


def read_declared(path: Path) -> tuple[CompareSettings, str]:
    """The settings ``path`` declares (TOML, or YAML for .yaml/.yml), checked, and the file's text."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CompressError(f"cannot read the comparison file {path}: {e}.") from None
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = tomllib.loads(text)
    except Exception as e:  # noqa: BLE001 - each parser raises its own error type
        raise CompressError(f"{path} is not valid {'YAML' if path.suffix.lower() in ('.yaml', '.yml') else 'TOML'}: "
                            f"{str(e).splitlines()[0]}.") from None
    return check_settings(data if data is not None else {}, str(path)), text


def check_settings(data: object, where: str) -> CompareSettings:
    """``data`` as settings: a mapping of known names (``-`` read as ``_``) to values of their types."""
    if not isinstance(data, dict):
        raise CompressError(f"{where} must declare settings by name (a table of name = value), not a "
                            f"{type(data).__name__}.")
    settings: CompareSettings = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in SETTINGS:
            raise CompressError(f"{where}: unknown setting {key!r}; known: {', '.join(SETTINGS)}.")
        kinds = SETTINGS[name]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise CompressError(f"{where}: {key} must be {' or '.join(k.__name__ for k in kinds)}, not {value!r}.")
        if isinstance(value, list) and not all(isinstance(v, str if name == "methods" else int) for v in value):
            raise CompressError(f"{where}: {key} must list {'method texts' if name == 'methods' else 'integers'}.")
        settings[name] = value  # type: ignore[literal-required]   # a name of SETTINGS, checked above
    return settings


def settings_of(comparison: JSONObject, path: Path) -> CompareSettings | None:
    """The settings a recorded comparison ran with (None: recorded before comparisons kept them), its seeds and
    precision as recorded, and each backend ``--backend auto`` chose pinned."""
    recorded = comparison.get("config")
    if recorded is None:
        return None
    settings = check_settings(recorded, f"{path}'s config")
    return settings | {"methods": pin_backends(settings.get("methods", []), comparison)}


def pin_backends(methods: list[str] | str, comparison: JSONObject) -> list[str]:
    """``methods`` with the backend each quantization step chose under ``--backend auto`` written into it, as the
    rows of ``comparison`` recorded it (a step that named its backend keeps it)."""
    texts = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else list(methods)
    chosen = {row.get("method"): row.get("backend") for row in comparison.get("methods", [])}
    pinned = []
    for text in texts:
        pipeline = parse(text)
        last = pipeline.steps[-1]
        backend = chosen.get(text) or chosen.get(str(pipeline))
        takes = {f.name for f in fields(get_method(last.name).options)}
        if backend and "backend" in takes and last.options.get("backend", "auto") == "auto":
            pipeline = Pipeline((*pipeline.steps[:-1], Step(last.name, {**last.options, "backend": backend})))
        pinned.append(str(pipeline))
    return pinned


def version_differences(comparison: JSONObject) -> list[str]:
    """The packages installed here at other versions than the recorded comparison's, as "name X (recorded Y)"."""
    recorded = ((comparison.get("manifest") or {}).get("packages")) or {}
    installed = package_versions(tuple(recorded))
    return [f"{name} {installed[name] or 'not installed'} (recorded {version})"
            for name, version in recorded.items() if installed.get(name) != version]


def read_comparison_record(path: Path) -> JSONObject:
    """A comparison.json to copy (``--like``), in one sentence when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CompressError(f"cannot read the comparison {path}: {e}.") from None
    if not isinstance(data, dict) or not isinstance(data.get("methods"), list) or "teacher" not in data:
        raise CompressError(f"{path} is not a comparison.json compress wrote (no teacher and methods).")
    return data

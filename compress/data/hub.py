"""Hugging Face hub datasets: ``hf:NAME[:CONFIG]`` (for users who can reach the hub).

Before calling :func:`datasets.load_dataset` (which retries for about half a minute when the
hub is unreachable) compress checks that the hub endpoint answers within a few seconds and
fails with one sentence if it does not. With ``HF_HUB_OFFLINE=1`` or ``HF_DATASETS_OFFLINE=1``
the check is skipped and ``datasets`` answers from its local cache.

Hub split names map to ours (``validation`` -> ``dev``); splits without labels (GLUE test sets
use label -1) are dropped and then, like any missing dev/test split, carved from train.
Columns and labels are resolved as for local files (:mod:`compress.data.tables`).
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request

import datasets

from compress.data.splits import normalize_split_name
from compress.data.tables import LABEL_DEFAULT, TablePart, task_from_tables
from compress.data.task import TaskData
from compress.errors import CompressError

PREFIX = "hf:"
PROBE_TIMEOUT_S = 5.0


def parse_hub_spec(spec: str) -> tuple[str, str | None]:
    """``"hf:glue:sst2"`` -> ``("glue", "sst2")``; ``"hf:stanfordnlp/imdb"`` -> ``("stanfordnlp/imdb", None)``."""
    body = spec.removeprefix(PREFIX)
    name, _, config = body.partition(":")
    if not name.strip():
        raise CompressError(f"'{spec}' names no dataset; write hf:NAME or hf:NAME:CONFIG, e.g. hf:glue:sst2.")
    return name.strip(), (config.strip() or None)


def hub_endpoint() -> str:
    """The hub address: ``$HF_ENDPOINT``, else ``https://huggingface.co``."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def check_hub_reachable(what: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise one sentence unless the hub endpoint answers an HTTP request within ``timeout`` s."""
    endpoint = hub_endpoint()
    try:
        with urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout):
            pass
    except urllib.error.HTTPError:
        return  # the server answered; what it thinks of a bare HEAD does not matter
    except (OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise CompressError(
            f"cannot reach the Hugging Face hub at {endpoint} ({reason}) to load {what}; check the "
            "network, or download the data and give a local .csv/.tsv/.json/.jsonl/.parquet file instead."
        ) from None


def load_hub(
    spec: str,
    *,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
    task: str = "auto",
) -> TaskData:
    """Load ``hf:NAME[:CONFIG]`` from the hub through ``datasets`` as a task.

    Raises:
        CompressError: the hub is unreachable, the dataset cannot be loaded, or its columns or
            labels do not fit (see :func:`compress.data.tables.task_from_tables`).
    """
    name, config = parse_hub_spec(spec)
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"
    if not offline:
        check_hub_reachable(f"'{name}'")
    try:
        loaded = datasets.load_dataset(name, config)
    except Exception as e:  # noqa: BLE001 - any loader failure is reported as one sentence
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if offline:
            raise CompressError(
                f"could not load the hub dataset '{name}'{f' ({config})' if config else ''}: HF_HUB_OFFLINE or "
                f"HF_DATASETS_OFFLINE is set and it is not in the local datasets cache ({first.rstrip('.')}); unset "
                "them to download it, or give a local .csv/.tsv/.json/.jsonl/.parquet file instead."
            ) from None
        raise CompressError(
            f"could not load the hub dataset '{name}'{f' ({config})' if config else ''}: {first.rstrip('.')}; "
            "check the name and config."
        ) from None
    assert isinstance(loaded, datasets.DatasetDict)
    label = label_column or LABEL_DEFAULT
    parts: list[TablePart] = []
    for hub_split, rows in loaded.items():
        split = normalize_split_name(hub_split)
        if split is None or any(p.split == split for p in parts):
            continue
        if _unlabelled(rows, label):
            continue  # e.g. a GLUE test set, all labels -1
        parts.append(TablePart(rows, f"hub dataset {name} ({hub_split})", split))
    parts.sort(key=lambda p: ("train", "dev", "test").index(p.split or "train"))
    if not parts or parts[0].split != "train":
        raise CompressError(
            f"the hub dataset '{name}' has no labelled train split (it has {', '.join(loaded)}); "
            "pick another dataset or config."
        )
    return task_from_tables(
        parts,
        name=spec,
        source=f"Hugging Face hub dataset {name}{f' config {config}' if config else ''}",
        text_column=text_column,
        text_pair_column=text_pair_column,
        label_column=label_column,
        task=task,
    )


def _unlabelled(rows: datasets.Dataset, label: str) -> bool:
    """Whether a split's labels are all negative integers (no labels), judged on its first rows."""
    if label not in rows.column_names or len(rows) == 0:
        return False
    sample = rows.select(range(min(len(rows), 1000)))[label]
    return all(isinstance(v, int) and v < 0 for v in sample)

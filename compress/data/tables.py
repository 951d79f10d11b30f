"""From user tables (local files, hub datasets) to a task: columns, labels, given splits.

Column defaults: the text column is ``text``, else ``sentence``, else ``sentence1``; the
text-pair column is ``text_pair`` next to ``text`` or ``sentence2`` next to ``sentence1``, and
none otherwise; the label column is ``label``. An ``id`` column, when present, gives the
example ids (they must be unique); otherwise ids are row numbers (``<split>-<row>`` when the
splits come from separate files). A ``split`` column with values ``train``,
``dev``/``validation`` and ``test`` is honoured.

Labels: string labels are mapped to ids in sorted order; integer labels ``0..K-1`` are used
as they are (names ``"0"``, ``"1"``, ...); other integers are mapped in sorted order; a
:class:`datasets.ClassLabel` column keeps its own names. The mapping is recorded on the task
(``label_names`` and ``label_source``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import datasets

from compress.data.splits import SPLIT_ALIASES, normalize_split_name
from compress.data.task import TaskData, build_task
from compress.data.values import number
from compress.errors import CompressError

SPLIT_COLUMN = "split"
ID_COLUMN = "id"
TEXT_DEFAULTS: tuple[tuple[str, str | None], ...] = (
    ("text", "text_pair"),
    ("sentence", None),
    ("sentence1", "sentence2"),
)
"""(text column, its usual pair column) tried in this order when no text column is given."""
LABEL_DEFAULT = "label"


@dataclass(frozen=True)
class TablePart:
    """One table of rows: a whole file, one split file, or one hub split.

    Attributes:
        rows: the rows, as a :class:`datasets.Dataset`.
        where: what it is, for messages (``train.csv``, ``hub dataset glue/sst2 (validation)``).
        split: ``train``/``dev``/``test`` when the table is one split, else ``None``.
    """

    rows: datasets.Dataset
    where: str
    split: str | None = None


@dataclass(frozen=True)
class Columns:
    """The resolved column names of a table."""

    text: str
    text_pair: str | None
    label: str


def resolve_columns(
    names: Sequence[str],
    where: str,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
) -> Columns:
    """Pick the text, text-pair and label columns among ``names`` (see the module docstring).

    Raises:
        CompressError: a named or default column is missing (the message lists the columns).
    """
    have = ", ".join(f"'{n}'" for n in names) or "none"

    def require(column: str, option: str) -> str:
        if column not in names:
            raise CompressError(
                f"{where} has no column '{column}' (its columns are {have}); name the right one with {option}."
            )
        return column

    if text_column is not None:
        text = require(text_column, "--text-column")
        pair_default = None
    else:
        found = [(t, p) for t, p in TEXT_DEFAULTS if t in names]
        if not found:
            tried = " or ".join(f"'{t}'" for t, _ in TEXT_DEFAULTS)
            raise CompressError(
                f"{where} has no text column {tried} (its columns are {have}); name it with --text-column."
            )
        text, pair_default = found[0]
    if text_pair_column is not None:
        pair: str | None = require(text_pair_column, "--text-pair-column")
    else:
        pair = pair_default if pair_default in names else None
    label = require(label_column or LABEL_DEFAULT, "--label-column")
    if len({text, pair, label} - {None}) != (3 if pair else 2):
        raise CompressError(f"{where}: the text, text-pair and label columns must differ; pick different columns.")
    return Columns(text=text, text_pair=pair, label=label)


def map_labels(
    values: Sequence[object],
    column: str,
    where: str,
    class_names: Sequence[str] | None = None,
    task: str = "auto",
) -> tuple[list[int], list[str], str]:
    """Turn raw label values into ids and names (``task``: ``auto``, ``classification`` or ``regression``).

    Args:
        values: the label of every row, in order.
        column: the label column name, for messages.
        where: what the rows are, for messages.
        class_names: names from a :class:`datasets.ClassLabel` column, if it is one.

    Returns:
        ``(label ids, label names, where the mapping came from)``; a column of numbers with a fraction among them
        is a regression's targets: ``(the numbers, [], ...)``, as is any column of numbers with ``task="regression"``.

    Raises:
        CompressError: a missing label, numbers and words in one column, fewer than two classes, words in a
            regression's column, fractions in a classification's.
    """
    for row, value in enumerate(values, start=1):
        if (
            value is None
            or (isinstance(value, float) and math.isnan(value))
            or (isinstance(value, str) and not value.strip())
        ):
            raise CompressError(f"row {row} of {where} has no label in column '{column}'; fill it in or drop the row.")
        if isinstance(value, list | dict):
            raise CompressError(
                f"column '{column}' of {where} holds {type(value).__name__}s, not single labels; "
                "give one class per row (multi-label data is not supported)."
            )
    if task == "regression":
        numbers = [number(v) for v in values]
        if (row := next((i for i, x in enumerate(numbers, start=1) if x is None), None)) is not None:
            raise CompressError(f"--task regression needs numbers in label column '{column}' of {where}, and row "
                                f"{row} has {values[row - 1]!r}; fix the row or drop --task.")
        return numbers, [], f"numbers of column '{column}', the targets of a regression (--task regression)"  # type: ignore[return-value]
    if class_names is not None:
        names = list(class_names)
        for row, value in enumerate(values, start=1):
            if not isinstance(value, int) or not 0 <= value < len(names):
                raise CompressError(
                    f"row {row} of {where} has label {value!r}, which is not a class of column "
                    f"'{column}' ({len(names)} classes); fix or drop the row."
                )
        ids = [int(v) for v in values]  # type: ignore[call-overload]
        source = f"class names of the ClassLabel column '{column}'"
    elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        if any(isinstance(v, float) and not v.is_integer() for v in values):
            if task == "classification":
                raise CompressError(f"label column '{column}' of {where} holds fractions, which are not classes; drop "
                                    "--task classification to predict them as a regression.")
            return [float(v) for v in values], [], f"numbers of column '{column}', the targets of a regression"  # type: ignore[arg-type]
        ints = [int(v) for v in values]  # type: ignore[call-overload]
        classes = sorted(set(ints))
        names = [str(c) for c in classes]
        if classes == list(range(len(classes))):
            ids = ints
            source = f"integer labels of column '{column}' used as ids"
        else:
            index = {c: i for i, c in enumerate(classes)}
            ids = [index[v] for v in ints]
            source = f"integer labels of column '{column}' mapped to ids in sorted order ({_mapping_text(names)})"
    else:
        strings = [str(v).strip() for v in values]
        numbers = [s for s in strings if number(s) is not None]
        if numbers and len(numbers) < len(strings):
            word = next(s for s in strings if number(s) is None)
            raise CompressError(
                f"label column '{column}' of {where} holds both numbers ({numbers[0]!r}) and words ({word!r}); give "
                "class names, or numbers only for a regression.")
        names = sorted(set(strings))
        index = {name: i for i, name in enumerate(names)}
        ids = [index[s] for s in strings]
        source = f"string labels of column '{column}' mapped to ids in sorted order ({_mapping_text(names)})"
    used = sorted(set(ids))
    if len(used) < 2:
        only = names[used[0]] if used else "none"
        raise CompressError(
            f"label column '{column}' of {where} has only one class ('{only}'); a classifier "
            "needs at least two, so check the label column (--label-column)."
        )
    return ids, names, source


def task_from_tables(
    parts: Sequence[TablePart],
    *,
    name: str,
    source: str,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
    task: str = "auto",
) -> TaskData:
    """Build a task from one table (split here, or by its ``split`` column) or one per split; ``task`` as
    :func:`map_labels` takes it.

    Raises:
        CompressError: missing columns, empty tables, missing texts or labels, bad split names,
            duplicate ids, too few examples to split.
    """
    first = parts[0]
    columns = resolve_columns(first.rows.column_names, first.where, text_column, text_pair_column, label_column)
    for part in parts[1:]:
        resolve_columns(part.rows.column_names, part.where, columns.text, columns.text_pair, columns.label)
    class_names = _class_names(first.rows, columns.label)

    ids: list[str] = []
    texts: list[str] = []
    pairs: list[str] = []
    raw_labels: list[object] = []
    given: list[str | None] = []
    where = " + ".join(p.where for p in parts)
    for part in parts:
        rows = part.rows
        if len(rows) == 0:
            raise CompressError(f"{part.where} has a header but no rows; add examples to it.")
        texts.extend(_texts(rows[columns.text], columns.text, part.where))
        if columns.text_pair:
            pairs.extend(_texts(rows[columns.text_pair], columns.text_pair, part.where))
        raw_labels.extend(rows[columns.label])
        if ID_COLUMN in rows.column_names and ID_COLUMN not in (columns.text, columns.text_pair, columns.label):
            ids.extend(str(v) for v in rows[ID_COLUMN])
        else:
            prefix = f"{part.split}-" if len(parts) > 1 and part.split else ""
            ids.extend(f"{prefix}{i}" for i in range(len(rows)))
        if part.split is not None:
            given.extend([part.split] * len(rows))
        elif SPLIT_COLUMN in rows.column_names:
            given.extend(_split_values(rows[SPLIT_COLUMN], part.where))
    labels, names, label_source = map_labels(raw_labels, columns.label, where, class_names, task)
    return build_task(
        name=name,
        ids=ids,
        texts=texts,
        text_pairs=pairs if columns.text_pair else None,
        labels=labels,
        label_names=names,
        label_source=label_source,
        source=source,
        given_splits=given or None,
        where=where,
        regression=not names,
    )


def _texts(values: Sequence[object], column: str, where: str) -> list[str]:
    out: list[str] = []
    for row, value in enumerate(values, start=1):
        blank = isinstance(value, str) and not value.strip()  # "" or only whitespace: nothing to classify
        if value is None or blank or (isinstance(value, float) and math.isnan(value)):
            raise CompressError(f"row {row} of {where} has no text in column '{column}'; fill it in or drop the row.")
        out.append(value if isinstance(value, str) else str(value))
    return out


def _split_values(values: Sequence[object], where: str) -> list[str | None]:
    out: list[str | None] = []
    for row, value in enumerate(values, start=1):
        split = normalize_split_name(value)
        if split is None:
            accepted = ", ".join(sorted(SPLIT_ALIASES))
            raise CompressError(
                f"row {row} of {where} has split {value!r} in column '{SPLIT_COLUMN}'; use one of "
                f"{accepted} (or rename the column to let compress split the data)."
            )
        out.append(split)
    return out


def _class_names(rows: datasets.Dataset, column: str) -> list[str] | None:
    feature = rows.features.get(column)
    return list(feature.names) if isinstance(feature, datasets.ClassLabel) else None


def _mapping_text(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(f"{n}={i}" for i, n in enumerate(names[:limit]))
    return shown + (f", … {len(names) - limit} more" if len(names) > limit else "")

"""Where the copies lie in a transfer split, and which of its rows an epoch learns from when each epoch takes some of
the copies in turn (``--copies-per-epoch``). The split itself is made by :mod:`compress.students.transfer`; this is
what the training reads of it, kept beside the data so that distillation does not import the students."""

from __future__ import annotations

from collections.abc import Callable

import datasets

from compress.data.batching import LazySplit, TokenizedTask


class TransferSplit(LazySplit):
    """The transfer split (made on first use) and where its copies lie: its first ``sentences`` rows are the training
    sentences, then ``copies`` blocks of as many rows (every sentence's copy 1, then every copy 2, ...), then the
    user's texts."""

    def __init__(self, name: Callable[[], str], build: Callable[[str], datasets.Dataset], describe: str, *,
                 sentences: int, copies: int) -> None:
        super().__init__(name, build, describe)
        self.sentences, self.copies = sentences, copies


def epoch_rows(data: TokenizedTask, epoch: int, per_epoch: int | None) -> list[int] | None:
    """The rows of ``data``'s training split that epoch ``epoch`` (from 0) learns from when every epoch takes
    ``per_epoch`` of its copies: the training sentences, copies ``epoch * per_epoch + 1`` to ``epoch * per_epoch +
    per_epoch`` (numbered from 1, cycling through the copies the split holds) and the user's texts, in the split's
    order. None (every row) where ``per_epoch`` is None or at least the copies the split holds."""
    transfer = data.transfer
    if per_epoch is None or not isinstance(transfer, TransferSplit) or per_epoch >= transfer.copies:
        return None
    n, copies = transfer.sentences, transfer.copies
    chosen = sorted({(epoch * per_epoch + j) % copies for j in range(per_epoch)})
    rows = list(range(n))
    for copy in chosen:
        rows.extend(range(n * (1 + copy), n * (2 + copy)))
    rows.extend(range(n * (1 + copies), len(transfer.get())))
    return rows

"""Data-parallel training across the processes that ``torchrun`` or ``accelerate launch`` starts.

The same command runs in one process as usual, or in N under a launcher: accelerate's
``PartialState`` reads the launcher's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...) and joins the
process group (gloo on the CPU, nccl on CUDA). Then every rank trains on its own slice of each global
batch (``--batch-size`` stays the global batch, so a run's hyper-parameters do not depend on N), the
gradients are averaged with one all-reduce per step, and evaluation gathers every rank's predictions
back into their original order, each example once. Rank 0 alone writes run directories, caches and
reports; the others wait for it (:func:`main_first`).

Gradients are averaged after backward rather than by wrapping the model in torch's
DistributedDataParallel: DDP needs every parameter used in every forward, and stages that distil
hidden states leave the classifier unused, while the projections of a distillation objective train
outside the model.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch


@dataclass(frozen=True)
class World:
    """This process's place among the training processes: ``rank`` of ``size`` (one process: 0 of 1)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


_world: World | None = None
WAIT = timedelta(hours=6)


def launched() -> bool:
    """Whether a launcher started this process as one of several."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def world(device: str = "auto") -> World:
    """This process's :class:`World`; under a launcher, the first call joins the process group (gloo for
    ``device`` cpu or where there is no CUDA, else nccl, one GPU per local rank)."""
    global _world
    if _world is None:
        if not launched():
            _world = World()
        else:
            from accelerate import PartialState

            # Ranks wait at barriers while rank 0 fills a cache (teacher logits, an augmented split): hours on
            # a large corpus, where the default timeout is 30 minutes.
            state = PartialState(cpu=device == "cpu" or not torch.cuda.is_available(), timeout=WAIT)
            _world = World(rank=state.process_index, size=state.num_processes, local_rank=state.local_process_index)
    return _world


def barrier() -> None:
    if world().size > 1:
        torch.distributed.barrier()


@contextmanager
def main_first() -> Iterator[None]:
    """Rank 0 runs the block first (building a cache entry); the others run it after, finding it built."""
    w = world()
    if w.size > 1 and not w.is_main:
        torch.distributed.barrier()
    yield
    if w.size > 1 and w.is_main:
        torch.distributed.barrier()


def broadcast(value: Any) -> Any:
    """Rank 0's ``value`` on every rank (a small picklable object: a decision, a path)."""
    if world().size == 1:
        return value
    box = [value]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def all_gather(value: Any) -> list[Any]:
    """Every rank's ``value``, in rank order (small picklable objects)."""
    w = world()
    if w.size == 1:
        return [value]
    values: list[Any] = [None] * w.size
    torch.distributed.all_gather_object(values, value)
    return values


def local_slice(batch: dict[str, torch.Tensor], w: World) -> dict[str, torch.Tensor]:
    """This rank's contiguous part of a global batch (ranks before it get one example more when it does
    not divide evenly)."""
    if w.size == 1:
        return batch
    return {k: torch.tensor_split(v, w.size)[w.rank] for k, v in batch.items()}


def average_gradients(parameters: list[torch.nn.Parameter]) -> None:
    """Average the gradients of ``parameters`` over the ranks: one all-reduce of them all, flattened."""
    w = world()
    grads = [p.grad for p in parameters if p.grad is not None]
    if w.size == 1 or not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    flat /= w.size
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def all_sum(values: torch.Tensor) -> torch.Tensor:
    """The sum over ranks of ``values`` (each rank passing its share of a mean makes the sum that mean)."""
    if world().size > 1:
        torch.distributed.all_reduce(values)
    return values


def same_start(parameters: list[torch.nn.Parameter]) -> None:
    """Give every rank rank 0's weights (they are built from the same seed; this makes sure)."""
    if world().size > 1:
        with torch.no_grad():
            for p in parameters:
                torch.distributed.broadcast(p.data, src=0)

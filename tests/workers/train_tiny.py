"""Train a tiny dropout-free encoder with compress's training loop and write its per-step losses to ARGV[1] and its
final weights to ARGV[1].safetensors (rank 0). Run alone or under torchrun by tests/test_distributed.py."""

from __future__ import annotations

import json
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
from helpers import tiny_config  # noqa: E402

from compress.distributed import world  # noqa: E402
from compress.models.encoder import Encoder  # noqa: E402
from compress.teachers.finetune import hard_label_loss  # noqa: E402
from compress.training import TrainConfig, train_stage  # noqa: E402


def batches(epoch: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(100 + epoch)
    out = []
    for size in (8, 8, 8, 5):  # the last batch does not divide evenly over two ranks
        ids = torch.randint(1, 101, (size, 12), generator=g)
        mask = torch.ones_like(ids)
        mask[: size // 2, 8:] = 0
        out.append({"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
                    "labels": ids[:, 0] % 3})
    return out


def main() -> None:
    w = world("cpu")
    torch.manual_seed(0)
    model = Encoder(tiny_config(hidden_dropout=0.0, attention_dropout=0.0, classifier_dropout=0.0))
    losses = []

    def loss_fn(m, batch):
        loss, parts = hard_label_loss(m, batch)
        return loss, parts

    class Log:
        def write(self, line: str) -> None:
            record = json.loads(line)
            if "step" in record:
                losses.append(record["loss"])

        def flush(self) -> None:
            pass

    result = train_stage(model, loss_fn, batches, lambda: batches(99), TrainConfig(epochs=2, lr=1e-3, seed=1),
                         device=torch.device("cpu"), log=Log(), show_progress=False)  # type: ignore[arg-type]
    if w.is_main:
        save_file({name: p.detach().contiguous() for name, p in model.named_parameters()}, sys.argv[1] + ".safetensors")
        json.dump({"world": w.size, "losses": losses, "dev": result.best_dev}, open(sys.argv[1], "w"))


if __name__ == "__main__":
    main()

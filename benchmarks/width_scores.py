"""How the hidden channels a width cut keeps should be chosen: dev accuracy of the fine-tuned teacher cut to a few
widths with no recovery, its channels ranked by each score, beside random choices of as many.

    python benchmarks/width_scores.py --widths 320,288,256 --random-seeds 3

Scores, each summed over every layer norm's output of the residual stream (the embeddings', each block's) and taken
on ``--examples`` training sentences: ``mean-abs`` (mean |x| over the real tokens: Minitron's activation magnitude,
what ``prune --keep-width`` uses), ``rms`` (root mean square over the tokens), ``taylor`` (|sum over the tokens of
x dL/dx| per batch, averaged over batches: the first-order change of the loss were the channel zeroed there).
"""

from __future__ import annotations

import argparse
import random
import statistics

import torch

from compress.bench.machine import cpu_model
from compress.distill.losses import hard_ce
from compress.models.encoder import Encoder
from compress.prune.curve import without_channels
from compress.prune.importance import layer_norm_outputs
from compress.runs.config import RunConfig, run_task
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.training import evaluate, model_inputs


def scores(model: Encoder, batches: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    hidden = model.config.hidden_size
    totals = {"mean-abs": torch.zeros(hidden), "rms": torch.zeros(hidden), "taylor": torch.zeros(hidden)}
    model.eval()
    for batch in batches:
        real = batch["attention_mask"].bool()
        model.zero_grad(set_to_none=True)
        with layer_norm_outputs(model) as outputs:
            loss = hard_ce(model(**model_inputs(batch)).logits, batch["labels"])
        grads = torch.autograd.grad(loss, outputs)
        for out, grad in zip(outputs, grads, strict=True):
            x, g = out.detach()[real], grad[real]
            totals["mean-abs"] += x.abs().mean(0)
            totals["rms"] += x.pow(2).mean(0).sqrt()
            totals["taylor"] += (x * g).sum(0).abs()
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="320,288,256")
    parser.add_argument("--random-seeds", type=int, default=3)
    parser.add_argument("--examples", type=int, default=1024)
    args = parser.parse_args()
    torch.set_num_threads(2)
    config = RunConfig(method="prune")
    task = run_task(config)
    finetuned = finetune_teacher(config.teacher, task, config.teacher_finetune, show_progress=False)
    data = tokenized_for(finetuned, task)
    model = finetuned.load().model.eval()
    batches = data.sample(args.examples, config.seed)
    found = scores(model, batches)

    def dev(kept: list[int]) -> float:
        return evaluate(without_channels(model, kept), data.eval_batches("dev"), torch.device("cpu")).primary

    widths = [int(w) for w in args.widths.split(",")]
    hidden = model.config.hidden_size
    print(f"{cpu_model()}; fine-tuned teacher dev accuracy {dev(list(range(hidden))):.4f}; scores on "
          f"{sum(len(b['input_ids']) for b in batches)} training sentences")
    print("| channels kept | " + " | ".join(found) + " | random (mean, min-max over seeds) |")
    print("|---:|" + "---:|" * (len(found) + 1))
    for width in widths:
        cells = [f"{dev(torch.topk(s, width).indices.tolist()):.4f}" for s in found.values()]
        drawn = [dev(random.Random(seed).sample(range(hidden), width)) for seed in range(args.random_seeds)]
        cells.append(f"{statistics.mean(drawn):.4f} ({min(drawn):.4f}-{max(drawn):.4f})")
        print(f"| {width} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

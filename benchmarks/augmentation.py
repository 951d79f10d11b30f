"""Time TinyBERT's augmentation with a masked-LM head: one text at a time against blocks of texts, in one run.

    python benchmarks/augmentation.py                        # BERT-base-sized head, 64 MR sentences, 2 threads
    python benchmarks/augmentation.py --layers 24 --hidden 1024 --sentences 32   # BERT-large-sized

Algorithm 1 of TinyBERT asks the masked LM once per replaced word, about 7 words of an MR sentence at the
paper's p = 0.4. ``augment_texts`` asks it about a block of texts at one word position at once; this script
times that against blocks of one text (the way it asked before), on the same sentences.
No BERT checkpoint with a masked-LM head is on this machine (the bundled minilm has none), so the head has
random weights of the given size: the time depends on the shape, not on the weights. Each way runs
``--repeats`` times after a warm-up; the script prints the median seconds per sentence and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
from transformers import BertConfig, BertForMaskedLM

import compress.students.augment as augment
from compress.bench.machine import cpu_model
from compress.bench.timing import fixed_threads
from compress.data.named import load_named
from compress.teachers.registry import load_tokenizer, resolve_teacher_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    teacher = resolve_teacher_dir("minilm")
    tokenizer = load_tokenizer(str(teacher))
    neighbours = augment.EmbeddingNeighbours.from_checkpoint(teacher, tokenizer, k=15)
    texts = load_named("mr").splits["train"]["text"][: args.sentences]
    config = augment.AugmentConfig(copies=1)
    with tempfile.TemporaryDirectory() as directory, fixed_threads(args.threads):
        torch.manual_seed(0)
        shape = BertConfig(vocab_size=len(tokenizer), hidden_size=args.hidden, num_hidden_layers=args.layers,
                           num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden)
        BertForMaskedLM(shape).save_pretrained(directory)
        head = augment.mlm_candidates_from_checkpoint(directory, tokenizer, k=15)
        assert head is not None

        def seconds(block: int) -> tuple[float, list[tuple[int, str]]]:
            augment._BLOCK = block
            start = time.perf_counter()
            out = augment.augment_texts(texts, tokenizer, neighbours, config, head)
            return time.perf_counter() - start, out

        seconds(256)  # warm-up: first calls allocate
        blocked, alone = [], []
        for _ in range(args.repeats):   # alternating, so drifting load hits both
            t, by_block = seconds(256)
            blocked.append(t)
            t, one_by_one = seconds(1)
            alone.append(t)
        same = sum(a == b for a, b in zip(by_block, one_by_one, strict=True))
    n = len(texts)
    print(f"CPU: {cpu_model()}, {args.threads} threads; masked-LM head L={args.layers} H={args.hidden} "
          f"(random weights); {n} MR sentences, one copy, median of {args.repeats}")
    print(f"one text at a time: {statistics.median(alone) / n:.3f} s per sentence")
    print(f"blocks of 256:      {statistics.median(blocked) / n:.3f} s per sentence")
    print(f"speed-up: {statistics.median(alone) / statistics.median(blocked):.2f}x "
          f"(texts identical both ways: {same}/{len(by_block)}; padding in a batch may reorder near-tied candidates)")


if __name__ == "__main__":
    main()

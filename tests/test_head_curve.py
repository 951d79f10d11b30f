"""Pruning's head-importance curve is drawn on dev: a comparison keeps the test split for judging its models once,
so nothing before that reads it, and the curve's record and report say which sentences it was drawn on."""

from __future__ import annotations

from helpers import make_tiny_teacher, write_tiny_csv

from compress.methods.prune.details import PruneDetails
from compress.prune.curve import CURVE_SPLIT, HeadCurve


def test_the_head_importance_curve_is_drawn_on_dev_never_on_test(tmp_path, monkeypatch):
    from compress.data.batching import TokenizedTask, tokenize_task
    from compress.data.load import load_task
    from compress.models.checkpoints import load_encoder
    from compress.registry import Context, get_method
    from compress.teachers.registry import load_tokenizer

    teacher = make_tiny_teacher(tmp_path / "teacher")
    task = load_task(str(write_tiny_csv(tmp_path / "r.csv")))
    data = tokenize_task(task, load_tokenizer(str(teacher)), cache=False)
    model = load_encoder(teacher, num_labels=task.num_labels).model
    read: list[str] = []
    eval_batches = TokenizedTask.eval_batches

    def reading(self, split, *args, **kwargs):
        read.append(split)
        return eval_batches(self, split, *args, **kwargs)

    monkeypatch.setattr(TokenizedTask, "eval_batches", reading)
    prune = get_method("prune")
    made = prune.apply(model, prune.make_options({"recovery_epochs": 0, "scoring_examples": 16}), Context(data=data))
    curve = made.details.head_curve
    assert CURVE_SPLIT == "dev" and curve is not None and curve.split == "dev"
    assert read and set(read) == {"dev"}   # 2 x 10 passes of the source with heads removed, every one on dev
    assert len(curve.importance) == len(curve.random) == 10


def test_a_curve_recorded_before_it_named_its_split_reads_as_drawn_on_test():
    """Runs made before the curve moved to dev drew it on test, and their records say nothing: they read as test."""
    old = {"shares_removed": [0.0, 0.1], "heads": 8, "seed": 13, "importance": [0.8, 0.79], "random": [0.8, 0.7]}
    assert HeadCurve(**old).split == "test"
    details = PruneDetails.from_dict({"options": {}, "steps": [], "source_config": {}, "layers_kept": [0],
                                      "head_curve": old})
    assert details.head_curve is not None and details.head_curve.split == "test"
    assert PruneDetails.from_dict({"options": {}, "steps": [], "source_config": {}, "layers_kept": [0],
                                   "head_curve": old | {"split": "dev"}}).head_curve.split == "dev"

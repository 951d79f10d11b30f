"""Every refusal the suite knows of, with every cache empty: one line on stderr, exit 2, and nothing fetched or
created first (no cache entry, no run or comparison directory, nothing in the working directory).

Each command checks all of its options, methods, pipelines, data and paths in one check phase before it fetches,
tokenizes, fine-tunes or writes anything; on a machine where nothing is cached, a refusal that came after a fetch
would show here as a second line and a cache entry. pip cannot reach any index in these runs, so a refusal that
regressed to after the data download fails fast instead of fetching and training.

The refusals run through compress's entry point one after another in one process (tests/workers/refuse.py), so
the whole list costs one start-up; tests/test_safety.py and tests/test_cli_startup.py run the console script itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import HANG_GUARD, REPO, offline_hub_env, write_tiny_csv

# (command line, a phrase its one line must hold); {in} is a folder of inputs made by _inputs.
REFUSALS: list[tuple[str, str]] = [
    # compress run: the options every run has
    ("run albert --epochs 0", "--epochs must be a positive integer"),
    ("run albert --lr 0", "--lr must be positive"),
    ("run albert --patience 0", "--patience must be a positive integer"),
    ("run albert --batch-size 0", "--batch-size must be a positive integer"),
    ("run albert --threads 0", "--threads must be a positive integer"),
    ("run albert --checkpoint-every -1", "--checkpoint-every must be 0"),
    ("run albert --precision fp8", "unknown --precision 'fp8'"),
    ("run albert --device tpu", "unknown device 'tpu'"),
    ("run albert --teacher-lr -1", "teacher fine-tuning: lr must be positive"),
    ("run albert --seed abc", "Invalid value for '--seed'"),
    ("run albert --no-such-flag", "No such option: --no-such-flag"),
    ("run", "Missing argument 'method'"),
    ("no-such-command", "No such command 'no-such-command'"),
    # compress run: a student's shape and recipe
    ("run albert --rank -1", "rank must be 0 (strict sharing) or more, got -1"),
    ("run albert --rank 385", "rank 385 is above min(out, in) = 384"),
    ("run albert --rank 8 --sharing none", "sharing none shares none"),
    ("run albert --shared-init median", "shared_init must be one of"),
    ("run albert --delta-init random", "delta_init must be one of svd, zero"),
    ("run albert --embedding-size 0", "embedding_size must be a positive integer"),
    ("run albert --embedding-size 512", "must not exceed the teacher's hidden size"),
    ("run albert --sharing most", "sharing must be one of"),
    ("run tinybert --layers 0", "num_layers must be a positive integer"),
    ("run distilbert --layer-map 9,10,11", "explicit teacher layer indices must be in 1..6"),
    ("run distilbert --layer-map sideways", "layer map kind must be one of uniform"),
    # compress run: a transform's options
    ("run prune --keep-heads 0", "--keep-heads is the share to keep"),
    ("run prune --keep-ffn 1.5", "--keep-ffn is the share to keep"),
    ("run prune --drop-layers 6", "--drop-layers 6 would remove every layer: the model has 6"),
    ("run prune-vocab --vocab-from everything", "--vocab-from must be one of train, all"),
    ("run lowrank --rank 0", "--rank must be a positive integer, got 0"),
    ("run lowrank --keep 1.5", "must be in (0, 1], got 1.5"),
    ("run lowrank --keep 0.0001", "--keep 0.0001 keeps nothing"),
    ("run lowrank --weighting random", "--weighting must be one of svd, fisher, activation"),
    ("run lowrank --embedding-rank 0", "--embedding-rank must be a positive integer"),
    ("run int8 --keep-heads 0.5", "--keep-heads do(es) not apply to int8"),
    ("run albert --keep-ffn 0.5", "albert trains a student (add --then prune"),
    ("run int8 --epochs 2", "trains nothing"),
    ("run int8 --target {in}/missing-run", "--target must be 'teacher' or a run directory"),
    ("run albert --target {in}", "--target is for"),
    # compress run: pipelines
    ("run nosuch", "unknown method 'nosuch'"),
    ("run int8+distilbert", "can only be a pipeline's first step"),
    ("run int8+lowrank", "lowrank cannot follow int8"),
    ("run lowrank+prune", "prune cannot follow lowrank"),
    ("run distilbert+lowrank+lowrank", "lowrank cannot follow lowrank"),
    ("run distilbert+prune[drop_layers=3]", "--drop-layers 3 would remove every layer: the model has 3"),
    ("run albert[rank=8]+prune", "prune cannot cut a relaxed ALBERT"),
    ("run albert[rank=8]+lowrank", "lowrank cannot factorize a relaxed ALBERT"),
    ("run distilbert[width=3]+int8", "--width do(es) not apply to distilbert"),
    ("run distilbert+bf16[backend=onnxruntime]", "bf16 runs on torch or openvino, not onnxruntime"),
    ("run albert[sharing=all", "cannot read the pipeline"),
    ("run distilbert+", "cannot read the pipeline"),
    ("run albert[groups=two]", "--groups takes an integer"),
    ("run distilbert --set layers", "--set takes KEY=VALUE"),
    ("run distilbert --then albert", "--then takes a pruning, low-rank factorization or quantization method"),
    ("run int8 --backend tvm", "unknown backend 'tvm'"),
    ("run int8 --min-retention 1.5", "--min-retention is a share of the fp32 model's accuracy"),
    ("run int8 --choose-by speed", "--choose-by must be latency or throughput"),
    ("run int8 --batch-shape bucketed", "--batch-shape bucketed shapes the batches --choose-by throughput times"),
    ("run int8 --choose-by throughput --batch-shape ragged", "unknown --batch-shape 'ragged'"),
    ("run distilbert --precision fp16 --device cpu", "--precision fp16 trains on CUDA only"),
    ("run distilbert --layers 7", "between 1 and the teacher's 6"),
    ("run int8[backend=onnxruntime] --backend torch", "is given twice to int8"),
    # compress run: teachers, data and paths
    ("run albert --teacher bert-large", "cannot get 'google-bert/bert-large-uncased' from the Hugging Face hub"),
    ("run albert --teacher {in}/foreign", "is not a checkpoint directory (it has no config.json)"),
    ("run albert --dataset nosuch", "unknown dataset 'nosuch'"),
    ("run albert --dataset {in}/missing.csv", "missing.csv does not exist"),
    ("run albert --dataset mr --text-column review", "--text-column applies to files and hub datasets"),
    ("run albert --dataset hf:", "'hf:' names no dataset"),
    ("run albert --dataset {in}/notes.txt", "notes.txt is not a"),
    ("run albert --dataset {in}/empty.csv", "empty.csv is empty"),
    ("run albert --dataset {in}/reviews.csv --label-column stars", "has no column 'stars'"),
    ("run albert --dataset {in}/one-class.csv", "has only one class"),
    ("run albert --out {in}/reviews.csv", "is a file, not a directory"),
    ("run albert --out {in}/foreign", "already exists and is not empty"),
    ("run albert --out {in}/foreign --overwrite", "--overwrite replaces only a compress run directory"),
    ("run distilbert+int8 --out {in}/reviews.csv", "is a file, not a directory"),
    # compress compare
    ("compare --methods nosuch", "unknown method 'nosuch'"),
    ("compare --methods albert,int8+distilbert", "can only be a pipeline's first step"),
    ("compare --methods albert[rank=-1]", "rank must be 0 (strict sharing) or more, got -1"),
    ("compare --methods distilbert --layer-map 9", "No such option: --layer-map"),
    ("compare --methods distilbert+prune[drop_layers=3]", "--drop-layers 3 would remove every layer"),
    ("compare --methods distilbert --seq-len 1", "--seq-len must be between 2"),
    ("compare --methods distilbert --dataset nosuch", "unknown dataset 'nosuch'"),
    ("compare --methods distilbert --dataset {in}/one-class.csv", "has only one class"),
    ("compare --methods distilbert --out {in}/reviews.csv", "is a file, not a directory"),
    ("compare --methods distilbert --out {in}/foreign", "is not a comparison compress wrote"),
    ("compare --methods distilbert --executor spark", "unknown executor 'spark'"),
    ("compare --methods distilbert --seeds 13,13", "--seeds must give 1 to 20 different seeds"),
    ("compare --methods distilbert --seeds x", "--seeds takes seeds separated by commas"),
    ("compare --methods distilbert --seed 7 --seeds 3", "give --seed (one seed) or --seeds (several), not both"),
    # compress pretrain
    ("pretrain --objective xyz", "unknown objective 'xyz'"),
    ("pretrain --init random", "unknown init 'random'"),
    ("pretrain --sentences-per-segment 0", "--sentences-per-segment must be a positive integer"),
    ("pretrain --sharing most", "invalid ALBERT shape"),
    ("pretrain --embedding-size 512", "invalid ALBERT shape"),
    ("pretrain --corpus {in}/missing.txt", "unknown corpus"),
    ("pretrain --device tpu", "unknown device 'tpu'"),
    ("pretrain --downstream nosuch", "unknown dataset 'nosuch'"),
    ("pretrain --downstream {in}/one-class.csv", "has only one class"),
    ("pretrain --downstream mr --downstream-epochs 0", "--epochs must be a positive integer"),
    ("pretrain --downstream mr --out {in}/reviews.csv", "reviews.csv is a file"),
    # compress teacher finetune
    ("teacher finetune --epochs 0", "epochs must be a positive integer"),
    ("teacher finetune --layer-decay 2", "layer_decay must be in (0, 1]"),
    ("teacher finetune --dataset nosuch", "unknown dataset 'nosuch'"),
    ("teacher finetune --dataset mr --label-column stars", "--label-column applies to files and hub datasets"),
    ("teacher finetune --dataset {in}/one-class.csv", "has only one class"),
    ("teacher finetune --device tpu", "unknown device 'tpu'"),
    # compress explain
    ("explain pruning", "unknown method 'pruning'"),
    ("explain albert --teacher gpt-17", "unknown teacher 'gpt-17'"),
    ("explain albert --seq-len 0", "--seq-len must be a positive integer"),
    ("explain albert --keep-heads 0.5", "--keep-heads do(es) not apply to albert"),
    ("explain all --sharing none", "name the method"),
    ("explain albert+int8", "explain takes one method"),
    ("explain albert --sharing most", "sharing must be one of"),
    # compress data and compress results
    ("teachers verify bert-large", "cannot get 'google-bert/bert-large-uncased' from the Hugging Face hub"),
    ("data show {in}/missing.csv", "missing.csv does not exist"),
    ("results {in}/missing", "holds no comparison"),
    ("report {in}/foreign", "There is no comparison.json"),
]


def _inputs(folder: Path) -> None:
    """What the refusals name: a good CSV, one with a single class, an empty one, a text file, a foreign folder."""
    folder.mkdir()
    write_tiny_csv(folder / "reviews.csv", copies=2)
    (folder / "one-class.csv").write_text("text,label\n" + "".join(f"good film {i},pos\n" for i in range(20)))
    (folder / "empty.csv").write_text("")
    (folder / "notes.txt").write_text("not a table\n")
    (folder / "foreign").mkdir()
    (folder / "foreign" / "thesis.tex").write_text("mine")


def _refuse(root: Path, refusals: list[tuple[str, str]], pythonpath: list[Path] = ()) -> dict[str, dict]:
    """Each command line of ``refusals`` run in one process (tests/workers/refuse.py), with ``pythonpath``
    ahead of the installed packages: its exit code, stderr and what it created."""
    inputs, work, cache = root / "in", root / "work", root / "cache"
    _inputs(inputs)
    work.mkdir()
    cases = [line.format(**{"in": inputs}).split() for line, _ in refusals]
    (root / "cases.json").write_text(json.dumps(cases))
    before = sorted(map(str, inputs.rglob("*")))
    hub = offline_hub_env(root)
    # pip reaches no index: a refusal that regressed to after the download fails here at once, not after training
    env = {**os.environ, **hub, "COMPRESS_CACHE": str(cache), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "",
           "PIP_CONFIG_FILE": os.devnull, "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join(map(str, [*pythonpath, REPO]))}
    done = subprocess.run([sys.executable, str(REPO / "tests" / "workers" / "refuse.py"), str(root / "cases.json"),
                           str(cache), hub["HF_HOME"], str(work)],
                          capture_output=True, text=True, env=env, cwd=work, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(map(str, inputs.rglob("*"))) == before   # the inputs are as they were
    return {line: result for (line, _), result in zip(refusals, json.loads(done.stdout))}


def _assert_refused(result: dict, phrase: str) -> None:
    assert result["code"] == 2 and phrase in result["stderr"], result
    assert result["stderr"].count("\n") == 1, result["stderr"]
    assert result["created"] == [], f"{result['args']} fetched or created {result['created'][:5]} before refusing"


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    return _refuse(tmp_path_factory.mktemp("refusals"), REFUSALS)


@pytest.mark.parametrize(("line", "phrase"), REFUSALS, ids=[line for line, _ in REFUSALS])
def test_a_refusal_is_one_line_exit_2_before_any_work(refused: dict[str, dict], line: str, phrase: str):
    _assert_refused(refused[line], phrase)


# OpenVINO is an optional extra: asked for where it is not installed, it is a refusal like the others.
WITHOUT_OPENVINO = [
    ("run int8 --backend openvino", "int8 cannot run here: OpenVINO is not installed"),
    ("run distilbert+int8[backend=openvino]", "pip install 'compress[openvino]'"),
    ("compare --methods distilbert,bf16[backend=openvino]", "bf16 cannot run here: OpenVINO is not installed"),
]


def test_openvino_asked_for_where_it_is_not_installed_is_a_refusal(tmp_path: Path):
    shadow = tmp_path / "shadow" / "openvino"   # found before the installed package: importing it fails
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed here', name='openvino')\n")
    results = _refuse(tmp_path, WITHOUT_OPENVINO, pythonpath=[shadow.parent])
    for line, phrase in WITHOUT_OPENVINO:
        _assert_refused(results[line], phrase)

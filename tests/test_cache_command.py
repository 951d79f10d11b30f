"""`compress cache list|prune|clear` on real entries on disk: the sizes add up to `du -s` of the root, a prune frees
what it says and only what its rule chooses, and nothing in use, outside the root or not written by compress goes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import HANG_GUARD, REPO, run_cli

from compress import cache_inventory, cache_kinds
from compress.cache import cached, verify
from compress.cache_inventory import PruneRule, inventory, prune
from compress.cache_kinds import KINDS
from compress.quantities import human_size
from compress.errors import CompressError
from compress.paths import cache_dir, lock_path

DAY = 86400


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def make_entry(kind: str, name: str, size: int = 20_000, record: tuple[str, dict] | None = None) -> Path:
    """A cache entry built as compress builds them (:func:`compress.cache.cached`): a few files and checksums.json."""
    def build(tmp: Path) -> None:
        (tmp / "weights.bin").write_bytes(os.urandom(size))
        (tmp / "sub").mkdir()
        (tmp / "sub" / "notes.txt").write_text("small")
        if record is not None:
            (tmp / record[0]).write_text(json.dumps(record[1]))

    return cached(cache_dir() / kind / name, kind, build, lambda target: target)[0]


def make_run(name: str, method: str = "distilbert", size: int = 20_000) -> Path:
    """A run-store entry: a run directory's config.json and metrics.json with its weights."""
    def build(tmp: Path) -> None:
        (tmp / "config.json").write_text(json.dumps({"run": {"method": method, "teacher": "minilm", "dataset": "mr"}}))
        (tmp / "metrics.json").write_text(json.dumps({"method": method, "dataset": {"name": "mr"}}))
        (tmp / "student").mkdir()
        (tmp / "student" / "model.safetensors").write_bytes(os.urandom(size))

    return cached(cache_dir() / "run-store" / name, "stored run", build, lambda target: target)[0]


def age(path: Path, days: float) -> None:
    """Make ``path`` and everything under it last modified ``days`` ago."""
    when = time.time() - days * DAY
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            os.utime(Path(top) / name, (when, when), follow_symlinks=False)
    os.utime(path, (when, when), follow_symlinks=False)


def du(path: Path) -> int:
    done = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def cache_json(root: Path, *args: str) -> dict:
    done = run_cli(*args, "--json", env={"COMPRESS_CACHE": str(root)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def tree(path: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``path``, not following links: relative path -> (size, mtime)."""
    found = {}
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            st = (Path(top) / name).lstat()
            found[str((Path(top) / name).relative_to(path))] = (st.st_size, st.st_mtime_ns)
    return found


@pytest.fixture
def holder() -> Iterator[Callable[[Path], int]]:
    """Hold a lock file's flock in another process, as a compress building or using that entry does."""
    held: list[subprocess.Popen] = []

    def hold(lock: Path) -> int:
        code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); "
                "fcntl.flock(fd, fcntl.LOCK_EX); os.ftruncate(fd, 0); os.write(fd, f'{os.getpid()}\\n'.encode()); "
                "print('held', flush=True); sys.stdin.read()")
        child = subprocess.Popen([sys.executable, "-c", code, str(lock)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        held.append(child)
        assert child.stdout.readline().strip() == "held"
        return child.pid

    yield hold
    for child in held:
        child.stdin.close()
        child.wait(timeout=HANG_GUARD)


# --- list ----------------------------------------------------------------------------------------------------------


def test_list_prints_every_entry_by_kind_and_sizes_that_add_up_to_du(root):
    make_entry("teachers", "t1", 60_000, ("record.json", {"teacher": "minilm", "dataset": "mr"}))
    make_entry("tokenized", "k1", 5_000, ("meta.json", {"task": "mr", "max_length": 64}))
    make_entry("teacher_logits", "f1-k1-train", 30_000)
    make_run("r1")
    (root / "search-probes").mkdir()
    (root / "search-probes" / "p1.json").write_text(json.dumps({"context": {"threads": 2, "seq_len": 64}}))
    (root / "teachers" / ".t2.tmp-abcd1234").mkdir()                 # left by a killed fine-tuning
    (root / "teachers" / ".t2.tmp-abcd1234" / "part.bin").write_bytes(os.urandom(7_000))
    (root / "notes").mkdir()                                          # not compress's: listed, never removed
    (root / "notes" / "a.bin").write_bytes(os.urandom(9_000))
    os.link(root / "notes" / "a.bin", root / "notes" / "b.bin")      # one file, two names: counted once, as du does
    (root / "teachers" / "half").mkdir()                              # an entry without its checksums: not ours

    listed = cache_json(root, "cache", "list")
    assert listed["total_bytes"] == du(root)
    parts = sum(e["size"] for e in listed["entries"]) + sum(o["size"] for o in listed["others"])
    assert parts + listed["folders_bytes"] == listed["total_bytes"]
    made_by = {f"{e['kind']}/{e['name']}": e["made_by"] for e in listed["entries"]}
    assert made_by == {"teachers/t1": "minilm fine-tuned on mr", "teachers/.t2.tmp-abcd1234": "left by a killed "
                       "process (t2)", "teacher_logits/f1-k1-train": "teacher logits on train",
                       "run-store/r1": "run distilbert of minilm on mr",
                       "search-probes/p1.json": "a search's speed probes (2 threads, 64 tokens)",
                       "tokenized/k1": "mr tokenized to 64 tokens"}
    assert {Path(o["path"]).name for o in listed["others"]} == {"notes", "half"}
    assert {k["kind"]: k["entries"] for k in listed["by_kind"]} == {
        "teachers": 2, "stored teacher outputs": 1, "run store": 1, "probes": 1, "data": 1}
    assert all(0 <= e["age_seconds"] < 600 for e in listed["entries"])

    table = run_cli("cache", "list", env={"COMPRESS_CACHE": str(root)})
    assert table.returncode == 0, table.stderr
    assert f"total: {human_size(du(root))} ({du(root):,} bytes" in table.stdout
    assert "minilm fine-tuned on mr" in table.stdout and "never removed" in table.stdout


def test_list_of_a_cache_that_is_not_there_yet(root):
    done = run_cli("cache", "list", env={"COMPRESS_CACHE": str(root)})
    assert done.returncode == 0 and "is empty" in done.stdout, done.stderr
    assert not root.exists()   # listing writes nothing


# --- prune ---------------------------------------------------------------------------------------------------------


def test_prune_older_than_removes_only_old_entries_and_frees_what_it_says(root):
    old, new = make_entry("teachers", "old", 40_000), make_entry("teachers", "new", 40_000)
    old_run, new_run = make_run("old-run"), make_run("new-run")
    age(old, 40), age(old_run, 31), age(new, 29)
    before = du(root)

    done = cache_json(root, "cache", "prune", "--older-than", "30d")
    assert sorted(e["name"] for e in done["removed"]) == ["old", "old-run"]
    assert done["freed_bytes"] == before - du(root) > 80_000
    assert not old.exists() and not old_run.exists()
    assert verify(new) is None and verify(new_run) is None   # the others untouched, still intact
    assert [p.name for p in (root / "teachers").iterdir()] == ["new"]   # no lock file nor aside directory left


def test_prune_keep_last_keeps_the_newest_of_each_kind(root):
    teachers = [make_entry("teachers", f"t{i}", 5_000) for i in range(3)]
    runs = [make_run(f"r{i}", size=5_000) for i in range(2)]
    for days, path in zip((3, 2, 1), teachers):
        age(path, days)
    age(runs[0], 5)
    removal = prune(PruneRule(keep_last=1))
    assert sorted(e.name for e in removal.removed) == ["r0", "t0", "t1"]
    assert [p.exists() for p in teachers + runs] == [False, False, True, False, True]


def test_prune_max_size_removes_the_oldest_until_the_cache_fits(root):
    entries = [make_entry("teachers", f"t{i}", 30_000) for i in range(3)]
    for days, path in zip((9, 5, 1), entries):
        age(path, days)
    oldest = inventory().entries[-1]
    assert oldest.name == "t0"
    limit = du(root) - oldest.size   # room for all but the oldest
    before = du(root)
    done = cache_json(root, "cache", "prune", "--max-size", str(limit))
    assert [e["name"] for e in done["removed"]] == ["t0"] and done["unmet"] is None
    assert du(root) <= limit and done["freed_bytes"] == before - du(root)
    # a limit below what is not compress's: every entry goes, and the report says the limit was not met
    (root / "notes.txt").write_text("not compress's")
    done = cache_json(root, "cache", "prune", "--max-size", "0")
    assert sorted(e["name"] for e in done["removed"]) == ["t1", "t2"] and "over --max-size" in done["unmet"]


def test_max_size_says_it_was_not_met_when_an_entry_came_into_use_after_it_was_chosen(root, holder, monkeypatch):
    old, new = make_entry("teachers", "old", 30_000), make_entry("teachers", "new", 30_000)
    age(old, 9), age(new, 1)
    listed = inventory()   # nobody uses either entry when the prune chooses what to remove...
    holder(lock_path(old))   # ...then a run starts using the one it chose
    monkeypatch.setattr(cache_inventory, "inventory", lambda *args, **kwargs: listed)
    limit = du(root) - listed.entries[-1].size
    done = prune(PruneRule(max_size=limit))
    assert not done.removed and [e.name for e in done.skipped] == ["old"] and verify(old) is None
    assert done.unmet is not None and "over --max-size" in done.unmet and du(root) > limit


def test_an_entry_whose_lock_is_held_is_never_removed_and_is_reported(root, holder):
    busy, idle = make_entry("teachers", "busy"), make_entry("teachers", "idle")
    age(busy, 50), age(idle, 50)
    pid = holder(lock_path(busy))
    listed = cache_json(root, "cache", "list")
    assert {e["name"]: e["in_use"] for e in listed["entries"]} == {"busy": f"in use by process {pid}", "idle": None}

    done = run_cli("cache", "prune", "--older-than", "1d", env={"COMPRESS_CACHE": str(root)})
    assert done.returncode == 0, done.stderr
    assert "kept teachers/busy" in done.stdout and f"in use by process {pid}" in done.stdout
    assert "removed teachers/idle" in done.stdout
    assert verify(busy) is None and not idle.exists()
    cleared = cache_json(root, "cache", "clear", "--yes")
    assert cleared["removed"] == [] and [e["name"] for e in cleared["skipped"]] == ["busy"]
    assert verify(busy) is None


def test_a_leftover_of_a_killed_run_is_pruned_unless_its_entry_is_being_written(root, holder):
    make_entry("teachers", "done")
    for name in ("a", "b"):
        leftover = root / "teachers" / f".{name}.tmp-x1y2z3w4"
        leftover.mkdir()
        (leftover / "part.bin").write_bytes(os.urandom(3_000))
    holder(lock_path(root / "teachers" / "b"))   # b is being built right now: its temporary directory is in use
    removal = prune(PruneRule(older_than=365 * DAY))
    assert [e.name for e in removal.removed] == [".a.tmp-x1y2z3w4"]
    assert [e.name for e in removal.skipped] == [".b.tmp-x1y2z3w4"]
    assert (root / "teachers" / "done").exists() and (root / "teachers" / ".b.tmp-x1y2z3w4" / "part.bin").exists()


def test_an_unfinished_checkpoint_written_lately_is_kept(root):
    for name, days in (("recent", 0), ("stale", 3)):
        entry = root / "unfinished" / name
        entry.mkdir(parents=True)
        (entry / "state.pt").write_bytes(os.urandom(4_000))
        (entry / "state.sha256.json").write_text(json.dumps({"sha256": ["0" * 64]}))
        age(entry, days)
    cleared = cache_json(root, "cache", "clear", "--yes")
    assert [e["name"] for e in cleared["removed"]] == ["stale"]
    assert [e["name"] for e in cleared["skipped"]] == ["recent"]
    assert "may still run" in cleared["skipped"][0]["in_use"]


def test_links_out_of_the_root_are_listed_never_followed_nor_removed_through(root, tmp_path):
    make_entry("teachers", "mine")
    outside = tmp_path / "outside"
    (outside / "entry").mkdir(parents=True)
    (outside / "entry" / "checksums.json").write_text(json.dumps({"format": 1, "files": {}}))
    (outside / "big.bin").write_bytes(os.urandom(50_000))
    (root / "teachers" / "linked").symlink_to(outside / "entry")   # an entry's place, but a link out
    (root / "run-store").symlink_to(outside)                        # a whole kind's folder, a link out
    (root / "big.bin").symlink_to(outside / "big.bin")
    before = tree(outside)

    listed = cache_json(root, "cache", "list")
    assert listed["total_bytes"] == du(root)   # the 50 KB outside are not counted
    assert {Path(o["path"]).name for o in listed["others"]} == {"linked", "run-store", "big.bin"}
    cleared = cache_json(root, "cache", "clear", "--yes")
    assert [e["name"] for e in cleared["removed"]] == ["mine"]
    assert {Path(o["path"]).name for o in cleared["left"]} == {"linked", "run-store", "big.bin"}
    assert tree(outside) == before
    assert (root / "teachers" / "linked").is_symlink() and (root / "run-store").is_symlink()


def test_a_removal_checks_the_entry_is_still_inside_the_root(root, tmp_path):
    entry = make_entry("teachers", "t")
    elsewhere = tmp_path / "elsewhere" / "teachers" / "t"
    elsewhere.mkdir(parents=True)
    inv = inventory()
    moved = replace(inv.entries[0], path=elsewhere)   # an entry whose path leads out of the root
    removal = cache_inventory._apply(inv, [moved], time.time())
    assert removal.removed == [] and removal.skipped[0].in_use == "not inside the cache root"
    assert elsewhere.is_dir() and entry.is_dir()


# --- refusals ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "expected"), [
    (["prune"], "say what to prune"),
    (["prune", "--older-than", "soon"], "--older-than takes a time such as"),
    (["prune", "--older-than", "30"], "--older-than takes a time such as"),
    (["prune", "--max-size", "-3"], "--max-size takes a size"),
    (["prune", "--max-size", "20Q"], "--max-size takes a size"),
    (["prune", "--keep-last", "-1"], "--keep-last"),
    (["clear"], "add --yes"),
], ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_bad_values_and_a_clear_without_yes_are_refused_in_one_line_before_any_work(root, args, expected):
    make_entry("teachers", "t")
    age(root / "teachers" / "t", 400)
    before = tree(root)
    done = run_cli("cache", *args, env={"COMPRESS_CACHE": str(root)})
    assert done.returncode == 2 and expected in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert tree(root) == before


def test_a_rule_must_say_what_to_remove():
    with pytest.raises(CompressError):
        PruneRule()


# --- the kinds -----------------------------------------------------------------------------------------------------


def test_the_kinds_are_every_folder_compress_writes_under_the_cache_root():
    written = set()
    for source in (REPO / "compress").rglob("*.py"):
        written |= set(re.findall(r'cache_dir\(\) / "([^"]+)"', source.read_text()))
    assert written and written == set(KINDS)


def test_the_markers_are_the_ones_the_writers_use():
    from compress import cache
    from compress.data import sources

    assert cache_kinds.CHECKSUMS == cache.CHECKSUMS
    assert cache_kinds.MANIFEST == sources.MANIFEST
    assert f'"{cache_kinds.UNFINISHED_DIGESTS}"' in (REPO / "compress" / "resume.py").read_text()


def test_cache_list_imports_no_heavy_library(root):
    make_entry("teachers", "t")
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "compress", "cache", "list"], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "COMPRESS_CACHE": str(root)}, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "compress.cache_inventory" in imported and "compress.cache_kinds" in imported
    assert not imported & {"torch", "transformers", "datasets"}


def test_an_entry_another_process_is_reading_is_kept_by_a_prune(root):
    """A process checking and loading a cache entry (compress.cache's hit path, the run store's restore) holds its
    lock shared (compress.paths.reading): a prune meanwhile keeps the entry; once the read is over, it goes."""
    read = make_entry("teachers", "read", 30_000)
    code = ("import sys; from pathlib import Path; from compress.paths import reading\n"
            "with reading(Path(sys.argv[1])):\n    print('reading', flush=True); sys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(read)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "reading"
        done = run_cli("cache", "prune", "--older-than", "0s", env={"COMPRESS_CACHE": str(root)})
        assert done.returncode == 0, done.stderr
        assert "kept teachers/read" in done.stdout and read.is_dir()
    finally:
        child.stdin.close()
        child.wait(timeout=HANG_GUARD)
    assert not lock_path(read).exists()   # the last reader out removes the lock file, as a writer does
    done = run_cli("cache", "prune", "--older-than", "0s", env={"COMPRESS_CACHE": str(root)})
    assert done.returncode == 0, done.stderr
    assert not read.exists()


def test_a_running_comparisons_ray_starts_are_recognised_by_their_content(tmp_path):
    """What a Ray task leaves at each start (compress.runs.executors) is an entry of ours; a folder of other files
    beside it is not."""
    from compress.runs.executors import _count_start

    entry = tmp_path / "ray-attempts" / "a1"
    _count_start(str(entry / "0"))
    _count_start(str(entry / "0"))
    assert len(list((entry / "0").iterdir())) == 2 and KINDS["ray-attempts"].ours(entry)
    other = tmp_path / "ray-attempts" / "b2" / "0"
    other.mkdir(parents=True)
    (other / "notes.txt").write_text("mine")
    assert not KINDS["ray-attempts"].ours(other.parent)

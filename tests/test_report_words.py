"""A run's report says a ratio to the teacher as words read it: a student slower than its teacher is "slower", not
"0.82x faster"."""

from __future__ import annotations

from compress.reports.run_record import times


def test_a_ratio_below_one_is_said_the_other_way_round():
    assert times(2.1, "faster", "slower") == "2.10x faster"
    assert times(0.82, "faster", "slower") == "1.22x slower"     # was "0.82x faster"
    assert times(0.93, "more", "less") == "1.08x less"
    assert times(1.001, "faster", "slower") == "the same"


def _record(test: tuple[float, float, float], dev: tuple[float, float, float] | None):
    """A run record with only what the retention lines read: its test and dev retention intervals."""
    from types import SimpleNamespace

    def interval(values):
        return dict(zip(("estimate", "low", "high"), values, strict=True)) | {"level": 0.95}

    retentions = {"test": interval(test)} | ({"dev": interval(dev)} if dev else {})
    return SimpleNamespace(retention=test[0], retentions=retentions, metric=None,
                           teacher=SimpleNamespace(accuracy=0.84), dataset=SimpleNamespace(sizes={"test": 1031,
                                                                                                  "dev": 1031}))


def test_the_retention_comes_with_its_intervals_and_a_sentence_where_test_and_dev_disagree():
    from compress.reports.run_record import retention_lines, retention_summary

    agree = _record((0.967, 0.942, 0.993), (0.955, 0.930, 0.981))
    assert retention_summary(agree) == "96.7% (94.2-99.3% over 1,031 test sentences; dev 95.5%, 93.0-98.1%)"
    lines = retention_lines(agree)
    assert lines == ["**Retention** (student accuracy / teacher accuracy): **96.7%** on the 1,031 test sentences, "
                     "95% interval 94.2-99.3% (paired with the teacher on the same sentences). On the 1,031 dev "
                     "sentences: 95.5%, 93.0-98.1%."]
    # the run: 96.7% on test, 92.7% on dev, each about ±2.5 points: 4 points apart is more than the ±3.5
    # the two intervals allow together
    apart = retention_lines(_record((0.967, 0.942, 0.992), (0.927, 0.902, 0.952)))
    assert apart[-1].startswith("Test reads the student 4.0 points higher than dev, more than the two intervals "
                                "allow (±3.5)")
    assert len(retention_lines(_record((0.967, 0.942, 0.992), (0.937, 0.912, 0.962)))) == 1   # 3 points: within
    # a run recorded before runs kept intervals: the bare number
    old = _record((0.967, 0.942, 0.992), None)
    old.retentions = None
    assert retention_summary(old) == "96.7%" and retention_lines(old) == [
        "**Retention** (student accuracy / teacher accuracy): **96.7%**."]

"""A run's report says a ratio to the teacher as words read it: a student slower than its teacher is "slower", not
"0.82x faster"."""

from __future__ import annotations

from compress.reports.run_record import times


def test_a_ratio_below_one_is_said_the_other_way_round():
    assert times(2.1, "faster", "slower") == "2.10x faster"
    assert times(0.82, "faster", "slower") == "1.22x slower"     # was "0.82x faster"
    assert times(0.93, "more", "less") == "1.08x less"
    assert times(1.001, "faster", "slower") == "the same"

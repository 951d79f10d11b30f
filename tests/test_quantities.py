"""Durations and sizes as users type them: one grammar for --budget, --older-than and --max-size."""

import pytest

from compress.errors import CompressError
from compress.quantities import human_age, human_size, parse_duration, parse_size


def test_a_duration_reads_what_people_write():
    assert parse_duration("90m", "--budget") == parse_duration("1h30m", "--budget") == 5400
    assert parse_duration("1.5h", "--budget") == parse_duration("5400s", "--budget") == 5400
    assert parse_duration("30d", "--older-than") == 30 * 86400
    assert parse_duration("1d12h", "--older-than") == parse_duration("1.5 d", "--older-than") == 36 * 3600
    assert parse_duration("90", "--budget", bare="m") == 5400   # a bare number counts in the option's own unit


@pytest.mark.parametrize("text", ["", "90", "ninety", "30m1h", "1x", "-5m", "m"])
def test_a_duration_that_is_not_one_is_refused_in_one_sentence_naming_its_option(text):
    with pytest.raises(CompressError, match=r"^--older-than takes a time such as .*, not ") as raised:
        parse_duration(text, "--older-than")
    assert "\n" not in str(raised.value)


def test_sizes_read_and_print_in_powers_of_1000_unless_binary_is_asked_for():
    assert parse_size("20G") == 20 * 10**9 and parse_size("2GiB") == 2 * 2**30 and parse_size("512") == 512
    assert parse_size("1.5mb") == 1_500_000
    with pytest.raises(CompressError, match="--max-size takes a size"):
        parse_size("20 parsecs")
    assert human_size(999) == "999 B" and human_size(23_600_000) == "23.6 MB" and human_size(999_960) == "1.0 MB"
    assert human_age(40) == "40 s" and human_age(720) == "12 min" and human_age(3 * 86400) == "3 d"

"""Message-size schedules: NetPIPE's rule, explicit lists and size parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beoperf.sweep.schedule import (
    explicit_schedule,
    netpipe_schedule,
    nominal_sizes,
)
from beoperf.units import parse_size

# Captured from a real `NPtcp` 3.7 run (default options) on this machine.
NPTCP_37_SIZES = [int(word) for word in """
1 2 3 4 6 8 12 13 16 19 21 24 27 29 32 35 45 48 51 61 64 67 93 96 99 125 128 131
189 192 195 253 256 259 381 384 387 509 512 515 765 768 771 1021 1024 1027 1533 1536
1539 2045 2048 2051 3069 3072 3075 4093 4096 4099 6141 6144 6147 8189 8192 8195 12285
12288 12291 16381 16384 16387 24573 24576 24579 32765 32768 32771 49149 49152 49155
65533 65536 65539 98301 98304 98307 131069 131072 131075 196605 196608 196611 262141
262144 262147 393213 393216 393219 524285 524288 524291 786429 786432 786435 1048573
1048576 1048579 1572861 1572864 1572867 2097149 2097152 2097155 3145725 3145728 3145731
4194301 4194304 4194307 6291453 6291456 6291459 8388605 8388608 8388611
""".split()]


def test_captured_list_is_what_we_think():
    assert len(NPTCP_37_SIZES) == 124
    assert NPTCP_37_SIZES == sorted(set(NPTCP_37_SIZES))


def test_defaults_equal_nptcp_37_exactly():
    assert netpipe_schedule() == NPTCP_37_SIZES


def test_explicit_defaults_equal_implicit():
    assert netpipe_schedule(1, 8 * 1024**2, 3) == NPTCP_37_SIZES


def test_perturbation_zero_gives_nominal_sizes_only():
    sizes = netpipe_schedule(perturbation=0)
    assert sizes[:12] == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
    assert sizes == nominal_sizes(1, 8 * 1024**2)
    assert sizes[-1] == 8 * 1024**2
    for n in sizes[1:]:
        # every nominal size above 1 is 2^k or 1.5 * 2^k
        assert n & (n - 1) == 0 or (n % 3 == 0 and (n // 3) & (n // 3 - 1) == 0)
    assert set(sizes) < set(NPTCP_37_SIZES)


def test_small_sizes_are_not_perturbed():
    # 4 * perturbation = 12: nothing up to 12 gets neighbours
    sizes = netpipe_schedule(1, 16, 3)
    assert sizes == [1, 2, 3, 4, 6, 8, 12, 13, 16, 19]


def test_larger_perturbation():
    sizes = netpipe_schedule(1, 64, 7)
    # sizes above 28 are perturbed by 7
    assert sizes == [1, 2, 3, 4, 6, 8, 12, 16, 24, 25, 32, 39, 41, 48, 55, 57, 64, 71]


def test_start_and_end_with_perturbation_zero():
    sizes = netpipe_schedule(100, 1000, 0)
    assert sizes[0] == 100
    assert sizes[-1] == 768
    assert all(100 <= s <= 1000 for s in sizes)
    assert sizes == [100, 128, 192, 256, 384, 512, 768]


def test_single_size_range():
    assert netpipe_schedule(5, 5, 0) == [5]
    assert netpipe_schedule(7, 7) == [7]
    assert netpipe_schedule(1, 1) == [1]


def test_end_is_the_last_nominal_size():
    sizes = netpipe_schedule(1, 1024)
    assert sizes[-3:] == [1021, 1024, 1027]
    sizes = netpipe_schedule(1, 1000)
    assert sizes[-3:] == [765, 768, 771]


@pytest.mark.parametrize("start, end, pert", [(0, 0, 3), (-1, 10, 3), (10, 9, 3), (1, 10, -1)])
def test_bad_arguments(start, end, pert):
    with pytest.raises(ValueError):
        netpipe_schedule(start, end, pert)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 1 << 20), st.integers(0, 1 << 22), st.integers(0, 50))
def test_schedule_property(start, extra, pert):
    end = start + extra
    sizes = netpipe_schedule(start, end, pert)
    assert sizes, "a schedule is never empty"
    assert all(a < b for a, b in zip(sizes, sizes[1:], strict=False)), "strictly increasing"
    assert all(isinstance(s, int) for s in sizes)
    assert sizes[0] >= max(1, start - pert)
    assert sizes[-1] <= end + pert
    nominal = nominal_sizes(start, end)
    assert nominal[0] == start
    assert all(start <= n <= end for n in nominal)
    assert start in sizes
    if pert == 0:
        assert sizes == nominal
    else:
        # everything measured is a nominal size or one of its +-pert neighbours
        allowed = {n + d for n in nominal for d in (-pert, 0, pert)}
        assert set(sizes) <= allowed


def test_every_nominal_size_is_measured():
    """A +perturbation neighbour must not push the next nominal size out of the schedule.

    start=164, perturbation=29: 164 is measured at 135, 164, 193, and the next nominal
    size, 192, must still be measured (with 163 and 221 around it).
    """
    sizes = netpipe_schedule(164, 192, 29)
    assert 192 in sizes, sizes
    assert all(a < b for a, b in zip(sizes, sizes[1:], strict=False))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 1 << 16), st.integers(0, 1 << 18), st.integers(0, 50))
def test_every_nominal_size_is_measured_property(start, extra, pert):
    sizes = netpipe_schedule(start, start + extra, pert)
    assert set(nominal_sizes(start, start + extra)) <= set(sizes)


@pytest.mark.parametrize("text, expected", [
    ("64K", 65536),
    ("64k", 65536),
    ("64KB", 65536),
    ("64KiB", 65536),
    ("1M", 1048576),
    ("8m", 8 * 1048576),
    ("2MiB", 2 * 1048576),
    ("1G", 1024**3),
    ("100", 100),
    ("100B", 100),
    (" 16 K ", 16384),
    ("0", 0),
])
def test_parse_size(text, expected):
    """The --sizes grammar is units.parse_size (binary multiples)."""
    assert parse_size(text, allow_zero=True) == expected


@pytest.mark.parametrize("text", ["", " ", "K", "1.5K", "-1", "64X", "1P", "12 34", "0x10",
                                  "abc", "1KK", "+5"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text, allow_zero=True)


def test_explicit_schedule_sorts_and_dedupes():
    assert explicit_schedule("8,1024,64K") == [8, 1024, 65536]
    assert explicit_schedule("64K, 8, 65536, 8,1K") == [8, 1024, 65536]
    assert explicit_schedule("1") == [1]
    assert explicit_schedule("4,,2,") == [2, 4]


@pytest.mark.parametrize("text", ["", " ", ",", "-1,8", "8,-0x1"])
def test_explicit_schedule_rejects_unusable(text):
    with pytest.raises(ValueError):
        explicit_schedule(text)


def test_explicit_schedule_takes_an_empty_message():
    assert explicit_schedule("8,0") == [0, 8] and explicit_schedule("0") == [0]


def test_explicit_schedule_rejects_bad_size():
    with pytest.raises(ValueError, match="not a size"):
        explicit_schedule("8,banana")

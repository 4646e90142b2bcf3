"""One grammar for sizes, rates, times and fractions, as the module docstring states it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beoperf import units


@pytest.mark.parametrize("text, value", [
    ("1", 1), ("65536", 65536), ("64K", 65536), ("64k", 65536), ("64KB", 65536),
    ("64KiB", 65536), ("8M", 8 * 2**20), ("8MiB", 8 * 2**20), ("2G", 2 * 2**30),
    ("1T", 2**40), (" 16 ", 16), ("16B", 16), ("4 K", 4096),
])
def test_sizes_are_binary(text, value):
    assert units.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "K", "1.5K", "-1", "0", "64Kb", "64Q", "1e3",
                                  "99999999999T", "nan", "inf"])
def test_bad_sizes(text):
    with pytest.raises(ValueError, match="size"):
        units.parse_size(text)


def test_zero_size_when_allowed():
    assert units.parse_size("0", allow_zero=True) == 0


@pytest.mark.parametrize("text, bits", [
    ("10G", 1e10), ("10Gbit/s", 1e10), ("10Gb/s", 1e10), ("10gbps", 1e10), ("10gbit", 1e10),
    ("10GB/s", 8e10), ("10GBps", 8e10), ("1.25GB/s", 1e10), ("100M", 1e8),
    ("100mbit", 1e8), ("2kB/s", 16e3), ("16kbit/s", 16e3), ("500B/s", 4000.0),
    ("1Gibit/s", 2.0**30), ("1GiB/s", 8 * 2.0**30), ("9600", 9600.0), ("1e9", 1e9),
])
def test_rates(text, bits):
    assert units.parse_rate(text) == pytest.approx(bits)


@pytest.mark.parametrize("text", ["", "G", "0", "-5M", "1e999", "nan", "inf", "10 parsecs",
                                  "10GB", "10Gbyte/s"])
def test_bad_rates(text):
    with pytest.raises(ValueError, match="rate"):
        units.parse_rate(text)


def test_one_meaning_everywhere():
    """10GB/s is bytes (8x 10Gbit/s); 10G and 10Gbit/s are the same."""
    assert units.parse_rate("10GB/s") == 8 * units.parse_rate("10Gbit/s")
    assert units.parse_rate("10G") == units.parse_rate("10Gbit/s")


@pytest.mark.parametrize("text, seconds", [
    ("2", 2.0), ("0.5", 0.5), ("500ms", 0.5), ("20us", 20e-6), ("20µs", 20e-6),
    ("5ns", 5e-9), ("1.5min", 90.0), ("2h", 7200.0), ("1d", 86400.0), ("3s", 3.0),
])
def test_times(text, seconds):
    assert units.parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "0", "-1", "1e308d", "nan", "1 fortnight", "inf"])
def test_bad_times(text):
    with pytest.raises(ValueError, match="time"):
        units.parse_time(text)


@pytest.mark.parametrize("text, value", [("0.02", 0.02), ("2%", 0.02), ("0", 0.0),
                                         ("100%", 1.0)])
def test_fractions(text, value):
    assert units.parse_fraction(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["2", "-1%", "abc", "nan", "101%"])
def test_bad_fractions(text):
    with pytest.raises(ValueError, match="fraction"):
        units.parse_fraction(text)


@pytest.mark.parametrize("value, text", [
    (1.25e10, "12.5 Gbit/s"), (95.6e6, "95.6 Mbit/s"), (800.0, "800 bit/s"),
])
def test_format_rate(value, text):
    assert units.format_rate(value) == text


def test_format_others():
    assert units.format_size(65536) == "64 KiB"
    assert units.format_size(1500) == "1.465 KiB" and units.format_size(1000) == "1000 B"
    assert units.size_tick(8 * 2**20) == "8M" and units.size_tick(1536) == "1536"
    assert units.format_time(12.3e-6) == "12.3 us"
    assert units.format_time(7200) == "2 h"
    assert units.format_flops(3.2e9) == "3.2 GFLOP/s"
    assert units.format_byte_rate(2266.2) == "2.266 kB/s"
    assert units.rate_unit(5e9) == ("Gbit/s", 1e9)


@given(st.integers(min_value=1, max_value=2**40))
def test_size_ticks_parse_back(n):
    assert units.parse_size(units.size_tick(n)) == n


@given(st.floats(min_value=1.0, max_value=1e13))
def test_formatted_rates_parse_back(bits):
    text = units.format_rate(bits, digits=12).replace(" ", "")
    assert units.parse_rate(text) == pytest.approx(bits, rel=1e-9)

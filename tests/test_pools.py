"""Buffer pools: the no-cache span each end uses, and when it says it falls short."""

from __future__ import annotations

import pytest

from beoperf import pools
from beoperf.pools import MiB


def test_two_buffers_pads_the_first_to_64_bytes():
    assert pools.two_buffers(1) == 65
    assert pools.two_buffers(64) == 128
    assert pools.two_buffers(100) == 228


@pytest.mark.parametrize("llc", [32 * MiB, 260 * MiB, None])
def test_ideal_span_is_one_and_a_half_caches_plus_a_message(llc):
    span = pools.ideal_span(4096, llc)
    assert span == 3 * (llc or pools.ASSUMED_LLC) // 2 + 4096
    assert pools.nocache_span(4096, llc) == span  # no limit: the ideal


def test_span_never_exceeds_the_limit_nor_falls_below_two_buffers():
    assert pools.nocache_span(8, 260 * MiB, limit=64 * MiB) == 64 * MiB
    assert pools.nocache_span(8, 1 * MiB, limit=64 * MiB) == pools.ideal_span(8, 1 * MiB)
    assert pools.nocache_span(20 * MiB, 260 * MiB, limit=64 * MiB) == 64 * MiB
    assert pools.nocache_span(1000, 260 * MiB, limit=100) == pools.two_buffers(1000)


def test_facts_and_warning_when_the_span_cannot_exceed_the_cache():
    facts = pools.pool_facts(4096, True, 260 * MiB, limit=64 * MiB)
    assert facts == {"nocache": True, "span_bytes": 64 * MiB, "llc_bytes": 260 * MiB,
                     "llc_assumed": False, "exceeds_llc": False}
    warning = pools.span_warning(facts, 4096, "server")
    assert warning is not None
    assert "spans 64 MiB" in warning and "260 MiB last-level cache" in warning
    assert "--max-memory 391M" in warning  # ceil((390 MiB + 4096) / MiB)


def test_no_warning_when_the_span_exceeds_the_cache_or_without_nocache():
    fits = pools.pool_facts(4096, True, 32 * MiB, limit=64 * MiB)
    assert fits["exceeds_llc"] and pools.span_warning(fits, 4096, "server") is None
    plain = pools.pool_facts(4096, False, 260 * MiB, limit=64 * MiB)
    assert plain == {"nocache": False} and pools.span_warning(plain, 4096, "server") is None


def test_unknown_cache_is_assumed_and_said_so():
    facts = pools.pool_facts(8, True, None)
    assert facts["llc_assumed"] and facts["llc_bytes"] is None and facts["exceeds_llc"]

"""bench.rounds: the order Sluice and the peer take turns in, and a cell's rounds read as median (min–max)."""

from __future__ import annotations

import pytest
from bench import rounds
from bench.rounds import WITHIN, Spread


def test_rounds_alternate_their_order_and_the_others_run_once_after() -> None:
    order = rounds.schedule(["sluice", "peer"], 5, once=["scrapy", "recipe"])

    clients = [client for _, client in order]
    assert clients[:10] == ["sluice", "peer", "peer", "sluice", "sluice", "peer", "peer", "sluice", "sluice", "peer"]
    assert clients[10:] == ["scrapy", "recipe"]
    assert [r for r, _ in order[:10]] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_each_client_takes_the_first_slot_as_often_as_the_other_over_an_even_count() -> None:
    order = rounds.schedule(["a", "b"], 4)

    firsts = [client for i, (_, client) in enumerate(order) if i % 2 == 0]
    assert firsts.count("a") == firsts.count("b") == 2


def test_spread_is_the_median_with_the_lowest_and_highest() -> None:
    figure = Spread.of([1.4, 1.1, 1.2, 1.9, 1.3])

    assert (figure.median, figure.low, figure.high) == (1.3, 1.1, 1.9)
    assert figure.text() == "1.30 (1.10–1.90)"
    assert Spread.of([2.0, 3.0]).median == 2.5
    assert Spread.of([140.2, 140.4]).text(0) == "140"
    with pytest.raises(ValueError, match="at least one"):
        Spread.of([])


def test_ranges_that_share_a_value_overlap_and_others_do_not() -> None:
    assert Spread(1.0, 0.9, 1.1).overlaps(Spread(1.2, 1.1, 1.3))
    assert not Spread(1.0, 0.9, 1.1).overlaps(Spread(1.2, 1.15, 1.3))


def test_compare_says_ahead_or_behind_by_the_medians_and_within_the_spread_when_ranges_overlap() -> None:
    low, high, wide = Spread(1.0, 0.9, 1.1), Spread(2.0, 1.9, 2.1), Spread(1.5, 0.8, 2.5)

    assert rounds.compare(low, high, lower_is_better=True) == "ahead"
    assert rounds.compare(high, low, lower_is_better=True) == "behind"
    assert rounds.compare(high, low, lower_is_better=False) == "ahead"
    assert rounds.compare(low, wide, lower_is_better=True) == WITHIN


def _run(cpu: float, pps: float, turn: int) -> rounds.Run:
    return {
        "client": "sluice",
        "concurrency": 32,
        "cpu_ms_per_page": cpu,
        "pages_per_s": pps,
        "ratio_limit": pps / 640,
        "peak_rss_mb": 80.0,
        "wall_s": 1000 / pps,
        "round": turn // 2,
        "turn": turn,
    }


def test_combine_keeps_the_median_run_and_every_round_in_the_order_they_ran() -> None:
    runs = [_run(1.3, 600, 0), _run(1.1, 620, 3), _run(1.6, 580, 4)]

    row = rounds.combine(runs)

    assert row["cpu_ms_per_page"] == 1.3
    assert [r["turn"] for r in row["rounds"]] == [0, 3, 4]
    assert row["cpu_ms_per_page_median"] == 1.3
    assert row["cpu_ms_per_page_spread"] == [1.1, 1.6]
    assert "failed_rounds" not in row


def test_combine_of_an_even_count_keeps_the_lower_middle_run_and_names_failed_rounds() -> None:
    runs = [_run(1.4, 600, 0), {"client": "sluice", "concurrency": 32, "error": "timed out"}, _run(1.2, 610, 2)]

    row = rounds.combine(runs)

    assert row["cpu_ms_per_page"] == 1.2
    assert row["cpu_ms_per_page_median"] == pytest.approx(1.3)
    assert row["failed_rounds"] == ["timed out"]
    assert rounds.combine([{"client": "peer", "error": "skipped"}]) == {"client": "peer", "error": "skipped"}


def test_an_older_rows_repeats_are_read_with_their_share_of_the_limit_worked_out() -> None:
    # A row of a file written before rounds: its repeats kept no share of the limit.
    row = {
        "client": "sluice",
        "concurrency": 8,
        "cpu_ms_per_page": 2.11,
        "pages_per_s": 148.36,
        "repeats": [
            {"pages_per_s": 148.52, "cpu_ms_per_page": 2.02, "peak_rss_mb": 79.4},
            {"pages_per_s": 148.36, "cpu_ms_per_page": 2.11, "peak_rss_mb": 79.4},
            {"pages_per_s": 147.94, "cpu_ms_per_page": 2.26, "peak_rss_mb": 79.3},
        ],
    }

    cpu = rounds.spread(row, "cpu_ms_per_page", 50.0)
    share = rounds.spread(row, "ratio_limit", 50.0)

    assert cpu == Spread(2.11, 2.02, 2.26)
    assert share is not None
    assert share.median == pytest.approx(148.36 / 160)  # 8 in flight at 50 ms: 160 pages/s
    assert rounds.spread({"client": "peer", "error": "timed out"}, "cpu_ms_per_page", 50.0) is None

"""Each ``process`` step on its own, and steps in sequence."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sluice.extraction.patterns import PatternError, compile_pattern
from sluice.extraction.processing import (
    FieldProcessor,
    _parse_number_general,
    _parse_price_general,
    parse_number,
    parse_price,
    process_value,
)
from sluice.spec import ExtractField, ProcessStep, RegexStep, ReplaceStep

BASE = "https://books.toscrape.com/catalogue/page-1.html"


def steps(*raw: Any) -> list[ProcessStep]:
    """Steps validated exactly as a spec validates them."""
    return ExtractField.model_validate({"selector": "p", "process": list(raw)}).process


@pytest.mark.parametrize(
    ("value", "raw_steps", "expected"),
    [
        ("  In stock \n", ["strip"], "In stock"),
        ("In STOCK", ["lower"], "in stock"),
        ("\n    In\n\n   stock (22\u00a0available)\n", ["collapse_whitespace"], "In stock (22 available)"),
        ("In stock (22 available)", ["number"], 22.0),
        ("In stock (22 available)", ["int"], 22),
        ("1,234.50", ["number"], 1234.5),
        ("-3", ["number"], -3.0),
        ("\u22122.5 \u00b0C", ["number"], -2.5),
        ("page-3", ["number"], 3.0),
        (".5 stars", ["number"], 0.5),
        ("3.9", ["int"], 3),
        ("no digits", ["number"], None),
        ("no digits", ["int"], None),
        ("star-rating Three", [{"regex": r"star-rating (\w+)"}], "Three"),
        ("star-rating Three", [{"regex": r"\w+$"}], "Three"),
        ("star-rating", [{"regex": r"star-rating (\w+)"}], None),
        ("£51.77", [{"replace": ["£", "GBP "]}], "GBP 51.77"),
        ("£51.77", [{"replace": ["", "x"]}], "£51.77"),
        ("../../../a-light_1000/index.html", ["absolute_url"], "https://books.toscrape.com/a-light_1000/index.html"),
        ("javascript:void(0)", ["absolute_url"], None),
        ("  In stock (22 available) ", ["strip", "lower", {"regex": r"\((\d+)"}, "int"], 22),
        ("Price: £1,299.00", ["price", "int"], 1299),
        ("", ["strip"], ""),
    ],
)
def test_steps(value: str, raw_steps: list[Any], expected: Any) -> None:
    assert process_value(value, steps(*raw_steps), BASE) == expected


@pytest.mark.parametrize(
    ("text", "price"),
    [
        ("£51.77", 51.77),
        ("$1,299.00", 1299.0),
        ("1.299,00 €", 1299.0),
        ("1 299,00 €", 1299.0),
        ("1\u00a0299,00\u00a0€", 1299.0),
        ("CHF 1'299.50", 1299.5),
        ("€12,50", 12.5),
        ("£1,299", 1299.0),
        ("1.299 €", 1299.0),
        ("$0.299", 0.299),
        ("£12,345,678.90", 12345678.9),
        ("Â£51.77", 51.77),
        ("  £ 7  ", 7.0),
        ("£thirty", None),
        ("", None),
    ],
)
def test_price(text: str, price: float | None) -> None:
    assert parse_price(text) == price
    assert process_value(text, steps("strip", "price")) == price


@pytest.mark.parametrize(("text", "number"), [("1,234.50", 1234.5), ("-3", -3.0), ("x", None), ("1,23", 1.0)])
def test_parse_number(text: str, number: float | None) -> None:
    assert parse_number(text) == number


def test_none_stops_the_pipeline() -> None:
    # Without the stop, the replace step would turn the missing value into the string "None".
    pipeline = FieldProcessor([RegexStep(regex=r"(\d+)"), ReplaceStep(replace=("1", "2"))])
    assert pipeline("none here") is None
    assert pipeline("a 1 b") == "2"


def test_string_steps_accept_numbers() -> None:
    assert process_value("£5.00", steps("price", "strip")) == "5.0"


def test_regexes_compiled_once() -> None:
    pattern = r"only-(\d+)-once"
    compile_pattern.cache_clear()
    pipelines = [FieldProcessor(steps({"regex": pattern})) for _ in range(5)]
    assert [p("only-7-once") for p in pipelines] == ["7"] * 5
    assert compile_pattern.cache_info().misses == 1


@pytest.mark.timeout(20)
@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|a)*$", r"(a|aa)+$", r"(\w+\s?)*$", r"(.*a){20}$"])
def test_patterns_that_backtrack_exponentially_run_in_linear_time(pattern: str) -> None:
    """Each extra "a" doubles a backtracking engine's time; at 5,000 it would never end (the timeout)."""
    hostile = "a" * 5_000 + "!"
    assert process_value(hostile, steps({"regex": pattern})) in (None, "")
    assert process_value("a" * 5_000, steps({"regex": pattern})) is not None


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"(a)\1", "backreferences, lookahead and lookbehind are not supported"),
        (r"price(?= EUR)", "backreferences, lookahead and lookbehind are not supported"),
        (r"(?<!\w)\d+", "backreferences, lookahead and lookbehind are not supported"),
        ("(unclosed", "is not a valid regular expression"),
        ("a" * 1_001, "a pattern has at most 1000 characters"),
    ],
)
def test_patterns_linear_matching_cannot_run_are_refused_saying_why(pattern: str, says: str) -> None:
    with pytest.raises(PatternError, match=says):
        compile_pattern(pattern)


FAST_PATH_CASES = [
    "£51.77",
    "Â£51.77",
    "51.77 €",
    "$0.299",
    "1.299",
    "1.2999",
    "12.3",
    "1234",
    "0",
    "007",
    "1.",
    ".5",
    "1.2.3",
    "-3",
    "+3",
    "£-3",
    "\u0663",
    "\u00b2",
    "1_000",
    "1e5",
    "inf",
    "nan",
    " \t12.50\u00a0",
    "1 299",
    "12,5",
    "£",
    "",
]


@pytest.mark.parametrize("text", FAST_PATH_CASES)
def test_fast_paths_agree_with_the_general_parsers(text: str) -> None:
    assert repr(parse_price(text)) == repr(_parse_price_general(text))
    assert repr(parse_number(text)) == repr(_parse_number_general(text))


def test_fast_paths_agree_on_random_text() -> None:
    rng = random.Random(1234)
    alphabet = "0123456789....,,  £$€Â-+\u00a0\u0663e_x"
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        assert repr(parse_price(text)) == repr(_parse_price_general(text)), text
        assert repr(parse_number(text)) == repr(_parse_number_general(text)), text
    edges = ["", " ", "£", "$", "€ ", "Â£", "\u00a0", "-", "x", ","]
    for _ in range(20000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 6)))
        decimals = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 5)))
        text = rng.choice(edges) + digits + rng.choice(["", ".", ","]) + decimals + rng.choice(edges)
        assert repr(parse_price(text)) == repr(_parse_price_general(text)), text
        assert repr(parse_number(text)) == repr(_parse_number_general(text)), text


def test_a_remembered_value_is_the_steps_value_however_often_it_recurs() -> None:
    processor = FieldProcessor(steps({"regex": r"star-rating (\w+)"}))
    words = [f"w{n}" for n in range(3_000)]  # more distinct values than the memo keeps: it starts over
    texts = [f"star-rating {word}" for word in words] * 2 + ["no rating", "x" * 300 + " star-rating Long"] * 2
    expected = [*words, *words, None, "Long", None, "Long"]
    assert [processor(text) for text in texts] == expected


def test_absolute_url_resolves_against_each_pages_base_never_a_remembered_one() -> None:
    processor = FieldProcessor(steps("strip", "absolute_url", {"regex": r"/catalogue/(.*)"}))
    assert processor(" a/b.html ", "https://x.example/catalogue/page-1.html") == "a/b.html"
    assert processor(" a/b.html ", "https://x.example/catalogue/cat/page-1.html") == "cat/a/b.html"


def test_steps_on_numbers_and_text_alike_are_remembered_apart() -> None:
    processor = FieldProcessor(steps("price"))
    values = [processor("£1.299"), processor(1.299), processor("£1.299"), processor("1,299.00")]
    assert values == [1299.0, 1.299, 1299.0, 1299.0]

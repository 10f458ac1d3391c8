"""A YAML spec read with libyaml's parser gives what PyYAML's Python parser gives: the same model, the same errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.spec import CrawlSpec, SpecError, load_spec, parse_spec, yamlfile
from sluice.spec.yamlfile import read_yaml

CRAWLS = Path(__file__).resolve().parents[2] / "crawls"
SEEDS = 1_200

pytestmark = pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML without libyaml")


def _seeded() -> str:
    seeds = "".join(f"  - https://books.example/catalogue/page-{n}.html\n" for n in range(SEEDS))
    return (
        "name: books\n"
        "seeds:\n" + seeds + "extract:\n"
        "  item: article.product_pod\n"
        "  fields:\n"
        "    title: &sel h3 a::attr(title)\n"
        "    again: *sel\n"
        "    price: {selector: p.price_color, process: [{regex: '[0-9.]+'}]}\n"
        "politeness: {concurrency: 8, min_delay_seconds: 0.5}\n"
    )


DOCUMENTS = {
    "seeded": _seeded(),
    "anchors": "name: books\nseeds: &s [https://a.example/]\npoliteness: &p {concurrency: 4}\n"
    "extract: {fields: {t: &h h1, u: *h}}\n",
    "merge-key": "name: books\nseeds: [https://a.example/]\nextract: &e {fields: {t: h1}}\nx: {<<: *e}\n",
    "duplicates": "name: books\nname: other\nseeds: [ftp://x]\nextract: {fields: {t: h1, t: h2}}\n",
    "unclosed": "name: [unclosed\n",
    "tab": "name: books\n\tseeds: []\n",
    "bad-indent": "name: books\n  seeds: x\n seeds: y\n",
    "unknown-alias": "name: *nowhere\n",
    "two-documents": "name: a\n---\nname: b\n",
    "empty": "",
    "scalar": "just text\n",
    "types": "name: books\nseeds: [https://a.example/]\nextract: {fields: {t: h1}}\n"
    "schedule: 0x1F\nn: 1_000\nd: 2001-12-14\n",
    "deep-flow": "name: g\nseeds: [http://a.example/]\ntypes: " + "[" * 5_000 + "]" * 5_000 + "\n",
    "deep-block": "name: g\ntypes:\n" + "".join(" " * i + "-\n" for i in range(1, 100)),
    "deep-and-broken": "name: g\ntypes: " + "[" * 40 + "\n: : ]]\n",
}


VALID = {"seeded", "anchors"}


def _outcome(path: Path, fast: bool) -> tuple[str, Any]:
    """What reading and validating gives: ("spec", the model) or ("error", every line of the SpecError)."""
    try:
        data, duplicates = read_yaml(path, path.read_text(encoding="utf-8"), fast=fast)
        spec: CrawlSpec = parse_spec(data, str(path), also=duplicates)
    except SpecError as exc:
        return "error", exc.errors
    return "spec", spec.model_dump()


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_libyaml_and_the_python_parser_give_the_same_model_or_the_same_errors(tmp_path: Path, name: str) -> None:
    path = tmp_path / "books.yaml"
    path.write_text(DOCUMENTS[name], encoding="utf-8")
    fast = _outcome(path, fast=True)
    assert fast == _outcome(path, fast=False)
    assert fast[0] == ("spec" if name in VALID else "error")


@pytest.mark.parametrize("path", sorted(CRAWLS.glob("*.yaml")), ids=lambda p: p.name)
def test_the_shipped_specs_read_the_same_with_either_parser(path: Path) -> None:
    assert _outcome(path, fast=True) == _outcome(path, fast=False)


def test_the_errors_named_are_the_python_parsers_whichever_reads_first(tmp_path: Path) -> None:
    path = tmp_path / "books.yaml"
    path.write_text(DOCUMENTS["duplicates"], encoding="utf-8")
    kind, errors = _outcome(path, fast=True)
    assert kind == "error"
    assert errors[:2] == [
        "(file): line 2 column 1: key 'name' appears twice in one mapping",
        "(file): line 4 column 27: key 't' appears twice in one mapping",
    ]
    path.write_text(DOCUMENTS["unclosed"], encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    # PyYAML's wording (libyaml's own would be "did not find expected ',' or ']'")
    assert caught.value.errors == [
        "(file): not valid YAML: line 2 column 1: expected ',' or ']', but got '<stream end>'"
    ]


def test_a_spec_is_parsed_by_libyaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded spec's events come from the C parser: PyYAML's Python parser is never asked for one."""
    path = tmp_path / "books.yaml"
    path.write_text(DOCUMENTS["seeded"], encoding="utf-8")
    python_events = 0
    parse_event = yaml.parser.Parser.parse_node

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal python_events
        python_events += 1
        return parse_event(self, *args, **kwargs)

    monkeypatch.setattr(yaml.parser.Parser, "parse_node", counted)
    spec = load_spec(path)
    assert spec.seeds.count() == SEEDS
    assert python_events == 0
    assert yamlfile._CLoader is not None
    read_yaml(path, DOCUMENTS["seeded"], fast=False)
    assert python_events > SEEDS  # the count sees the Python parser when it runs

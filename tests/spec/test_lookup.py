"""One spec-file lookup: the scheduler, the CLI, the report and the CDK app find a crawl's spec the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.pipeline.services import UnknownCrawl, load_crawl
from sluice.spec import SpecError, find_spec, spec_files

SPEC = "name: {name}\nseeds: [https://example.com/]\nextract: {{fields: {{title: {{selector: h1}}}}}}\n"


def test_a_crawl_is_found_as_yaml_then_yml_then_json(tmp_path: Path) -> None:
    (tmp_path / "books.json").write_text('{"name": "books", "seeds": ["https://example.com/"]}')
    assert find_spec(tmp_path, "books") == tmp_path / "books.json"
    (tmp_path / "books.yml").write_text(SPEC.format(name="books"))
    assert find_spec(tmp_path, "books") == tmp_path / "books.yml"
    (tmp_path / "books.yaml").write_text(SPEC.format(name="books"))
    assert find_spec(tmp_path, "books") == tmp_path / "books.yaml"
    assert find_spec(tmp_path, "films") is None


def test_spec_files_lists_only_spec_suffixes_sorted(tmp_path: Path) -> None:
    for name in ("b.yml", "a.yaml", "c.json", "notes.txt", "d.yaml.bak"):
        (tmp_path / name).write_text("x")
    (tmp_path / "e.yaml").mkdir()
    assert [p.name for p in spec_files(tmp_path)] == ["a.yaml", "b.yml", "c.json"]
    assert spec_files(tmp_path / "absent") == []


def test_the_deployed_lookup_names_the_known_crawls_and_refuses_a_misnamed_spec(tmp_path: Path) -> None:
    (tmp_path / "books.yaml").write_text(SPEC.format(name="books"))
    (tmp_path / "films.yml").write_text(SPEC.format(name="movies"))
    assert load_crawl(tmp_path, "books").name == "books"
    with pytest.raises(UnknownCrawl, match=r"known: books, films"):
        load_crawl(tmp_path, "music")
    with pytest.raises(SpecError, match="must match the file name 'films'"):
        load_crawl(tmp_path, "films")

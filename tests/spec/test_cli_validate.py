"""`sluice validate`: one line per good spec saying what it will do, every error of a bad one by field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice_tools.cli import main

SPEC: dict[str, Any] = {
    "name": "books",
    "seeds": ["https://books.example/catalogue/page-1.html"],
    "follow": {"selectors": ["li.next a"]},
    "extract": {"item": "article.product_pod", "fields": {"title": "h3 a::attr(title)"}},
}


def write(tmp_path: Path, data: dict[str, object], name: str = "books") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("follow", "reach"),
    [
        ({"selectors": ["li.next a"]}, "follows links at any depth, up to 10000 pages"),
        ({"selectors": ["li.next a"], "max_depth": 1, "max_pages": 50}, "follows links 1 hop(s) from a seed, up to 50"),
        ({}, "follows no links"),
    ],
)
def test_a_good_spec_gets_one_line_saying_how_far_it_will_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], follow: dict[str, object], reach: str
) -> None:
    path = write(tmp_path, {**SPEC, "follow": follow})
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok: {path} (crawl 'books', 1 seed(s), {reach}")


def test_a_spec_with_adaptive_recrawl_says_how_often_a_page_is_asked_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, {**SPEC, "recrawl": {"max_age_days": 14}})
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.endswith("schedule none, each page asked again every 1 to 14 day(s))\n")
    path = write(tmp_path, SPEC)
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.endswith("schedule none)\n")


def test_a_bad_spec_names_every_bad_field_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = {**SPEC, "seeds": ["https://user:pw@books.example/"], "follow": {"max_pages": 0, "allow": [r"(a)\1"]}}
    assert main(["validate", str(write(tmp_path, bad))]) == 1
    err = capsys.readouterr().err
    fields = {line.strip().split(":")[0] for line in err.splitlines()[1:]}
    assert fields == {"seeds.urls.0", "follow.max_pages", "follow.allow.0"}


def test_a_spec_named_apart_from_its_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(write(tmp_path, SPEC, name="other"))]) == 1
    assert "must match the file name 'other'" in capsys.readouterr().err


def test_a_bad_spec_named_apart_from_its_file_gets_both_errors_in_one_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file-name check is said with the field errors, not only once they are fixed (a new user fixed the
    fields, ran validate again, and only then learned the name was wrong too)."""
    bad = {**SPEC, "follow": {"max_pages": 0}}
    assert main(["validate", str(write(tmp_path, bad, name="other"))]) == 1
    err = capsys.readouterr().err
    assert "follow.max_pages" in err
    assert "must match the file name 'other'" in err


def test_a_spec_file_over_its_size_cap_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, SPEC)
    path.write_text(path.read_text(encoding="utf-8") + "#" * (1024 * 1024), encoding="utf-8")
    assert main(["validate", str(path)]) == 1
    assert (
        "bytes is more than the 1,048,576 a spec may have; put long seed lists in a seed file"
        in capsys.readouterr().err
    )


def with_seed_file(tmp_path: Path, lines: list[str], **follow: object) -> Path:
    (tmp_path / "books-seeds.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    seeds = {"urls": SPEC["seeds"], "file": "books-seeds.txt"}
    return write(tmp_path, {**SPEC, "seeds": seeds, "follow": {"allowed_domains": ["books.example"], **follow}})


def test_a_seed_file_beside_the_spec_is_read_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["# the catalogue", *(f"https://books.example/item/{n}" for n in range(2_000)), ""]
    assert main(["validate", str(with_seed_file(tmp_path, lines))]) == 0
    assert "2001 seed(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("lines", "follow", "says"),
    [
        (["https://books.example/a", "ftp://books.example/b"], {}, "seeds.file books-seeds.txt line 2: 'ftp://"),
        ([f"https://books.example/{n}" for n in range(20)], {"max_pages": 10}, "is more than follow.max_pages (10)"),
    ],
)
def test_a_bad_seed_file_is_named_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], follow: dict[str, object], says: str
) -> None:
    assert main(["validate", str(with_seed_file(tmp_path, lines, **follow))]) == 1
    assert says in capsys.readouterr().err


def test_a_missing_seed_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = with_seed_file(tmp_path, [])
    (tmp_path / "books-seeds.txt").unlink()
    assert main(["validate", str(path)]) == 1
    assert "seeds.file books-seeds.txt: no such file beside the spec" in capsys.readouterr().err


def test_a_sitemap_spec_says_its_seeds_come_from_sitemaps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sitemaps = {"urls": ["https://books.example/s.xml"], "from_robots": True}
    seeds = {"urls": ["https://books.example/"], "sitemaps": sitemaps}
    assert main(["validate", str(write(tmp_path, {**SPEC, "seeds": seeds}))]) == 0
    out = capsys.readouterr().out
    assert "1 seed(s) + the pages of 1 sitemap(s) and the sitemaps of the seeds' robots.txt" in out


def test_a_typed_spec_says_its_types_and_that_their_rules_follow_links(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = Path(__file__).resolve().parents[2] / "crawls" / "demo-types.yaml"
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "follows links 1 hop(s) from a seed, up to 2000 pages" in out
    assert "10 field(s) in 2 page types: listing (4), book (8)" in out


def test_a_seed_file_of_many_bad_lines_names_the_first_twenty_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """main named only the first bad line."""
    lines = ["https://books.example/ok"] + [f"ftp://books.example/{n}" for n in range(25)]
    assert main(["validate", str(with_seed_file(tmp_path, lines))]) == 1
    err = capsys.readouterr().err
    named = [line for line in err.splitlines() if "seeds.file books-seeds.txt line " in line]
    assert len(named) == 20
    assert named[0].strip().startswith("seeds.file books-seeds.txt line 2: 'ftp://books.example/0'")
    assert named[-1].strip().startswith("seeds.file books-seeds.txt line 21: ")
    assert "and 5 more bad line(s)" in err


def test_a_type_an_earlier_type_always_takes_is_warned_of(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """main said nothing: the later type's extract never ran, its records_nonzero check failed every night."""
    fields = {"extract": {"fields": {"title": "h1"}}}
    types = {
        "any": {"pages": "/catalogue/", **fields},  # the spec is written with its keys sorted: "any" comes first
        "book": {"pages": "/catalogue/", "via": ["books"], **fields},  # "any" takes every page it could
        "listing": {"pages": "/list/", **fields, "follow": {"books": {"selectors": ["a"]}}},
    }
    spec = {k: v for k, v in SPEC.items() if k != "extract"} | {"types": types}
    assert main(["validate", str(write(tmp_path, spec))]) == 0
    out = capsys.readouterr().out
    assert "warning: types.book can never match: types.any, earlier in the spec, takes every page it could" in out
    assert "types.listing can never" not in out
    types["book"]["pages"] = "/catalogue/books/"  # a pattern of its own: it may match where page does not... and
    assert main(["validate", str(write(tmp_path, spec))]) == 0
    assert "warning" not in capsys.readouterr().out  # ...validate does not guess at patterns

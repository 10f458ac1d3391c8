"""`sluice parse` and the shell's helpers: one page of the demo site against a spec, through the real fetcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from sluice.extraction.charset import parser_input
from sluice.extraction.extract import extract_page
from sluice.spec import load_spec
from sluice_tools.authoring.page import Page
from sluice_tools.authoring.shell import PageHelpers
from sluice_tools.authoring.trace import trace_page
from sluice_tools.demosite import RunningDemoSite

from .conftest import ROOT, Cli, LocalCrawls

TYPES_SPEC = ROOT / "crawls" / "demo-types.yaml"
MEMBERS_SPEC = ROOT / "crawls" / "demo-members.yaml"


def _spec_at(tmp_path: Path, source: Path, site: RunningDemoSite) -> Path:
    path = tmp_path / source.name
    path.write_text(source.read_text(encoding="utf-8").replace("http://127.0.0.1:8710", site.base_url))
    return path


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_parse_listing_names_its_type_twenty_items_and_the_book_links_with_carried_data(
    tmp_path: Path, site: RunningDemoSite, sluice: Cli
) -> None:
    spec = _spec_at(tmp_path, TYPES_SPEC, site)
    listing = f"{site.base_url}/catalogue/page-1.html"
    out = sluice.json("parse", str(spec), listing, "--allow-loopback", "--json")
    assert out["page"]["source"] == "site"
    assert out["page"]["robots"] == "allowed"
    assert out["type"]["name"] == "listing"
    assert out["type"]["reasons"] == ["listing: URL matches types.listing.pages '/catalogue/page-\\d+\\.html$'"]
    assert len(out["items"]) == 20
    assert len(out["records"]) == 20
    first = out["items"][0]
    assert first["kept"] is True
    assert first["key"] == f"{site.base_url}/catalogue/lost-library-1_1/index.html"
    price = next(f for f in first["fields"] if f["name"] == "price")
    assert price["raw"] == "£34.33"
    assert price["steps"] == [[{"step": "strip", "value": "£34.33"}, {"step": "price", "value": 34.33}]]
    assert price["value"] == 34.33
    books = [link for link in out["links"] if link["rule"] == "books"]
    assert len(books) == 20
    assert all(link["followed"] and link["robots"] == "allowed" for link in books)
    assert books[0]["url"] == f"{site.base_url}/catalogue/lost-library-1_1/index.html"
    assert {json.dumps(link["carry"]) for link in books} == {json.dumps({"found_on": listing})}


def test_parse_shows_the_same_records_and_links_the_pipelines_extraction_gives(
    tmp_path: Path, site: RunningDemoSite, sluice: Cli
) -> None:
    spec_path = _spec_at(tmp_path, TYPES_SPEC, site)
    url = f"{site.base_url}/catalogue/page-2.html"
    out = sluice.json("parse", str(spec_path), url, "--allow-loopback", "--json")
    answer = httpx.get(url)
    extraction = extract_page(load_spec(spec_path), url, parser_input(answer.content, answer.headers["content-type"]))
    assert [r["_key"] for r in out["records"]] == [r.key for r in extraction.records]
    assert [{k: v for k, v in r.items() if not k.startswith("_")} for r in out["records"]] == [
        r.data for r in extraction.records
    ]
    assert [link["url"] for link in out["links"] if link["followed"]] == extraction.links


def test_a_book_page_is_a_book_by_the_rule_that_led_there(tmp_path: Path, site: RunningDemoSite, sluice: Cli) -> None:
    spec = _spec_at(tmp_path, TYPES_SPEC, site)
    book = f"{site.base_url}/catalogue/lost-library-1_1/index.html"
    code, out, err = sluice("parse", str(spec), book, "--via", "books", "--allow-loopback")
    assert code == 0, err
    assert "type    book\n" in out
    assert "book: reached by rule 'books', one of types.book.via ['books']" in out
    assert "listing: URL does not match types.listing.pages" in out
    assert "key " + book in out
    as_seed = sluice.json("parse", str(spec), book, "--allow-loopback", "--json")
    assert as_seed["type"]["name"] is None
    assert as_seed["records"] == []
    forced = sluice.json("parse", str(spec), book, "--type", "book", "--allow-loopback", "--json")
    assert forced["records"][0]["upc"] == forced["items"][0]["fields"][2]["value"]
    assert forced["type"]["reasons"] == ["--type book (the URL and the rule that led here are not asked)"]


CARDS = """<html><body>
<div class="card"><h2>One</h2><span class="price">£1.50</span><a href="/a.html">a</a></div>
<div class="card"><h2>Two</h2><a href="https://elsewhere.example/b.html">b</a></div>
<div class="card"><h2>Three</h2><span class="price">£3</span><a href="/skip/c.html">c</a>
<a href="mailto:x@example.com">mail</a><a href="/a.html">again</a></div>
</body></html>"""

CARDS_SPEC = """
name: cards
seeds: ["http://127.0.0.1:1/cards.html"]
follow:
  selectors: ["div.card a"]
  deny: ['/skip/']
  max_depth: 2
extract:
  item: div.card
  fields:
    title: "h2::text"
    price:
      selector: "span.price::text"
      process: [strip, price]
      required: true
  key: [title]
"""


def test_a_required_field_missing_drops_the_item_and_says_which(tmp_path: Path, sluice: Cli) -> None:
    spec = _write(tmp_path, "cards.yaml", CARDS_SPEC)
    page = _write(tmp_path, "cards.html", CARDS)
    out = sluice.json("parse", str(spec), str(page), "--json")
    assert out["page"]["source"] == f"file {page}"
    assert out["page"]["url"] == "http://127.0.0.1:1/cards.html"
    assert [(i["kept"], i["dropped_by"], i["key"]) for i in out["items"]] == [
        (True, [], "One"),
        (False, ["price"], None),
        (True, [], "Three"),
    ]
    assert [r["price"] for r in out["records"]] == [1.5, 3.0]
    code, text, _ = sluice("parse", str(spec), str(page))
    assert code == 0
    assert "#1 dropped: required price missing" in text


def test_each_link_is_marked_in_or_out_of_scope_with_the_reason(tmp_path: Path, sluice: Cli) -> None:
    spec = _write(tmp_path, "cards.yaml", CARDS_SPEC)
    page = _write(tmp_path, "cards.html", CARDS)
    out = sluice.json("parse", str(spec), str(page), "--json")
    assert [(link["href"], link["followed"], link["reason"]) for link in out["links"]] == [
        ("/a.html", True, None),
        ("https://elsewhere.example/b.html", False, "host 'elsewhere.example' is not in the allowed domains"),
        ("/skip/c.html", False, "matches follow.deny '/skip/'"),
        ("mailto:x@example.com", False, "not an http(s) link"),
    ]
    deep = sluice.json("parse", str(spec), str(page), "--depth", "2", "--json")
    assert deep["links"][0]["in_scope"] is True
    assert deep["links"][0]["reason"] == "the page is at follow.max_depth (2): its links are not followed"


def test_robots_answer_is_shown_and_obeyed_unless_ignored_for_the_one_page(
    tmp_path: Path, site: RunningDemoSite, sluice: Cli
) -> None:
    spec = _write(
        tmp_path,
        "footer.yaml",
        f'name: footer\nseeds: ["{site.base_url}/catalogue/page-1.html"]\n'
        'follow: {selectors: ["footer a"]}\nextract: {fields: {title: "h1::text"}}\n',
    )
    private = f"{site.base_url}/private/staff.html"
    code, _, err = sluice("parse", str(spec), private, "--allow-loopback")
    assert code == 1
    assert err.strip() == f"sluice parse: {private}: skipped: robots.txt disallows"
    out = sluice.json("parse", str(spec), private, "--allow-loopback", "--ignore-robots", "--json")
    assert out["page"]["robots"] == "disallows (not obeyed for this page: --ignore-robots)"
    assert out["records"][0]["title"] == "Staff only"
    listing = sluice.json("parse", str(spec), f"{site.base_url}/catalogue/page-1.html", "--allow-loopback", "--json")
    staff = next(link for link in listing["links"] if link["url"] == private)
    assert staff["in_scope"] is True
    assert staff["robots"] == "disallows"
    assert staff["followed"] is False


def test_the_nesting_limit_says_why_a_page_is_refused(tmp_path: Path, site: RunningDemoSite, sluice: Cli) -> None:
    spec = _write(
        tmp_path,
        "deep.yaml",
        f'name: deep\nseeds: ["{site.base_url}/"]\nextract: {{fields: {{title: "a::text"}}}}\n',
    )
    out = sluice.json("parse", str(spec), f"{site.base_url}/_test/deep?depth=5000", "--allow-loopback", "--json")
    assert out["limits"]["refused"] == (
        "HTML nests more than 1024 elements deep: not parsed (parse time grows with depth)"
    )
    assert out["limits"]["nesting"] == 1025
    assert out["records"] == []
    shallow = sluice.json("parse", str(spec), f"{site.base_url}/_test/deep?depth=10", "--allow-loopback", "--json")
    assert shallow["limits"]["refused"] is None
    assert shallow["records"][0]["title"] == "in"


def test_spec_errors_are_named_by_their_path_as_validate_names_them(tmp_path: Path, sluice: Cli) -> None:
    broken = _write(  # named after its crawl: validate also names a file-name mismatch, which parse need not
        tmp_path, "cards.yaml", CARDS_SPEC.replace("required: true", "required: maybe").replace("h2::text", "h2::txt")
    )
    page = _write(tmp_path, "cards.html", CARDS)
    code, out, err = sluice("parse", str(broken), str(page))
    assert (code, out) == (2, "")
    validate_code, _, validate_err = sluice("validate", str(broken))
    assert validate_code == 1
    assert err == validate_err
    assert "extract.fields.price.required" in err
    assert "extract.fields.title" in err


def test_arguments_naming_no_type_no_rule_or_no_page_are_refused_by_name(tmp_path: Path, sluice: Cli) -> None:
    spec = _write(tmp_path, "cards.yaml", CARDS_SPEC)
    page = _write(tmp_path, "cards.html", CARDS)
    assert sluice("parse", str(spec), str(page), "--type", "book")[2].strip() == (
        "sluice parse: --type book: cards has one page type (extract), not types"
    )
    assert sluice("parse", str(TYPES_SPEC), str(page), "--type", "nope")[2].strip() == (
        "sluice parse: --type nope: not a page type of demo-types (types: listing, book)"
    )
    assert sluice("parse", str(TYPES_SPEC), str(page), "--via", "pager")[2].strip() == (
        "sluice parse: --via pager: no type's follow rules name it (rules: books)"
    )
    assert sluice("parse", str(spec), "no-such-file.html")[2].strip() == (
        "sluice parse: no-such-file.html: not an http(s) URL, a file, or RUN:URL"
    )


def test_the_request_sections_secrets_are_read_and_sent(
    tmp_path: Path, site: RunningDemoSite, sluice: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec_at(tmp_path, MEMBERS_SPEC, site)
    members = f"{site.base_url}/members/catalogue/page-1.html"
    code, _, err = sluice("parse", str(spec), members, "--allow-loopback")
    assert code == 2
    assert "secret 'demo/session' unavailable: the environment variable SLUICE_SECRET_DEMO_SESSION" in err
    for line in MEMBERS_SPEC.read_text(encoding="utf-8").splitlines():
        if line.startswith("#   export "):
            name, _, value = line.removeprefix("#   export ").partition("=")
            monkeypatch.setenv(name, value)
    out = sluice.json("parse", str(spec), members, "--allow-loopback", "--json")
    assert out["page"]["status"] == 200
    assert len(out["records"]) == 20


def test_a_page_from_a_runs_archive_comes_with_its_rule_and_records(local: LocalCrawls, site: RunningDemoSite) -> None:
    local.shrink(1)
    result = local.run()
    run_id = result["run_id"]
    spec = local.specs / "demo-books.yaml"
    url = f"{site.base_url}/catalogue/page-1.html"
    out = local.sluice.json("parse", str(spec), f"{run_id}:{url}", "--state", str(local.state), "--json")
    assert out["page"]["source"] == f"archive of run {run_id}"
    assert len(out["records"]) == 20
    folder = next((local.state / "objects" / "runs").rglob(f"run={run_id}/records"))
    written = [json.loads(line) for part in sorted(folder.glob("*.jsonl")) for line in part.read_text().splitlines()]
    assert out["records"] == [r for r in written if r["_page"] == url]
    nowhere = f"{run_id}:{site.base_url}/nowhere.html"
    code, _, err = local.sluice("parse", str(spec), nowhere, "--state", str(local.state))
    assert code == 1
    assert f"run {run_id} has no page {site.base_url}/nowhere.html" in err


def _helpers(tmp_path: Path) -> PageHelpers:
    spec = load_spec(_write(tmp_path, "cards.yaml", CARDS_SPEC))
    url = "http://127.0.0.1:1/cards.html"
    page = Page(url, url, 200, "text/html", CARDS.encode(), "file cards.html")
    return PageHelpers(spec, page, trace_page(spec, url, CARDS))


def test_shell_helpers_run_selectors_fields_and_rules_over_the_page(tmp_path: Path) -> None:
    helpers = _helpers(tmp_path)
    assert helpers.css("h2::text") == ["One", "Two", "Three"]
    assert helpers.css("div.card a::attr(href)")[:2] == ["/a.html", "https://elsewhere.example/b.html"]
    assert [f.value for f in helpers.field("price")] == [1.5, None, 3.0]
    assert [link.url for link in helpers.links("follow.selectors") if link.followed] == ["http://127.0.0.1:1/a.html"]
    with pytest.raises(KeyError, match="'nope' is not a field of this page's type"):
        helpers.field("nope")
    namespace: dict[str, Any] = helpers.namespace()
    assert set(namespace) == {"spec", "page", "trace", "css", "field", "links"}


def test_a_broken_json_ld_block_is_named_beside_the_field_it_leaves_missing(tmp_path: Path, sluice: Cli) -> None:
    spec = _write(
        tmp_path,
        "shop.yaml",
        "name: shop\nseeds: ['http://127.0.0.1:1/p.html']\nextract:\n  fields:\n    title: 'h1::text'\n"
        "    price: {structured: jsonld, type: Product, path: offers.price, process: [price]}\n",
    )
    page = _write(
        tmp_path,
        "p.html",
        '<html><head><script type="application/ld+json">{"@type": "Product", "offers": {"price": 3,}}</script>'
        "</head><body><h1>Lamp</h1></body></html>",
    )
    out = sluice.json("parse", str(spec), str(page), "--json")
    price = out["items"][0]["fields"][1]
    assert price["selector"] == "jsonld offers.price of @type Product"
    assert (price["raw"], price["value"], price["missing"]) == (None, None, True)
    assert price["problems"] == [
        "block 0: not JSON (line 1 column 44: Expecting property name enclosed in double quotes)"
    ]
    assert out["records"] == [
        {"_key": "http://127.0.0.1:1/p.html#0", "_page": "http://127.0.0.1:1/p.html", "title": "Lamp", "price": None}
    ]
    code, text, _ = sluice("parse", str(spec), str(page))
    assert code == 0
    assert "      left out: block 0: not JSON (line 1 column 44" in text


def test_the_shell_is_a_python_prompt_with_the_page_and_its_helpers(tmp_path: Path) -> None:
    spec = _write(tmp_path, "cards.yaml", CARDS_SPEC)
    page = _write(tmp_path, "cards.html", CARDS)
    typed = "print(css('h2::text'))\nprint([f.value for f in field('price')])\nprint(len(links()))\n"
    shell = subprocess.run(  # noqa: S603 - the project's own CLI, with the test's files
        [sys.executable, "-m", "sluice_tools.cli", "shell", str(spec), str(page)],
        input=typed,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions", "tools"))},
    )
    assert shell.returncode == 0, shell.stderr
    printed = [line.removeprefix(">>> ") for line in shell.stdout.splitlines()]  # the prompt goes to stdout too
    assert printed == ["['One', 'Two', 'Three']", "[1.5, None, 3.0]", "4", ""]
    assert "helpers: css(selector), field(name), links(rule); page, trace, spec" in shell.stderr


def test_parse_of_a_loopback_page_without_allow_loopback_says_the_flag_it_needs(
    tmp_path: Path, site: RunningDemoSite, sluice: Cli
) -> None:
    spec = _spec_at(tmp_path, TYPES_SPEC, site)
    code, out, err = sluice("parse", str(spec), f"{site.base_url}/catalogue/page-1.html")
    assert code != 0
    said = out + err
    assert "loopback" in said
    assert "(targets on 127.0.0.0/8 need --allow-loopback)" in said


def test_a_page_extract_pages_does_not_match_says_it_gives_links_only(tmp_path: Path, sluice: Cli) -> None:
    """A page whose URL extract.pages does not match was shown as "items 0 (the page is one item)"."""
    spec = _write(
        tmp_path, "cards.yaml", CARDS_SPEC.replace("  item: div.card\n", "  item: div.card\n  pages: '/books/'\n")
    )
    page = _write(tmp_path, "cards.html", CARDS)
    code, text, err = sluice("parse", str(spec), str(page))
    assert code == 0, err
    (items,) = [line for line in text.splitlines() if line.startswith("items ")]
    assert items == (
        "items   none: the page matches no extract.pages pattern ('/books/'): in a run it gives no records, "
        "only its links (below) are followed"
    )
    assert "one item" not in text
    out = sluice.json("parse", str(spec), str(page), "--json")
    assert (out["items"], out["unextracted"]) == ([], "the page matches no extract.pages pattern ('/books/')")
    matched = sluice.json("parse", str(spec), str(page), "--url", "http://127.0.0.1:1/books/cards.html", "--json")
    assert (len(matched["items"]), matched["unextracted"]) == (3, None)

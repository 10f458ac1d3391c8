"""The crawl spec: what a valid spec gives, and that every kind of mistake is named by its path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice.spec import CrawlSpec, RegexStep, SpecError, load_spec, parse_spec
from sluice.spec.selectors import FieldSelector, parse_field_selector

CRAWLS = Path(__file__).resolve().parents[2] / "crawls"


SITEMAP = "https://b.example/sitemap.xml"


def minimal(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "books",
        "seeds": ["https://books.example/catalogue/page-1.html"],
        "extract": {"item": "article.product_pod", "fields": {"title": "h3 a::attr(title)"}},
    }
    spec.update(overrides)
    return spec


def errors_of(data: Any) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    return caught.value.errors


@pytest.mark.parametrize("path", sorted(CRAWLS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_specs_validate(path: Path) -> None:
    spec = load_spec(path)
    assert spec.name
    assert spec.seeds.count() >= 1
    assert all(extract.fields for extract in spec.extracts().values())


def test_books_spec_reads_the_catalogue_fields() -> None:
    spec = load_spec(CRAWLS / "books-toscrape.yaml")
    assert spec.domains() == frozenset({"books.toscrape.com"})
    assert spec.extract is not None
    assert spec.extract.fields["price"].selector == FieldSelector("p.price_color::text", "p.price_color", "text")
    assert spec.extract.fields["rating"].process == [RegexStep(regex=r"star-rating (\w+)")]
    assert spec.schedule == "cron(17 3 * * ? *)"


def test_json_spec_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "books.json"
    path.write_text(json.dumps(minimal()), encoding="utf-8")
    assert load_spec(path).name == "books"


def test_defaults_are_polite() -> None:
    spec = parse_spec(minimal())
    assert spec.politeness.obey_robots is True
    assert spec.politeness.retry.status_codes == [408, 429, 500, 502, 503, 504]
    assert spec.politeness.concurrency_per_domain <= spec.politeness.concurrency
    assert spec.extract is not None
    assert spec.extract.fields["title"].process == ["strip"]


def test_template_seeds_expand_lazily_and_count_without_expanding() -> None:
    spec = parse_spec(
        minimal(
            seeds={"template": "https://books.example/page-{n}.html", "range": {"start": 1, "stop": 9_000_000}},
            follow={"max_pages": 9_000_000},
        )
    )
    assert spec.seeds.count() == 9_000_000
    urls = spec.seeds.iter_urls()
    assert [next(urls), next(urls)] == ["https://books.example/page-1.html", "https://books.example/page-2.html"]


def test_more_seeds_than_max_pages_is_refused_naming_both() -> None:
    with pytest.raises(SpecError) as refused:
        parse_spec(minimal(seeds={"template": "https://b.example/{n}", "range": {"start": 1, "stop": 20_000}}))
    assert refused.value.errors == [
        "(top level): seeds: 20000 seed URLs is more than follow.max_pages (10000); raise max_pages or seed fewer pages"
    ]


@pytest.mark.parametrize("name", ["_key", "_page", "_private"])
def test_field_names_starting_with_an_underscore_are_reserved(name: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_spec(minimal(extract={"fields": {name: "h1::text"}}))
    assert any(f"extract.fields.{name}" in e and "reserved" in e for e in refused.value.errors), refused.value.errors


def test_digest_changes_with_content() -> None:
    assert parse_spec(minimal()).digest() == parse_spec(minimal()).digest()
    assert parse_spec(minimal()).digest() != parse_spec(minimal(name="other")).digest()


@pytest.mark.parametrize(
    ("source", "css", "pick", "attr"),
    [
        ("h1::text", "h1", "text", None),
        ("div.desc ::text", "div.desc", "deep_text", None),
        ("h3 a::attr(title)", "h3 a", "attr", "title"),
        ("::attr(href)", None, "attr", "href"),
        ("p.price_color", "p.price_color", "deep_text", None),
        ("table::html", "table", "html", None),
    ],
)
def test_selector_dialect(source: str, css: str | None, pick: str, attr: str | None) -> None:
    assert parse_field_selector(source) == FieldSelector(source, css, pick, attr)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (minimal(extract={"fields": {"price": {"selector": "::attr("}}}), "extract.fields.price.selector: '::attr('"),
        (minimal(extract={"fields": {"price": "p..price"}}), "extract.fields.price.selector: 'p..price' is not"),
        (minimal(extract={"fields": {"price": "p::nope"}}), "extract.fields.price.selector: '::nope' is not a valid"),
        (minimal(extract={"fields": {"u": "a::page_url"}}), "extract.fields.u.selector: 'a::page_url' is not a valid"),
        (minimal(extract={"item": "div >", "fields": {"t": "h1"}}), "extract.item: 'div >' is not a valid selector"),
        (minimal(extract={"fields": {}}), "extract.fields: "),
        (minimal(extract={"fields": {"t": "h1"}, "key": ["upc"]}), "extract: key names 'upc', which is not a field"),
        (minimal(extract={"fields": {"t": {"selector": "h1", "process": ["shout"]}}}), "process.0: 'shout'"),
        (minimal(extract={"fields": {"t": {"selector": "h1", "process": [{"regex": "("}]}}}), "process.0.regex: '('"),
        (minimal(extract={"fields": {"t": {"selector": "h1", "process": [{"x": 1}]}}}), "process.0: a step is"),
        (minimal(extract={"fields": {"bad name": "h1"}}), "extract.fields.bad name"),
        (minimal(name="Books Crawl"), "name: 'Books Crawl' is not a crawl name"),
        (minimal(seeds=["ftp://books.example/"]), "seeds.urls.0: 'ftp://books.example/' is not an http(s) URL"),
        (minimal(seeds=[]), "seeds: give seed urls, a template with a range, a seed file, or sitemaps"),
        (minimal(seeds={"sitemaps": {}}), "seeds.sitemaps: give sitemap urls, or from_robots: true"),
        (minimal(seeds={"sitemaps": ["ftp://b.example/s.xml"]}), "seeds.sitemaps.urls.0: 'ftp://b.example/s.xml'"),
        (minimal(seeds={"sitemaps": "robots"}), "seeds.sitemaps: 'robots': give a list of sitemap URLs, from_robots"),
        (minimal(seeds={"sitemaps": {"urls": [SITEMAP], "max_bytes": 10}}), "seeds.sitemaps.max_bytes: Input should"),
        (minimal(seeds={"sitemaps": {"urls": [SITEMAP], "max_depth": 6}}), "seeds.sitemaps.max_depth: Input should"),
        (minimal(seeds={"sitemaps": {"urls": [SITEMAP], "max_sitemaps": 0}}), "seeds.sitemaps.max_sitemaps: Input"),
        (minimal(seeds={"sitemaps": {"urls": [SITEMAP], "from_robot": True}}), "seeds.sitemaps.from_robot: unknown"),
        (
            minimal(seeds={"file": "s.txt", "sitemaps": "from_robots"}, follow={"allowed_domains": ["b.example"]}),
            "seeds: sitemaps.from_robots reads the robots.txt of the seeds' sites: give a seed URL",
        ),
        (
            minimal(seeds={"urls": [f"https://b{n}.example/" for n in range(101)], "sitemaps": "from_robots"}),
            "seeds: sitemaps.from_robots reads the robots.txt of each seed's site, at most 100; the seeds name 101",
        ),
        (
            minimal(seeds=[f"https://b.example/{n}" for n in range(10_001)], follow={"max_pages": 20_000}),
            "seeds.urls: 10001 URLs is more than the 10000 a spec may list: put them in a seed file",
        ),
        (minimal(seeds={"file": "seeds.txt"}), "seeds.file needs follow.allowed_domains"),
        (minimal(seeds={"file": "../etc/passwd"}, follow={"allowed_domains": ["b.example"]}), "seeds.file: String"),
        (minimal(seeds=["https://b.example/" + "a" * 3000]), "seeds.urls.0: 'https://b.example/aaaa"),
        (minimal(seeds=["https://b.example/" + "\u00e9" * 700]), "characters a URL may have, once encoded"),
        (minimal(seeds=["https://user:pw@b.example/"]), "seeds.urls.0: 'https://user:pw@b.example/' carries a user"),
        (minimal(seeds=["https://:pw@b.example/"]), "seeds.urls.0: 'https://:pw@b.example/' carries a user"),
        (minimal(seeds=["http://192.168.0.257/"]), "seeds.urls.0: 'http://192.168.0.257/' is not a valid URL"),
        (minimal(seeds=["http://b.example:99999/"]), "seeds.urls.0: 'http://b.example:99999/' is not a valid URL"),
        (
            minimal(seeds={"template": "https://b.example/" + "a" * 2028 + "{n}", "range": {"start": 1, "stop": 1000}}),
            "seeds: 'https://b.example/aaaa",
        ),
        (minimal(seeds={"template": "https://b.example/p"}), "seeds.template: a template needs the placeholder {n}"),
        (minimal(seeds={"template": "https://b.example/{n}"}), "seeds: template and range go together"),
        (
            minimal(seeds={"template": "https://b.example/{n}", "range": {"start": 5, "stop": 1}}),
            "seeds.range: stop (1) is before start (5)",
        ),
        (minimal(follow={"selectors": ["li.next a["]}), "follow.selectors.0: 'li.next a[' is not a valid selector"),
        (minimal(follow={"allowed_domains": ["https://x.example/"]}), "follow.allowed_domains: 'https://x.example/'"),
        (minimal(follow={"max_depth": -1}), "follow.max_depth: Input should be greater than or equal to 0"),
        (minimal(follow={"deny": ["(unclosed"]}), "follow.deny.0: '(unclosed' is not a valid regular expression"),
        (minimal(follow={"allow": [r"(x)\1"]}), "follow.allow.0: '(x)\\\\1' uses what linear-time matching cannot"),
        (
            minimal(extract={"fields": {"t": {"selector": "h1", "process": [{"regex": "a(?=b)"}]}}}),
            "extract.fields.t.process.0.regex: 'a(?=b)' uses what linear-time matching cannot run",
        ),
        (
            minimal(extract={"fields": {"t": {"selector": "body", "process": [{"regex": "((.*){30}){30}x"}]}}}),
            "extract.fields.t.process.0.regex: '((.*){30}){30}x' compiles to 9,065 RE2 instructions, over the 1,000",
        ),
        (
            minimal(follow={"allow": [r"\pL{1000}"]}),
            "follow.allow.0: '\\\\pL{1000}' is too large for linear-time matching (RE2: pattern too large",
        ),
        (minimal(politeness={"concurrency": 0}), "politeness.concurrency: Input should be greater than or equal to 1"),
        (minimal(politeness={"user_agent": "a\r\nX-Evil: 1"}), "politeness.user_agent: a user agent is one line"),
        (minimal(politeness={"retry": {"status_codes": [200]}}), "politeness.retry.status_codes: 200 is not an HTTP"),
        (minimal(politeness={"max_body_bytes": 10}), "politeness.max_body_bytes: Input should be greater than"),
        (minimal(alerts={"max_error_rate": 1.5}), "alerts.max_error_rate: Input should be less than or equal to 1"),
        (minimal(schedule="every night"), "schedule: 'every night' is not an EventBridge expression"),
        (minimal(politeness={"obey_robot": False}), "politeness.obey_robot: unknown key"),
        (minimal(surprise=1), "surprise: unknown key"),
        ({"name": "books"}, "seeds: required"),
        (["not", "a", "mapping"], "(top level): a spec is a mapping, not list"),
    ],
)
def test_each_kind_of_error_names_its_field(data: Any, expected: str) -> None:
    errors = errors_of(data)
    assert any(line.startswith(expected) or expected in line for line in errors), errors


def test_every_error_is_reported_not_just_the_first() -> None:
    data = minimal(name="Bad Name", politeness={"concurrency": 0, "typo": True}, schedule="daily")
    errors = errors_of(data)
    assert len(errors) == 4
    assert {line.split(":")[0] for line in errors} == {"name", "politeness.concurrency", "politeness.typo", "schedule"}


def test_unreadable_and_malformed_files_are_spec_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"not valid YAML: line \d+ column \d+"):
        load_spec(broken)
    bad_json = tmp_path / "broken.json"
    bad_json.write_text("{", encoding="utf-8")
    with pytest.raises(SpecError, match="not valid JSON: line 1"):
        load_spec(bad_json)
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")


def test_spec_is_immutable() -> None:
    spec = parse_spec(minimal())
    with pytest.raises(ValueError, match="frozen"):
        spec.name = "other"  # type: ignore[misc]
    assert isinstance(spec, CrawlSpec)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (minimal(seeds=["http://127.0.0.1:99999/"]), "seeds.urls.0: 'http://127.0.0.1:99999/' is not a valid URL"),
        (minimal(seeds=["http://exa mple.com/"]), "seeds.urls.0: 'http://exa mple.com/' contains whitespace"),
        (minimal(schedule="rate(0 minutes)"), "schedule: 'rate(0 minutes)': a rate needs a positive amount"),
        (minimal(schedule="cron(99 3 * * ? *)"), "schedule: 'cron(99 3 * * ? *)': minutes 99 is outside 0-59"),
        (minimal(schedule="cron(0 3 * * MON *)"), "one of day-of-month and day-of-week must be '?'"),
    ],
)
def test_values_eventbridge_or_urllib_would_refuse_are_caught_at_validation(data: Any, expected: str) -> None:
    errors = errors_of(data)
    assert any(expected in line for line in errors), errors


def test_a_key_given_twice_is_an_error_not_last_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "books.yaml"
    path.write_text("name: books\nname: other\n", encoding="utf-8")
    with pytest.raises(SpecError, match="line 2 column 1: key 'name' appears twice"):
        load_spec(path)


def test_a_duplicate_key_does_not_hide_the_other_errors(tmp_path: Path) -> None:
    path = tmp_path / "books.yaml"
    path.write_text("name: books\nname: books\nseeds: [ftp://x]\nbogus: 1\n", encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    errors = raised.value.errors
    assert errors[0] == "(file): line 2 column 1: key 'name' appears twice in one mapping"
    assert any(e.startswith("bogus: unknown key") for e in errors), errors
    assert any(e.startswith("seeds") for e in errors), errors


def test_every_bad_header_and_cookie_is_named(tmp_path: Path) -> None:
    data = minimal() | {
        "request": {
            "headers": {"Bad Name": "x", "Host": "example.com", "X-Long": "v" * 5000},
            "cookies": {"bad name": "1", "ok": "a\nb"},
        }
    }
    errors = errors_of(data)
    headers = [e for e in errors if e.startswith("request.headers: ")]
    cookies = [e for e in errors if e.startswith("request.cookies: ")]
    assert len(headers) == 3, errors
    assert any("'Bad Name' is not a header name" in e for e in headers)
    assert any(e.startswith("request.headers: Host: not a header a spec sets") for e in headers)
    assert any(e.startswith("request.headers: X-Long: the value") for e in headers)
    assert len(cookies) == 2, errors


def test_a_deployable_spec_is_named_after_its_file(tmp_path: Path) -> None:
    path = tmp_path / "my-books.yaml"
    path.write_text(json.dumps(minimal()), encoding="utf-8")
    assert load_spec(path).name == "books"
    with pytest.raises(SpecError, match="name: 'books' must match the file name 'my-books'"):
        load_spec(path, named_after_file=True)


def test_sitemaps_take_a_mapping_or_its_two_shorthands_with_bounded_defaults() -> None:
    listed = parse_spec(minimal(seeds={"sitemaps": [SITEMAP]})).seeds.sitemaps
    robots = parse_spec(minimal(seeds={"urls": ["https://b.example/"], "sitemaps": "from_robots"})).seeds.sitemaps
    assert listed is not None
    assert robots is not None
    assert (listed.urls, listed.from_robots, robots.urls, robots.from_robots) == ([SITEMAP], False, [], True)
    assert (listed.max_sitemaps, listed.max_bytes, listed.max_depth, listed.max_urls) == (100, 50 * 1024**2, 2, None)


def test_a_sitemap_only_spec_is_scoped_to_the_sitemaps_hosts_and_reads_the_seeds_sites_robots() -> None:
    spec = parse_spec(minimal(seeds={"sitemaps": {"urls": [SITEMAP, "http://c.example:8080/s.xml.gz"]}}))
    assert spec.domains() == frozenset({"b.example", "c.example"})
    seeds = parse_spec(
        minimal(
            seeds={
                "urls": ["https://b.example/a", "https://B.example/b"],
                "template": "https://d.example/p/{n}",
                "range": {"start": 1, "stop": 3},
                "sitemaps": {"urls": ["http://c.example:8080/s.xml"], "from_robots": True},
            }
        )
    ).seeds
    assert seeds.robots_sites() == ["https://b.example", "https://d.example", "http://c.example:8080"]


@pytest.mark.parametrize(
    ("suffix", "deep", "where"),
    [
        (".yaml", "types: " + "[" * 200_000 + "]" * 200_000, "line 3 column 39"),  # the 400 KB document
        (".yaml", "types:\n" + "".join(" " * i + "-\n" for i in range(1, 1_200)), "line 35 column 33"),  # by indent
        (".json", '"types": "[[ not nesting ]]", "x": ' + "{" * 100_000 + "}" * 100_000, "line 3 column 67"),
    ],
    ids=["yaml-flow", "yaml-block", "json"],
)
def test_a_document_nested_too_deep_is_refused_before_it_is_built(
    tmp_path: Path, suffix: str, deep: str, where: str
) -> None:
    """main's `sluice validate` printed a RecursionError traceback for the issue's 400 KB YAML."""
    path = tmp_path / f"g-deep{suffix}"
    if suffix == ".json":
        path.write_text('{"name": "g-deep",\n"seeds": ["http://a.example/"],\n' + deep + "}\n")
    else:
        path.write_text("name: g-deep\nseeds: [http://a.example/]\n" + deep + "\n")
    assert path.stat().st_size < 1024 * 1024
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.errors == [
        f"(file): nested more than 32 levels deep at {where}: a spec is a few levels of mappings and lists"
    ]


def test_a_document_at_the_nesting_bound_is_validated_as_usual(tmp_path: Path) -> None:
    path = tmp_path / "g-deep.yaml"
    path.write_text("name: g-deep\nseeds: [http://a.example/]\nextract: {fields: {t: h1}}\nx: " + "[" * 31 + "]" * 31)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.errors == ["x: unknown key"]


@pytest.mark.parametrize(
    ("fields", "typed", "error"),
    [
        ({"run": "h1"}, False, "extract.fields.run: 'run' is a partition column of the crawl's tables (crawl, run)"),
        ({"Crawl": "h1"}, False, "extract.fields.Crawl: 'Crawl' is a partition column of the crawl's tables"),
        ({"type": "h1"}, True, "types.page.extract.fields.type: 'type' is a partition column of the crawl's tables"),
        (
            {"Price": "h1", "price": "h2"},
            False,
            "extract.fields.price: the same column as extract.fields.Price when case is ignored",
        ),
    ],
)
def test_a_field_name_the_tables_cannot_hold_is_refused_naming_its_path(
    fields: dict[str, str], typed: bool, error: str
) -> None:
    """main accepted them: the partitions replaced the records' own values in `sluice query` and Athena, and two
    names one without case broke every query."""
    data: dict[str, Any] = {"name": "books", "seeds": ["https://books.example/"]}
    if typed:
        data["types"] = {
            "page": {"pages": "/", "extract": {"fields": fields}},
            "other": {"pages": "/other", "extract": {"fields": {"title": "h1"}}},
        }
    else:
        data["extract"] = {"fields": fields}
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert any(error in e for e in caught.value.errors), caught.value.errors


def test_a_field_named_type_is_a_plain_field_of_a_one_type_spec_and_two_types_may_share_a_spelling() -> None:
    one_type = parse_spec({"name": "b", "seeds": ["https://b.example/"], "extract": {"fields": {"type": "h1"}}})
    assert one_type.extract is not None
    assert "type" in one_type.extract.fields
    types = {
        "a": {"pages": "/a", "extract": {"fields": {"price": "h1"}}},
        "b": {"pages": "/b", "extract": {"fields": {"price": "h2"}}},
    }
    assert parse_spec({"name": "b", "seeds": ["https://b.example/"], "types": types}).types is not None
    types["b"]["extract"]["fields"] = {"PRICE": "h2"}  # type: ignore[index]
    with pytest.raises(SpecError, match=r"types\.b\.extract\.fields\.PRICE: the same column as types\.a"):
        parse_spec({"name": "b", "seeds": ["https://b.example/"], "types": types})


def test_a_seed_the_follow_rules_leave_out_is_refused_naming_the_seed_and_the_rule() -> None:
    """A seed no run would fetch (its URL matches no follow.allow, or a follow.deny) is an error of the spec, not a
    run that skips it and ends with 0 records."""
    allow = errors_of(minimal(follow={"allow": ["/catalogue/category/"]}))
    assert len(allow) == 1
    assert "seeds.urls: entry 1: 'https://books.example/catalogue/page-1.html' is out of the crawl's scope" in allow[0]
    assert "matches no follow.allow pattern" in allow[0]
    deny = errors_of(minimal(follow={"deny": ["page-\\d+"]}))
    assert "matches follow.deny 'page-\\\\d+'" in deny[0]
    template = errors_of(
        minimal(
            seeds={"template": "https://books.example/catalogue/page-{n}.html", "range": {"start": 2, "stop": 5}},
            follow={"allow": ["/category/"]},
        )
    )
    assert "seeds.template: 'https://books.example/catalogue/page-2.html' is out of the crawl's scope" in template[0]
    other_host = errors_of(minimal(follow={"allowed_domains": ["other.example"]}))
    assert "host 'books.example' is not in the allowed domains" in other_host[0]


def test_a_seed_the_follow_rules_allow_is_kept() -> None:
    spec = parse_spec(minimal(follow={"allow": ["/catalogue/"], "deny": ["/category/"]}))
    assert spec.seeds.urls == ["https://books.example/catalogue/page-1.html"]


def test_domains_are_each_specs_own_whichever_spec_asked_before() -> None:
    """``domains()`` is cached by its inputs (a run asks once a batch): two specs differing only in their seeds,
    asked in turn, each get their own hosts, and a spec's template and allowed domains still count."""
    one = parse_spec(minimal(seeds={"urls": ["https://A.example/x", "https://b.example:8443/y"]}))
    two = parse_spec(minimal(seeds={"urls": ["https://a.example/x", "https://c.example/z"]}))
    templated = parse_spec(
        minimal(
            seeds={
                "urls": ["https://a.example/x"],
                "template": "https://t.example/p/{n}",
                "range": {"start": 1, "stop": 3},
            }
        )
    )
    allowed = parse_spec(minimal(seeds={"urls": ["https://a.d.example/x"]}, follow={"allowed_domains": ["d.example"]}))
    for _ in range(2):
        assert one.domains() == frozenset({"a.example", "b.example"})
        assert two.domains() == frozenset({"a.example", "c.example"})
        assert templated.domains() == frozenset({"a.example", "t.example"})
        assert allowed.domains() == frozenset({"d.example"})


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (minimal(follow={"max_pages": "lots"}), "follow.max_pages: Input should be a valid integer, unable to parse"),
        (minimal(follow={"max_depth": -1}), "follow.max_depth: Input should be greater than or equal to 0 (got -1)"),
        (minimal(alerts={"max_error_rate": 1.5}), "alerts.max_error_rate: Input should be less than or equal to 1"),
    ],
)
def test_a_wrong_value_pydantic_refuses_is_quoted_beside_its_field(data: Any, expected: str) -> None:
    """pydantic's own words ("Input should be a valid integer") do not say what the spec held: the error quotes it."""
    (line,) = errors_of(data)
    assert line.startswith(expected), line
    given = {"follow.max_pages": "(got 'lots')", "follow.max_depth": "(got -1)", "alerts.max_error_rate": "(got 1.5)"}
    assert line.endswith(given[line.split(":")[0]]), line


def test_a_long_or_structured_wrong_value_is_not_quoted() -> None:
    (line,) = errors_of(minimal(follow={"max_pages": "x" * 200}))
    assert "got" not in line
    (listed,) = errors_of(minimal(follow={"max_pages": [1, 2]}))
    assert "got" not in listed

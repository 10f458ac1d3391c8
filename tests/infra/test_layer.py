"""The dependency layer plus the code asset import every handler under the Lambda runtime's Python.

The deployed layer is arm64; this machine may not be. The check builds the same requirements for
this machine's platform and the runtime's Python minor version (see infra/measure.py), and runs the
imports in a local interpreter of that version when the machine has one, which CI's does.
"""

from __future__ import annotations

from pathlib import Path

from infra.bundling import _interpreter, build_code, layer_size
from infra.config import DEFAULT
from infra.crawls import CRAWLS
from infra.measure import import_handlers, python_version

from sluice.spec import load_spec


def test_handlers_import_from_the_built_layer_under_the_runtime_python(tmp_path: Path) -> None:
    result = import_handlers(tmp_path)
    assert set(result["handlers"]) == {"scheduler", "fetcher", "finalizer"}
    assert all(t["handler_ms"] > 0 for t in result["handlers"].values())
    if _interpreter(python_version()) is not None:
        assert str(result["python"]).startswith(python_version() + ".")
        assert result["interpreter_matches_runtime"] is True
    layer = tmp_path / "layer" / "python"
    assert (layer / "selectolax").is_dir()
    for runtime in ("boto3", "botocore", "urllib3", "dateutil"):  # aws-xray-sdk asks for botocore
        assert not (layer / runtime).exists(), f"{runtime} comes with the Lambda runtime, not the layer"
    assert not list(layer.glob("botocore-*.dist-info"))
    assert not list(layer.rglob("*.pyx")), "build sources are stripped from the layer"
    assert layer_size(layer) < 250_000_000  # Lambda's hard limit for function + layers, unzipped


def test_code_asset_ships_the_handlers_and_specs_but_not_the_local_tools(tmp_path: Path) -> None:
    build_code(tmp_path)
    for handler in (DEFAULT.scheduler.handler, DEFAULT.fetcher.handler, DEFAULT.finalizer.handler):
        module = handler.rsplit(".", 1)[0].replace(".", "/") + ".py"
        assert (tmp_path / module).is_file(), module
    shipped = sorted(p.name for p in (tmp_path / "crawls").iterdir())
    assert shipped == sorted(f"{p.stem}.json" for p in CRAWLS.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    for spec in CRAWLS.iterdir():  # each the same spec as its YAML, read without PyYAML
        if spec.suffix in (".yaml", ".yml"):
            assert load_spec(tmp_path / "crawls" / f"{spec.stem}.json").digest() == load_spec(spec).digest()
    assert not (tmp_path / "sluice" / "local").exists()
    assert not (tmp_path / "sluice" / "demosite").exists()
    assert not (tmp_path / "sluice" / "cli.py").exists()

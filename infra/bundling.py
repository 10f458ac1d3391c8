"""Local bundling for the code asset and the dependency layer: pip and file copies, never Docker.

Both assets get a hash computed from what goes into them, so an edit to ``requirements.txt``
or to a spec in ``crawls/`` changes the asset, and nothing else does.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling

from sluice.spec import load_spec, parse_spec, spec_files
from sluice.spec.yamlfile import read_yaml

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements.txt"
PACKAGE = ROOT / "functions" / "sluice"
CRAWLS = ROOT / "crawls"


def wheel_platforms(machine: str) -> tuple[str, ...]:
    """The wheel tags a Lambda runtime on Amazon Linux 2023 (glibc 2.34) loads, for ``aarch64`` or ``x86_64``."""
    return (f"manylinux2014_{machine}", f"manylinux_2_28_{machine}", f"manylinux_2_34_{machine}")


PLATFORMS = {"arm64": wheel_platforms("aarch64"), "x86_64": wheel_platforms("x86_64")}


def _digest(paths: Iterable[Path], *extra: str) -> str:
    h = hashlib.sha256()
    for part in extra:
        h.update(part.encode())
    for path in sorted(paths):
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def shipped_files() -> list[Path]:
    """The package's files that go to Lambda, and the crawl specs."""
    # The whole package ships: developer tooling lives in tools/, so there is nothing to leave out.
    files = [p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.relative_to(PACKAGE).parts]
    specs = spec_files(CRAWLS)
    return files + specs


def code_hash() -> str:
    return _digest(shipped_files(), "code-v2")  # v2: specs ship as JSON


def layer_hash(architecture: str, python_version: str) -> str:
    return _digest([REQUIREMENTS], "layer-v1", architecture, python_version)


def _interpreter(python_version: str) -> str | None:
    """A local interpreter of the Lambda runtime's version, to byte-compile for it."""
    for candidate in (f"python{python_version}", str(Path.home() / f".pyenv/versions/{python_version}/bin/python")):
        found = shutil.which(candidate) or (candidate if Path(candidate).exists() else None)
        if found and subprocess.run([found, "-c", "pass"], capture_output=True, check=False).returncode == 0:  # noqa: S603
            return found
    pyenv = Path.home() / ".pyenv" / "versions"
    for version in sorted(pyenv.glob(f"{python_version}.*"), reverse=True) if pyenv.exists() else []:
        return str(version / "bin" / "python")
    return None


def _compile(folder: Path, python_version: str) -> None:
    python = _interpreter(python_version)
    if python is None:
        return  # Lambda compiles on first import instead; slower cold start, same behaviour
    subprocess.run(  # noqa: S603
        [python, "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", str(folder)], check=True
    )


@jsii.implements(ILocalBundling)
class LayerBundler:
    """pip install for the Lambda platform into ``python/``; then byte-compile for the runtime's Python."""

    def __init__(self, architecture: str, python_version: str) -> None:
        self.platforms = PLATFORMS[architecture]
        self.python_version = python_version

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        target = Path(output_dir) / "python"
        build_layer(target, self.platforms, self.python_version)
        return True


def build_layer(target: Path, platforms: Iterable[str], python_version: str) -> None:
    """Install the runtime requirements for ``platforms`` and ``python_version`` into ``target``."""
    tags = [arg for tag in platforms for arg in ("--platform", tag)]
    subprocess.run(  # noqa: S603
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "-r", str(REQUIREMENTS), "--target", str(target),
            *tags, "--implementation", "cp", "--python-version", python_version,
            "--only-binary=:all:", "--no-compile", "--upgrade",
        ],
        check=True,
    )  # fmt: skip
    _slim(target)
    _compile(target, python_version)


# Build inputs that wheels carry but nothing imports: Cython and C sources, type stubs, scripts.
_NOT_NEEDED = ("*.c", "*.cpp", "*.h", "*.pyx", "*.pxd", "*.pxi", "*.pyi", "*.dist-info/RECORD", "ada_url/ada_build.py")
# Subpackages Sluice never imports (tests import every handler from the built layer to prove it).
_UNUSED = (
    "pydantic/v1",
    # cffi's compiler front end: ada's compiled module needs only the _cffi_backend extension.
    "cffi",
    "pycparser",
    # HTTP routing for API Gateway and friends; only a pydantic-in-a-log-line fallback reaches it.
    "aws_lambda_powertools/event_handler",
    *(
        f"aws_lambda_powertools/utilities/{name}"
        for name in (
            "auth_alpha", "circuit_breaker", "data_masking", "feature_flags",
            "idempotency", "kafka", "parameters", "streaming",
        )
    ),
)  # fmt: skip


# What the Lambda Python runtime ships (boto3 and its dependencies): aws-xray-sdk asks for botocore,
# which would bring 25 MB and a second botocore ahead of the runtime's on the path.
_BOTH = ("", "-*.dist-info")
_RUNTIME = (
    *(f"{name}{tail}" for name in ("boto3", "botocore", "s3transfer", "jmespath", "urllib3") for tail in _BOTH),
    "dateutil",
    "python_dateutil-*.dist-info",
    "six.py",
    "six-*.dist-info",
)


def layer_size(folder: Path) -> int:
    """Bytes unzipped, as Lambda counts them against its 250 MB limit."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _slim(target: Path) -> None:
    """Drop what a Lambda never reads, and the debug symbols of native extensions (cross-arch llvm-strip)."""
    for pattern in _NOT_NEEDED:
        for path in target.rglob(pattern):
            path.unlink()
    runtime = [path for name in _RUNTIME for path in target.glob(name)]
    for folder in [*target.rglob("__pycache__"), target / "bin", *(target / name for name in _UNUSED), *runtime]:
        if folder.is_file():
            folder.unlink()
        else:
            shutil.rmtree(folder, ignore_errors=True)
    stripper = shutil.which("llvm-strip")
    if stripper is None:
        return  # same code, larger layer
    for library in target.rglob("*.so*"):
        subprocess.run([stripper, "--strip-debug", str(library)], check=True)  # noqa: S603


@jsii.implements(ILocalBundling)
class CodeBundler:
    """The functions' code asset: the shipped part of the package, plus ``crawls/`` for the specs (as JSON)."""

    def __init__(self, python_version: str) -> None:
        self.python_version = python_version

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        build_code(Path(output_dir), self.python_version)
        return True


def shipped_spec(path: Path) -> str:
    """A spec as the functions read it: JSON, so a cold start parses it in C and never imports PyYAML.

    Checked here, at bundling, as ``sluice validate`` checks it (keys given twice, depth, every field), and
    the JSON checked to be the same spec (the same digest) before it ships; a function still validates it
    whole when it loads it."""
    if path.suffix == ".json":
        return path.read_text(encoding="utf-8")
    spec = load_spec(path)
    data, _ = read_yaml(path, path.read_text(encoding="utf-8"))
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    if parse_spec(json.loads(text), str(path)).digest() != spec.digest():
        raise ValueError(f"{path}: its JSON is not the same spec (a YAML value JSON cannot hold?)")
    return text


def build_code(out: Path, python_version: str | None = None) -> None:
    for path in shipped_files():
        if path.parent == CRAWLS:
            (out / "crawls").mkdir(parents=True, exist_ok=True)
            (out / "crawls" / f"{path.stem}.json").write_text(shipped_spec(path), encoding="utf-8")
            continue
        relative = path.relative_to(ROOT / "functions") if path.is_relative_to(PACKAGE) else path.relative_to(ROOT)
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, out / relative)
    if python_version:
        _compile(out, python_version)


def options(local: ILocalBundling) -> BundlingOptions:
    # The image is never pulled: local bundling always succeeds first, and Sluice needs no Docker.
    return BundlingOptions(image=DockerImage.from_registry("sluice-local-bundling-only"), local=local)

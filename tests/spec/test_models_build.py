"""Every model's validator builds: pydantic builds them on first use (``defer_build``, for the cold start), so a
schema that cannot build would otherwise fail only when a batch first validates with it, in production."""

from __future__ import annotations

import importlib
import pkgutil

from pydantic import BaseModel

import sluice


def _models() -> list[type[BaseModel]]:
    for info in pkgutil.walk_packages(sluice.__path__, "sluice."):
        if not info.name.startswith("sluice.handlers"):  # a handler's import sets up its Lambda's process
            importlib.import_module(info.name)
    found: list[type[BaseModel]] = []
    todo = list(BaseModel.__subclasses__())
    while todo:
        model = todo.pop()
        todo.extend(model.__subclasses__())
        if model.__module__.startswith("sluice.") and model not in found:
            found.append(model)
    return found


def test_every_models_validator_builds() -> None:
    models = _models()
    assert len(models) >= 20  # the spec's, the messages', the settings'
    for model in models:
        assert model.model_rebuild(force=True) is not False, model.__qualname__
        assert model.__pydantic_complete__, model.__qualname__

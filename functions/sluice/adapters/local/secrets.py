"""Secrets from the environment: :class:`sluice.ports.SecretSource` for ``sluice run``.

A spec's ``{secret: sluice/demo/token}`` (or ``ssm:/sluice/demo/token``) is the variable
``SLUICE_SECRET_SLUICE_DEMO_TOKEN`` (:func:`sluice.domain.secrets.local_variable`), so a
deployed spec runs locally unchanged, its secrets exported in the shell.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from sluice.domain.secrets import SecretUnavailable, local_variable


class EnvSecrets:
    """:class:`sluice.ports.SecretSource` on environment variables (``os.environ`` unless given)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ

    def read(self, name: str) -> str:
        variable = local_variable(name)
        value = (os.environ if self._environ is None else self._environ).get(variable)
        if value is None:
            raise SecretUnavailable(name, f"the environment variable {variable} is not set (export it to run locally)")
        return value

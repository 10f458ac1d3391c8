"""Secrets a crawl's requests carry: named by reference in the spec, read once per container, never shown.

A reference is a name: ``ssm:/path`` is an SSM SecureString parameter, anything else a Secrets
Manager secret (deployed); locally both are the environment variable :func:`local_variable`
names. A value is held in a :class:`Secret`, whose ``repr`` and ``str`` are a mask, so a
secret that reaches an exception, a log line or a dataclass repr shows as ``'********'``.
"""

from __future__ import annotations

import re

SSM_PREFIX = "ssm:"
MAX_SECRET_BYTES = 8 * 1024
"""A secret's value at most (UTF-8): header values, cookies and passwords are short; SSM's own cap is 8 KB."""
LOCAL_PREFIX = "SLUICE_SECRET_"
MASK = "********"

_SECRETS_MANAGER_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")
"""Secrets Manager's characters for a name: no wildcard, as the fetcher's grant is built from it."""
_SSM_NAME = re.compile(r"/?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")
_SSM_MAX = 1011


class SecretUnavailable(Exception):
    """A named secret that cannot be read: ``name`` is the reference, ``why`` says what is wrong, never the value.

    ``retryable``: the store may answer later (throttling, a timeout); else the setup is wrong
    (missing, not granted, not decryptable, too long) and retrying cannot help.
    """

    def __init__(self, name: str, why: str, *, retryable: bool = False) -> None:
        super().__init__(f"secret {name!r} unavailable: {why}")
        self.name = name
        self.why = why
        self.retryable = retryable


class Secret:
    """A secret's value; ``repr`` and ``str`` are a mask, :meth:`reveal` is the only way to the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value itself: only for the request head that carries it."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({MASK!r})"

    __str__ = __repr__


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a secret reference, or None: ``ssm:`` and a parameter name (letters, digits,
    ``_.-``, paths by ``/``, at most 1,011 characters), or a Secrets Manager name (1-512 of ``A-Za-z0-9/_+=.@-``)."""
    if is_ssm(name):
        parameter = ssm_parameter(name)
        if len(parameter) > _SSM_MAX or not _SSM_NAME.fullmatch(parameter):
            return (
                f"{name!r} is not an SSM parameter: write ssm:/path/name (letters, digits, _ . - and /, "
                f"at most {_SSM_MAX} characters)"
            )
        return None
    if not _SECRETS_MANAGER_NAME.fullmatch(name):
        return f"{name!r} is not a secret name: 1-512 of letters, digits and / _ + = . @ - (or ssm:/path for SSM)"
    return None


def is_ssm(name: str) -> bool:
    """True for an SSM parameter reference (``ssm:/path``), False for a Secrets Manager secret name."""
    return name.startswith(SSM_PREFIX)


def ssm_parameter(name: str) -> str:
    """The SSM parameter name of an ``ssm:`` reference: ``ssm:/sluice/token`` is ``/sluice/token``."""
    return name.removeprefix(SSM_PREFIX)


def local_variable(name: str) -> str:
    """The environment variable that holds ``name`` locally: ``ssm:/sluice/demo/token`` and
    ``sluice/demo/token`` are both ``SLUICE_SECRET_SLUICE_DEMO_TOKEN``."""
    words = re.sub(r"[^A-Za-z0-9]+", "_", name.removeprefix(SSM_PREFIX)).strip("_")
    return LOCAL_PREFIX + words.upper()


def checked(name: str, value: str) -> Secret:
    """``value`` as a :class:`Secret`, if it is one a request can carry (bounded, not empty)."""
    size = len(value.encode("utf-8"))
    if size > MAX_SECRET_BYTES:
        raise SecretUnavailable(name, f"its value is {size} bytes, more than the {MAX_SECRET_BYTES} a secret may have")
    if not value:
        raise SecretUnavailable(name, "its value is empty")
    return Secret(value)

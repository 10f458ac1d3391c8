"""The port boundary: an adapter class whose public methods raise only the domain's store errors.

Each adapter set says how its libraries' errors translate (``aws/errors.py``, ``local/errors.py``); this
wraps every public method of a class (a generator's iteration too) so that what escapes a port is a
:class:`~sluice.domain.errors.StoreError`, chained to the original. Errors the translation does not
claim (a ``ValueError`` for a bad key, say) pass unchanged.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

from sluice.domain.errors import StoreError

Translate = Callable[[BaseException, str], StoreError | None]
"""The store error an exception raised in a method (its qualified name given) means, or None if it is not the
store's (it passes unchanged)."""
Cls = TypeVar("Cls", bound=type)


def store_errors(translate: Translate) -> Callable[[Cls], Cls]:
    """A class decorator: every public method's errors translated by ``translate``."""

    def decorate(cls: Cls) -> Cls:
        for name, method in list(vars(cls).items()):
            if name.startswith("_") or not inspect.isfunction(method):
                continue
            setattr(cls, name, _translating(method, translate))
        return cls

    return decorate


def _translating(method: Callable[..., Any], translate: Translate) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def iterate(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(*args, **kwargs)
            except StoreError:
                raise
            except Exception as exc:
                _raise(exc, translate, method.__qualname__)

        return iterate

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except StoreError:
            raise
        except Exception as exc:
            _raise(exc, translate, method.__qualname__)

    return call


def _raise(exc: Exception, translate: Translate, where: str) -> NoReturn:
    translated = translate(exc, where)
    if translated is None:
        raise exc
    raise translated from exc

"""``PageResult.but`` is ``dataclasses.replace`` for a result, field for field."""

from __future__ import annotations

import dataclasses

import pytest
from tests.domain.full_result import every_field

from sluice.domain.pages import PageResult, PartBlock

FULL = every_field()


def test_every_field_is_set_and_kept_as_replace_does() -> None:
    for field in dataclasses.fields(PageResult):
        other = getattr(PageResult(url="u", depth=0, origin="seed", outcome="skipped"), field.name)
        changed = FULL.but(**{field.name: other})
        assert changed == dataclasses.replace(FULL, **{field.name: other})
        assert getattr(changed, field.name) == other
    assert FULL.but() == FULL
    assert FULL.but() is not FULL
    assert FULL.but(block=PartBlock("q", 3, 4), ms=5) == dataclasses.replace(FULL, block=PartBlock("q", 3, 4), ms=5)


def test_an_unknown_field_is_refused_as_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no_such"):
        FULL.but(no_such=1)

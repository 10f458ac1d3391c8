"""How often Python's cycle collector runs, and over what: one policy for every long stretch of crawling.

A page allocates thousands of containers (records, results, tasks, parsed trees) that reference counting frees;
at the default threshold (700) the collector still ran every 700 containers allocated and not freed and walked the
survivors, and a full collection walked every object alive, the modules included (docs/engine-experiments.md,
"the cycle collector"). :func:`collected_rarely` freezes what is alive when a stretch starts (``gc.freeze``: no
collection walks it) and raises the youngest generation's threshold to :data:`YOUNG_OBJECTS`; cycles are still
collected, later. Imports nothing of the package, so the local runner and the engine can both use it.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_OBJECTS = 10_000
"""The youngest generation's threshold while crawling (700 by default): a cycle collection after this many more
containers allocated than freed. Where a 3,000-page ``sluice run``'s collector time flattened (2,000: 89 ms,
5,000: 70, 10,000: 43, 20,000: 37)."""

_lock = threading.Lock()
_depth = 0
_before: tuple[int, ...] = ()


def _forked() -> None:
    """A forked child (a ``sluice run`` worker process) starts outside any stretch: its own is its outermost,
    freezing what the child holds then, as the parent's froze what it held."""
    global _lock, _depth
    _lock = threading.Lock()
    _depth = 0


os.register_at_fork(after_in_child=_forked)


@contextmanager
def collected_rarely() -> Iterator[None]:
    """A stretch of work with the cycle collector run less often, and never over what was alive before it started.

    Both are undone when the outermost stretch ends (the frozen objects go back to the oldest generation, collected
    as before; the threshold is the one found). Nested or overlapping stretches (a run's worker threads, a crawl
    inside a run) share the outermost one's setting: an inner stretch ending neither unfreezes nor restores."""
    global _depth, _before
    with _lock:
        if _depth == 0:
            _before = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(YOUNG_OBJECTS, *_before[1:])
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_before)
                gc.unfreeze()


def collect_rarely_from_now() -> None:
    """A Lambda container's setting, made once by each handler's module after its cold-start imports.

    What those imports left alive (the modules, their classes and tables: 62,000 objects after the fetcher's) is
    frozen, and the youngest generation's threshold is :data:`YOUNG_OBJECTS`, for the container's life: it serves
    one invocation after another, and nothing outlives it to restore them for. What the invocations allocate is
    collected as before, at the raised threshold, and the frozen set stays the imports', so memory stays bounded
    (a freeze per invocation would freeze the last one's uncollected cycles, again and again). ``gc.freeze`` moves
    the generations' lists whole, without a walk: the cold start pays nothing measurable for it."""
    gc.freeze()
    gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])

"""Keeping a page's freed memory for the next page: glibc's malloc, told once per process.

glibc hands memory back to the kernel as soon as more than ``M_TRIM_THRESHOLD`` is free at the top
of the heap, and serves a block of ``M_MMAP_THRESHOLD`` or more from a fresh mapping it unmaps on
free. Both start at 128 KB and move only when a mapped block is freed. A 400 KB page's parse grows
the heap by about 1.3 MB (lexbor's tree, the body, the text of its checks) and frees it all at the
end: glibc trimmed it and the next page mapped it back, ~340-510 minor page faults a page (each one
a kernel entry and a zeroed 4 KB page), ~0.45 ms of a 3 ms extraction.

:func:`tune_heap` raises the trim threshold to :data:`TRIM_THRESHOLD` and fixes the mmap threshold
at :data:`MMAP_THRESHOLD`: the heap keeps what one heavy page needs (RSS +4-5 MB) and reuses it,
with no page faults. It is called by extraction on its first page (:mod:`sluice.extraction.extract`),
so every path that extracts (the fetcher, local workers, ``sluice crawl``) has it, and the fetcher's
cold import pays for neither this module nor ``ctypes`` (about 2 ms): the first page does, once.

Where there is no glibc (musl, macOS, Windows) nothing is done. An operator who set glibc's own
settings (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_`` or ``GLIBC_TUNABLES``) keeps them.
"""

from __future__ import annotations

import os
from typing import Any

M_TRIM_THRESHOLD = -1
"""glibc's ``mallopt`` parameter for the trim threshold (malloc.h)."""
M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter for the mmap threshold (malloc.h)."""
TRIM_THRESHOLD = 8 * 1024 * 1024
"""Bytes free at the heap's top before glibc gives them back (a heavy page frees ~1.3 MB at a time)."""
MMAP_THRESHOLD = 1024 * 1024
"""Bytes from which a block gets a mapping of its own (a 400 KB body and its text stay in the heap)."""
SETTINGS = ((M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_MMAP_THRESHOLD, MMAP_THRESHOLD))
"""What :func:`tune_heap` sets, in order."""
_OPERATOR_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")

_tuned = False


def tune_heap() -> None:
    """Set :data:`SETTINGS` through glibc's ``mallopt``, the first time it is called in a process.

    Later calls return at once; without glibc, or with the operator's own settings, it does nothing.
    """
    global _tuned
    if _tuned:
        return
    _tuned = True
    if any(name in os.environ for name in _OPERATOR_SETTINGS):
        return
    apply(_own_libc())


def apply(libc: Any) -> bool:
    """Call ``libc.mallopt`` with :data:`SETTINGS` if ``libc`` is glibc; True if every setting took."""
    if libc is None or not hasattr(libc, "gnu_get_libc_version"):  # mallopt's parameters are glibc's
        return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    return all([mallopt(parameter, value) == 1 for parameter, value in SETTINGS])


def _own_libc() -> Any:
    """The C library the process runs on, from its own symbols (``find_library`` would run ldconfig: ~5 ms)."""
    try:
        import ctypes  # here, not at import: the first page pays for it, not the fetcher's cold start

        return ctypes.CDLL(None)
    except (ImportError, OSError, TypeError):  # no ctypes, or a platform without a process-wide handle
        return None

"""Where a bench client's CPU goes ONLINE, stage by stage: a real run with CPU accumulators around stages.

``python -m bench.online_stages sluice|peer --base URL --pages N --concurrency 32 --core 1 [--variant ...]``
runs the client as ``bench.client_<name>`` would (same arguments, same Stopwatch window) with the
process CPU time (``time.process_time``, user + system) of each stage added up, and prints one line
``STAGES <client> {stage: CPU-ms a page}`` to stderr (just before the client's own RESULT line).

A plain function is timed call by call. A coroutine is timed step by step: each resumption of it,
and everything that runs synchronously inside that resumption (awaited coroutines included), is
charged to it; what other tasks or loop callbacks do meanwhile is not. Stages nest (``fetch``
holds ``wire.send``, which holds ``aiohttp._request``), and the wrappers cost about a microsecond
a step, so compare the two clients stage by stage rather than adding stages up. Diagnostic only:
nothing here is part of the product or of ``make bench``.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any

_spent: dict[str, float] = {}


class _Timed:
    """Drives ``coro`` as ``await`` would, adding the CPU time of each of its steps to ``key``."""

    __slots__ = ("coro", "key")

    def __init__(self, coro: Coroutine[Any, Any, Any], key: str) -> None:
        self.coro = coro
        self.key = key

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, key, clock = self.coro, self.key, time.process_time
        value: Any = None
        error: BaseException | None = None
        while True:
            started = clock()
            try:
                if error is not None:
                    thrown, error = error, None
                    yielded = coro.throw(thrown)
                else:
                    yielded = coro.send(value)
            except StopIteration as done:
                _spent[key] = _spent.get(key, 0.0) + clock() - started
                return done.value
            except BaseException:
                _spent[key] = _spent.get(key, 0.0) + clock() - started
                raise
            _spent[key] = _spent.get(key, 0.0) + clock() - started
            try:
                value = yield yielded
            except BaseException as exc:  # handed to the coroutine, as await does
                error, value = exc, None


def _time_calls(owner: object, name: str, key: str) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            _spent[key] = _spent.get(key, 0.0) + time.process_time() - started

    setattr(owner, name, timed)


def _time_steps(owner: object, name: str, key: str) -> None:
    original: Callable[..., Coroutine[Any, Any, Any]] = getattr(owner, name)

    @functools.wraps(original)
    async def timed(*args: Any, **kwargs: Any) -> Any:  # a coroutine still: create_task takes it
        return await _Timed(original(*args, **kwargs), key)

    setattr(owner, name, timed)


def _instrument_common() -> None:
    import aiohttp
    import aiohttp.client_proto
    import aiohttp.client_reqrep
    import aiohttp.http_writer

    _time_steps(aiohttp.ClientSession, "_request", "aiohttp._request")
    _time_calls(aiohttp.client_reqrep.ClientRequest, "__init__", "aiohttp.ClientRequest.__init__")
    _time_steps(aiohttp.client_reqrep.ClientRequest, "send", "aiohttp.ClientRequest.send")
    _time_calls(aiohttp.http_writer.StreamWriter, "set_eof", "aiohttp.StreamWriter.set_eof (the send syscall)")
    _time_calls(aiohttp.client_proto.ResponseHandler, "data_received", "aiohttp.data_received (loop callback)")


def _instrument_sluice() -> None:
    import sluice.fetch.body
    import sluice.fetch.wire
    import sluice_tools.crawl.engine
    from sluice.fetch.client import PageFetcher

    engine = sluice_tools.crawl.engine
    _time_steps(engine.Crawl, "_visit", "visit (a page: fetch, extract, sink)")
    _time_calls(engine, "extract_page", "extract (parse, guard, fields)")
    _time_calls(engine, "parser_input", "charset")
    _time_steps(PageFetcher, "fetch", "fetch")
    _time_calls(sluice.fetch.body._Decoder, "decode", "inflate")
    _time_steps(sluice.fetch.wire.AiohttpWire, "send", "wire.send")
    _time_steps(sluice.fetch.wire._AiohttpReply, "read", "reply.read (inflate included)")


def _instrument_peer() -> None:
    import asyncio
    import types

    import aiohttp.compression_utils

    import bench.client_peer as peer

    _time_calls(peer, "cards", "extract (parse, fields)")
    _time_calls(aiohttp.compression_utils.ZLibDecompressor, "decompress_sync", "inflate")
    gather = asyncio.gather

    def timed_gather(*coros: Coroutine[Any, Any, Any], **kwargs: Any) -> Any:
        return gather(*(_Timed(c, "visit (a page: get, read, cards)") for c in coros), **kwargs)

    shim = types.SimpleNamespace(**{n: getattr(asyncio, n) for n in dir(asyncio) if not n.startswith("__")})
    shim.gather = timed_gather
    setattr(peer, "asyncio", shim)  # noqa: B010 - the module's own name, swapped for the run


def main() -> None:
    import bench.common as common

    client = sys.argv[1]
    if client not in ("sluice", "peer"):
        raise SystemExit("usage: python -m bench.online_stages sluice|peer CLIENT-ARGUMENTS")
    sys.argv = [f"bench.client_{client}", *sys.argv[2:]]
    _instrument_common()
    _instrument_sluice() if client == "sluice" else _instrument_peer()
    stop = common.Stopwatch.stop
    pages = int(sys.argv[sys.argv.index("--pages") + 1]) if "--pages" in sys.argv else 1

    def report(watch: common.Stopwatch) -> None:
        stop(watch)
        stages = {k: round(v / pages * 1e3, 3) for k, v in sorted(_spent.items())}
        stages["total"] = round(watch.cpu_s / pages * 1e3, 3)
        stages["system"] = round(watch.system_s / pages * 1e3, 3)
        print("STAGES", client, json.dumps(stages), file=sys.stderr)

    setattr(common.Stopwatch, "stop", report)  # noqa: B010 - the client's own window, reported on
    importlib.import_module(f"bench.client_{client}").main()


if __name__ == "__main__":
    main()

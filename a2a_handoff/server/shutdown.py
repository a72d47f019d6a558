"""Serving until told to stop, then stopping without failing what is under way: uvicorn's
server with a drain on SIGTERM (and Ctrl-C).

Told to stop, uvicorn on its own closes its listening socket at once, gives the requests in
flight a few seconds and cuts the tasks running; a load balancer goes on sending it work
until it notices. `DrainingServer` puts a drain first: on the signal it calls `drain()` (an
agent's `AgentService.drain`: `/readyz` 503 at once, new work taken for a grace then refused
with a retryable error, the runs finished or handed over within the bound) while it keeps
serving, and only then stops as uvicorn does — its socket closed, the requests still in
flight (streams) given `timeout_graceful_shutdown`, the service closed by the lifespan.

The process then exits 0: a drained stop is a clean one (uvicorn would raise the signal again
after its own graceful stop, so that the process dies of it). It exits 0 too, with an ERROR
line, when the app's close has not ended `close_seconds` (`DrainConfig.close`) after the
connections' grace: a close that hangs never keeps a stopped process up.

A second signal cuts the drain short: the stop goes on at once, the runs left cut as by a
crash (resumed elsewhere, or at the next start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import Any

import uvicorn

from a2a_handoff.server.app_config import DrainConfig

log = logging.getLogger("a2a_handoff.server")

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class DrainingServer(uvicorn.Server):
    """uvicorn's `Server`, draining (`drain()`) before it stops on SIGTERM or SIGINT; its
    stop bounded by the connections' grace and then `close_seconds`."""

    def __init__(
        self,
        config: uvicorn.Config,
        drain: Callable[[], Awaitable[None]] | None = None,
        close_seconds: float = DrainConfig().close,
    ) -> None:
        super().__init__(config)
        self.drain = drain
        self.close_seconds = close_seconds
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signalled = False
        self._draining: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only: stopped by `should_exit` then
            return
        self._loop = asyncio.get_running_loop()
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The signal handler: the first signal starts the drain, a second stops at once."""
        loop = self._loop
        if self._signalled or self.drain is None or not self.started or loop is None:
            self.should_exit = True
            if self._draining is not None and loop is not None:
                loop.call_soon_threadsafe(self._draining.cancel)
            return
        self._signalled = True
        loop.call_soon_threadsafe(self._start_drain)

    async def shutdown(self, sockets: list[Any] | None = None) -> None:
        """uvicorn's shutdown, bounded: when the app's close has not ended `close_seconds`
        after the connections' grace, the process says so and exits (0: what it ran was
        drained or is another replica's, or the next start's, to recover)."""
        closing = asyncio.ensure_future(super().shutdown(sockets))
        bound = (self.config.timeout_graceful_shutdown or 0) + self.close_seconds
        done, _ = await asyncio.wait({closing}, timeout=bound)
        if not done:
            log.error("closing did not end within %gs: stopping now", bound)
            logging.shutdown()
            os._exit(0)
        closing.result()

    def _start_drain(self) -> None:
        self._draining = asyncio.create_task(self._drain_then_exit(), name="drain")

    async def _drain_then_exit(self) -> None:
        assert self.drain is not None
        try:
            await self.drain()
        except asyncio.CancelledError:
            log.warning("drain cut short by a second signal: stopping now")
        except Exception:
            log.exception("the drain failed: stopping now")
        finally:
            self.should_exit = True


def run(app: Any, **options: Any) -> None:
    """Serve `app` (`create_app`'s) with uvicorn — `options` are `uvicorn.Config`'s — until
    SIGTERM or Ctrl-C, then drain its agent (`app.state.a2a`) before stopping, as its
    `DrainConfig` says. SystemExit(3) when it could not start (uvicorn's own code for it)."""
    config = uvicorn.Config(app, **options)
    service = getattr(getattr(app, "state", None), "a2a", None)
    drain_config = getattr(service, "drain_config", None)
    close = drain_config.close if isinstance(drain_config, DrainConfig) else DrainConfig().close
    server = DrainingServer(config, getattr(service, "drain", None), close)
    server.run()
    if not server.started:
        raise SystemExit(3)

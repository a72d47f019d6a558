"""A watchdog that ends a stuck test even when pytest-timeout cannot.

pytest-timeout (the `signal` method) raises `Failed` inside the test when its time is up. That
ends most stuck tests, but not every one: a test stuck in an event loop's teardown (a task that
does not finish when cancelled), in C code, or in a `finally` that waits again goes on waiting,
and the run prints nothing until someone presses Ctrl-C.

So every test also runs under a watchdog thread. If the test (setup, call and teardown) is
still running `GRACE` seconds after its timeout, the watchdog prints which test it is, what the
test printed so far and the stack of every thread, kills the processes the test started, and
ends this process with `os._exit`: under xdist the controller reports the test as failed
("worker crashed while running …") and starts a new worker; in a plain run pytest ends.

`A2A_TEST_TIMEOUT_GRACE` (seconds) sets the grace; the default leaves pytest-timeout its
chance first.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

import psutil
import pytest

GRACE = float(os.environ.get("A2A_TEST_TIMEOUT_GRACE", "15"))


def item_timeout(item: pytest.Item) -> float | None:
    """The test's pytest-timeout setting: its `timeout` marker, else the run's (`--timeout`,
    then `$PYTEST_TIMEOUT`, then the ini file's `timeout`, as pytest-timeout reads them)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
    else:
        value = item.config.getvalue("timeout")
        if value is None:
            value = os.environ.get("PYTEST_TIMEOUT")
        if value is None:
            value = item.config.getini("timeout") or None
    try:
        seconds = float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 else None


def running_loops() -> list[asyncio.AbstractEventLoop]:
    """The event loops some thread is running now, found on the threads' stacks."""
    loops: list[asyncio.AbstractEventLoop] = []
    for frame in sys._current_frames().values():
        walk = frame
        while walk is not None:
            candidate = walk.f_locals.get("self")
            if isinstance(candidate, asyncio.AbstractEventLoop) and candidate not in loops:
                loops.append(candidate)
            walk = walk.f_back
    return loops


def dump_tasks(stream: TextIO) -> None:
    """Where each unfinished asyncio task waits (read from another thread: best effort)."""
    for loop in running_loops():
        for _ in range(3):  # the set may change while it is read
            try:
                tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
                break
            except RuntimeError:
                continue
        else:
            continue
        stream.write(f"---- {len(tasks)} unfinished asyncio task(s) ----\n")
        for task in tasks:
            task.print_stack(limit=20, file=stream)


class Watchdog:
    """One thread per test: waits for the test to end, or ends the process."""

    def __init__(self, item: pytest.Item, timeout: float, grace: float) -> None:
        self.item = item
        self.timeout = timeout
        self.grace = grace
        self.started = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, name=f"test watchdog {item.nodeid}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        if self._done.wait(self.timeout + self.grace):
            return
        self._bite()

    def _bite(self) -> None:
        elapsed = time.monotonic() - self.started
        out = err = ""
        try:
            capman = self.item.config.pluginmanager.getplugin("capturemanager")
            if capman is not None:  # write to the real stderr, not the test's capture
                capman.suspend_global_capture(in_=True)
                out, err = capman.read_global_capture()
        except Exception:  # the process ends next: say what we can
            pass
        stream = sys.__stderr__ or sys.stderr
        line = "+" * 30
        with contextlib.suppress(Exception):
            stream.write(
                f"\n{line} STUCK TEST {line}\n{self.item.nodeid} is still running "
                f"{elapsed:.0f} s after it started: its timeout is {self.timeout:g} s, and "
                f"{self.grace:g} s more did not end it. Its output so far, then every "
                "thread's stack; then this process exits.\n"
            )
            if out:
                stream.write(f"---- its stdout ----\n{out[-20000:]}\n")
            if err:
                stream.write(f"---- its stderr ----\n{err[-20000:]}\n")
            stream.write("---- stacks (most recent call first) ----\n")
            stream.flush()
            faulthandler.dump_traceback(file=stream, all_threads=True)
            dump_tasks(stream)
            stream.write(f"{line} FAILED (stuck): {self.item.nodeid} {line}\n")
            stream.flush()
        with contextlib.suppress(Exception):  # the agents it started would outlive us
            for child in psutil.Process().children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child.kill()
        os._exit(3)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    timeout = item_timeout(item)
    if timeout is None:
        yield
        return
    dog = Watchdog(item, timeout, GRACE)
    dog.start()
    try:
        yield
    finally:
        dog.stop()

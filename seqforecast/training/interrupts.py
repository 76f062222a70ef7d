"""Stop a run cleanly on SIGINT or SIGTERM: the loop finishes its step, writes a checkpoint,
closes its writer and exits with a message saying how to resume. A second signal stops at
once (KeyboardInterrupt)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(Exception):
    """Raised by the loop after it saved its state; `signum` says which signal."""

    def __init__(self, signum: int, epoch: int, step: int):
        self.signum, self.epoch, self.step = signum, epoch, step
        name = signal.Signals(signum).name
        super().__init__(f"{name} received: stopped at epoch {epoch}, step {step}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


class StopRequest:
    def __init__(self):
        self.signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None


@contextmanager
def stop_on_signals():
    """Yield a StopRequest that turns true when SIGINT/SIGTERM arrives. Handlers are only
    installed in the main thread (signals cannot be caught elsewhere) and are restored after."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handle(signum, frame):
        if request:
            raise KeyboardInterrupt  # second signal: stop now
        request.signum = signum

    previous = {s: signal.signal(s, handle) for s in SIGNALS}
    try:
        yield request
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)

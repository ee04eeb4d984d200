"""Who owns Ctrl-C in this process, and what it does when (issue #31): quiet while no command runs
(exit 130, `interrupted`), a KeyboardInterrupt the running command handles, and never a traceback.
Imported first by the package (cli/__init__.py), before anything slow: it imports nothing of pithledger."""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_quietly(signum: int, frame: object) -> None:
    """SIGINT while no command runs (its imports, or the exit after it): nothing is open and
    nothing is half-done, so the process ends at once, as a command interrupted does."""
    os.write(2, b"interrupted\n")
    os._exit(130)


def _launched_as_command() -> bool:
    """This package is being imported by the console script (``pithledger``, whose wrapper imports
    it, then calls :func:`main`) or by ``python -m pithledger.cli`` (argv[0] is "-m" while the module
    is looked up): not by a program that uses it in-process, whose signal handlers are its own."""
    first = sys.argv[0] if sys.argv else ""
    return first == "-m" or os.path.basename(first).split(".")[0] in ("pithledger", "pithledger-script")


# At once, before this module's other imports (take_interrupts() below does the rest): a Ctrl-C in
# them printed a KeyboardInterrupt traceback (bench/bench_interrupt.py, under load).
if _launched_as_command() and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
    signal.signal(signal.SIGINT, _interrupted_quietly)

import atexit  # noqa: E402 - after the handler: a Ctrl-C in this import printed a traceback (bench/bench_interrupt.py)
from typing import Any  # noqa: E402

#: This process is the command line (the console script, ``python -m pithledger.cli``, or main()):
#: its SIGINT handling is ours. Not so for a program that runs the typer app in-process.
_owns_sigint = False


def take_interrupts() -> None:
    """The command line owns Ctrl-C in this process; quiet until a command runs (issue #31).
    A Ctrl-C ignored by whoever started the process (``nohup``, ``cmd &`` in a script) stays ignored."""
    global _owns_sigint
    try:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            return
    except ValueError:  # pragma: no cover - off the main thread
        return
    if not _owns_sigint:
        _owns_sigint = True
        # Registered first, so it runs last of the exit handlers (after the pools' joins, which a
        # Ctrl-C still cuts short): from there Python's own teardown, which puts SIGINT back to its
        # default before it is done, would end silently killed by SIGINT instead of with the exit code.
        atexit.register(_set_sigint, signal.SIG_IGN)
    quiet_interrupts()


def quiet_interrupts() -> None:
    """Until a command runs, and again once it has finished, Ctrl-C ends the process quietly (exit
    130, `interrupted`), never with a KeyboardInterrupt traceback out of an import, out of argument
    parsing (typer turns it into a silent exit 130 there) or out of an exit handler (issue #31)."""
    _set_sigint(_interrupted_quietly)


def interruptible() -> None:
    """From here (cli/_base.py _run) a Ctrl-C is a KeyboardInterrupt, which the command in progress
    handles: it stops where it is consistent, names what it did, exits 130."""
    _set_sigint(signal.default_int_handler)


def _set_sigint(handler: Any) -> None:
    if not _owns_sigint:
        return
    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # pragma: no cover - off the main thread: not ours to set
        pass


# --- SIGTERM in follow mode (issue #33) ------------------------------------------------------------------

#: SIGTERM arrived while a follow loop ran: the run it ended exits 0, not 130.
_terminated = False


def terminated() -> bool:
    """Whether a follow loop was told to stop by SIGTERM (its run's KeyboardInterrupt is a clean stop)."""
    return _terminated


def stop_on_sigterm(stop: Any, running: Any) -> Any:
    """Until the returned callable restores the previous handler: SIGTERM sets ``stop`` (a
    threading.Event ending the follow loop's wait) and, when ``running()`` says a run is in progress,
    raises KeyboardInterrupt in it once, so it commits its batch and stops as it does on Ctrl-C."""

    def on_term(signum: int, frame: object) -> None:
        global _terminated
        first = not _terminated
        _terminated = True
        stop.set()
        if first and running():
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)

    def restore() -> None:
        # Once asked to stop, a second SIGTERM is ignored while the process ends: GNU timeout (and a kill of the
        # process group) delivers it twice, and the second, landing after the previous handler was back, killed the
        # process on its way to exit 0 (exit 143 under load).
        signal.signal(signal.SIGTERM, signal.SIG_IGN if _terminated else previous)

    return restore

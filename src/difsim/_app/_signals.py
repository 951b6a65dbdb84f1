"""SIGTERM, a batch scheduler's stop (Slurm, PBS, Kubernetes, `kill`), handled as Ctrl-C.

Python turns Ctrl-C (SIGINT) into `KeyboardInterrupt`, which unwinds the run: every `with`
block closes (the output's lock is released and its file removed, a Monte Carlo sweep saves
its statistics), and the command prints one line and exits with 130. SIGTERM's default ends
the process at once, leaving the lock file behind and saying nothing. While the `difsim`
command runs, [`sigterm_as_interrupt`][] makes SIGTERM raise [`Terminated`][] (a
`KeyboardInterrupt`) instead, so the same cleanup runs; the command then exits with 143
(128 + 15, the shell's code for a process ended by SIGTERM, which schedulers report as
such).

Only the command line installs the handler, in its main thread, and puts back the one it
found afterwards: `import difsim` and the library's functions never touch the process's
signal handlers.
"""

import contextlib
import signal
import threading
from collections.abc import Iterator

EXIT_CODE = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM while the `difsim` command runs."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within this block (in the main thread; elsewhere it does nothing), SIGTERM raises
    [`Terminated`][] once: a second SIGTERM while the run cleans up is ignored, so the
    cleanup is not cut short. The previous handler is restored on leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def terminate(signum, frame):
        nonlocal raised
        if not raised:
            raised = True
            raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        # `None`: a handler not installed from Python; the default is the best restore.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)

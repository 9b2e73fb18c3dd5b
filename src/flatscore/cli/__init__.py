"""The `flatscore` command. Bad input ends in one clear line on stderr and exit code 2; a file
system refusal (cannot write the output folder), or a run whose every episode failed on its
endpoint, in one line and exit code 1."""

from __future__ import annotations

import signal
import sys

from flatscore.cli.app import app, err_console
from flatscore.cli.flags import flagged
from flatscore.cli.legacy import rewrite
from flatscore.console import styled
from flatscore.errors import InputError, RunFailed

# Command modules register on `app` when their command is used (`flatscore.cli.lazy`).

__all__ = ["app", "main"]


def main() -> None:
    # Ctrl-C (and --time-limit, which sends SIGINT) must reach a run even when the parent left
    # SIGINT blocked: a signal mask is inherited, and a process that loaded native thread
    # pools (llama.cpp in a test worker) can start its children with SIGINT blocked.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    # Likewise an inherited "ignore SIGINT" (Python keeps SIG_IGN when it starts with it).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    argv, renamed = rewrite(sys.argv[1:])
    for warning in renamed:
        err_console.print(styled(("warning:", "yellow"), " ", warning))
    try:
        app(args=argv)
    except InputError as exc:
        err_console.print(styled(("error:", "bold red"), " ", flagged(exc).one_line()))
        sys.exit(2)
    except RunFailed as exc:
        err_console.print(styled(("error:", "bold red"), " ", str(exc)))
        sys.exit(1)
    except OSError as exc:
        # The file system refused (an output folder that is a file, no permission, a full
        # disk): which path and why in one line, not a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        err_console.print(styled(("error:", "bold red"), " ", f"{where}{exc.strerror or exc}"))
        sys.exit(1)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)

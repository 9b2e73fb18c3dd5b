"""The `flatscore` command. Bad input ends in one clear line on stderr and exit code 2; a file
system refusal (cannot write the output folder) in one line and exit code 1."""

from __future__ import annotations

import sys

from flatscore.cli.app import app, err_console
from flatscore.console import styled
from flatscore.errors import InputError

# Each module registers its commands on `app` when imported.
from flatscore.cli import commands_import  # noqa: F401  isort: skip
from flatscore.cli import commands_inspect  # noqa: F401  isort: skip
from flatscore.cli import commands_analyze  # noqa: F401  isort: skip
from flatscore.cli import commands_serve  # noqa: F401  isort: skip
from flatscore.cli import commands_report  # noqa: F401  isort: skip
from flatscore.cli import commands_run  # noqa: F401  isort: skip
from flatscore.cli import commands_demo  # noqa: F401  isort: skip
from flatscore.cli import commands_train  # noqa: F401  isort: skip
from flatscore.cli import commands_margins  # noqa: F401  isort: skip
from flatscore.cli import commands_repair  # noqa: F401  isort: skip
from flatscore.cli import commands_gate  # noqa: F401  isort: skip
from flatscore.cli import commands_archive  # noqa: F401  isort: skip

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except InputError as exc:
        err_console.print(styled(("error:", "bold red"), " ", exc.one_line()))
        sys.exit(2)
    except OSError as exc:
        # The file system refused (an output folder that is a file, no permission, a full
        # disk): which path and why in one line, not a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        err_console.print(styled(("error:", "bold red"), " ", f"{where}{exc.strerror or exc}"))
        sys.exit(1)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)

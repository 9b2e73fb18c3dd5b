"""Output for people: consoles where data is always text, progress bars, and nothing from
third parties.

- **Data is text.** Paths, arm, model, domain and termination-reason names come from users
  and files; a `[/]` in any of them crashed rich's markup parser, and `results[run1].json`
  printed as `results.json`. Every console flatscore prints through is made here with markup,
  emoji codes and highlighting off, so a plain string prints exactly as it is; styling is
  explicit, with `styled`.
- **Third-party noise.** transformers and its friends print deprecation warnings
  (`is_gradient_checkpointing` is deprecated ...) and tqdm bars ("Loading weights") while a
  model loads; `quiet_third_party()` turns both off before they are imported (environment
  variables, inherited by worker processes) and after (their own switches). Some bars are
  plain tqdm, outside transformers' switch (the first load of a GGUF prints "Converting and
  de-quantizing GGUF tensors"): `TQDM_DISABLE` turns those off, read when tqdm is imported.
- **Width.** rich wraps at 80 columns when output is not a terminal, which breaks lines in
  the middle of a sentence (`reference arm` / `'ref'`) in logs and pipes. `make_console()`
  gives a console that never wraps prose (`soft_wrap`) and lays tables out at `PIPE_WIDTH`
  columns when piped (a terminal's own width otherwise; `COLUMNS` wins over both). typer's
  `--help` has a console of its own; the CLI gives it `pipe_width()` too.
- **Progress.** `progress()` is the one progress-bar layout (runs and training). On a
  console that is not a terminal (`make demo | tee log`, a CI log) rich draws nothing until
  the run ends, so there it prints plain lines instead (`PlainProgress`): one per bar every
  `FLATSCORE_PROGRESS_EVERY_S` seconds (default 30) and once at the end.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from datetime import timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

PIPE_WIDTH = 200
PLAIN_EVERY_S = 30.0  # seconds between plain progress lines (FLATSCORE_PROGRESS_EVERY_S)
_NOISY = r"(transformers|peft|accelerate|torch|huggingface_hub|torchao)(\..*)?$"


def quiet_third_party() -> None:
    """Silence third-party warnings, log lines and progress bars for this process and the
    processes it starts. flatscore's own warnings are left alone."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TQDM_DISABLE", "1")  # flatscore's own bars are rich, not tqdm
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category, module=_NOISY)
    for name in ("transformers", "peft", "accelerate", "huggingface_hub", "torchao"):
        logging.getLogger(name).setLevel(logging.ERROR)
    hf_logging = sys.modules.get("transformers.utils.logging")
    if hf_logging is not None:  # imported already: the environment came too late
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


def pipe_width(stream: object) -> int | None:
    """`PIPE_WIDTH` where `stream` is not a terminal and `COLUMNS` is unset; else None
    (rich then asks the terminal, or reads `COLUMNS`)."""
    isatty = getattr(stream, "isatty", None)
    piped = not (callable(isatty) and isatty())
    return PIPE_WIDTH if piped and "COLUMNS" not in os.environ else None


def make_console(*, stderr: bool = False) -> Console:
    """A console for people: strings print literally (no markup, emoji codes or
    highlighting), prose never wraps, piped output is `PIPE_WIDTH` wide."""
    width = pipe_width(sys.stderr if stderr else sys.stdout)
    return Console(
        stderr=stderr,
        soft_wrap=True,
        width=width,
        markup=False,
        emoji=False,
        highlight=False,
    )


def styled(*parts: str | tuple[str, str]) -> Text:
    """Literal text with explicit styles: `styled(("error:", "bold red"), " ", message)`."""
    return Text.assemble(*parts)


def _clock(seconds: float | None) -> str:
    return "-:--:--" if seconds is None else str(timedelta(seconds=int(seconds)))


class PlainProgress(Progress):
    """The bars' tasks, printed as plain lines (`all cells 12/40 ok 9 elapsed 0:03:10 eta
    0:07:00`) every `every_s` seconds from a timer thread, and once more when it stops;
    nothing is redrawn, so a log gets one readable line per bar and interval."""

    def __init__(self, console: Console, fields: str, every_s: float) -> None:
        super().__init__(console=console, disable=True)  # rich's display off; tasks kept
        self.fields = fields
        self.every_s = every_s
        self._stopped = threading.Event()
        self._timer: threading.Thread | None = None

    def line(self, task: Task) -> str:
        total = "?" if task.total is None else f"{task.total:g}"
        parts = [task.description, f"{task.completed:g}/{total}", self.fields.format(task=task)]
        parts += [f"elapsed {_clock(task.elapsed)}", f"eta {_clock(task.time_remaining)}"]
        return " ".join(p for p in parts if p)

    def print_lines(self) -> None:
        for task in self.tasks:
            self.console.print(Text(self.line(task)), soft_wrap=True)

    def _tick(self) -> None:
        while not self._stopped.wait(self.every_s):
            self.print_lines()

    def start(self) -> None:
        self._stopped.clear()
        self._timer = threading.Thread(target=self._tick, name="flatscore-progress", daemon=True)
        self._timer.start()

    def stop(self) -> None:
        if self._timer is None:
            return
        self._stopped.set()
        self._timer.join()
        self._timer = None
        self.print_lines()


def plain_every_s() -> float:
    """`FLATSCORE_PROGRESS_EVERY_S` if it is a positive number, else `PLAIN_EVERY_S`."""
    try:
        value = float(os.environ.get("FLATSCORE_PROGRESS_EVERY_S", PLAIN_EVERY_S))
    except ValueError:
        return PLAIN_EVERY_S
    return value if value > 0 else PLAIN_EVERY_S


def progress(console: Console, fields: str, *, enabled: bool = True) -> Progress:
    """Bars as `description ━━━━ done/total <fields> elapsed eta remaining`; `fields` is a
    rich template over the task's fields (`"ok {task.fields[ok]}"`). The description is
    data (a domain or arm name) and prints literally. On a console that is not a terminal,
    plain lines every `plain_every_s()` seconds instead (`PlainProgress`)."""
    if enabled and not console.is_terminal:
        return PlainProgress(console, fields, plain_every_s())
    return Progress(
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(fields),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
    )

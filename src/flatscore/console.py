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
  columns when piped (a terminal's own width otherwise; `COLUMNS` wins over both).
- **Progress.** `progress()` is the one progress-bar layout (runs and training).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

PIPE_WIDTH = 200
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


def make_console(*, stderr: bool = False) -> Console:
    """A console for people: strings print literally (no markup, emoji codes or
    highlighting), prose never wraps, piped output is `PIPE_WIDTH` wide."""
    stream = sys.stderr if stderr else sys.stdout
    piped = not (hasattr(stream, "isatty") and stream.isatty())
    width = PIPE_WIDTH if piped and "COLUMNS" not in os.environ else None
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


def progress(console: Console, fields: str, *, enabled: bool = True) -> Progress:
    """Bars as `description ━━━━ done/total <fields> elapsed eta remaining`; `fields` is a
    rich template over the task's fields (`"ok {task.fields[ok]}"`). The description is
    data (a domain or arm name) and prints literally."""
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

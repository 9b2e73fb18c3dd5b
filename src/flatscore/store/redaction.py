"""Scrub secrets from text flatscore writes: errors, episode metadata, caches and logs.

An endpoint may echo the request's `Authorization` header back in an error body; that text
then travels into `BackendError`, `metadata.error` and the run file. Two rules catch it:
every configured key value (registered when a backend reads it) and anything shaped like an
authorization credential (`Bearer …`, `Authorization: …`, `api-key: …`) become `***`.

Registration is process-wide and lasts the process (a key may be echoed at any later time);
`secrets_scope` bounds it where one process does unrelated jobs in turn (the test suite: a
key a test registers must not mask another test's episodes).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator

MASK = "***"
_MIN_SECRET_LEN = 8  # shorter values would mask ordinary words

_PATTERNS = re.compile(
    r"(?i)"
    r"(?P<auth>\b(?:authorization|proxy-authorization|x-api-key|api[-_]?key)"
    r"(?:\\?[\"'])?\s*[:=]\s*(?:\\?[\"'])?\s*)"
    r"(?:(?:bearer|basic|token)\s+)?[^\s\"'\\,;}]+"
    r"|(?P<bearer>\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}"
)

_lock = threading.Lock()
_known: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a key value so that `scrub` masks it wherever it appears."""
    if value and len(value) >= _MIN_SECRET_LEN:
        with _lock:
            _known.add(value)


@contextlib.contextmanager
def secrets_scope() -> Iterator[None]:
    """Forget, at the end of the block, the secrets registered inside it."""
    with _lock:
        before = set(_known)
    try:
        yield
    finally:
        with _lock:
            _known.intersection_update(before)


def _mask_match(m: re.Match[str]) -> str:
    prefix = m.group("auth") or m.group("bearer") or ""
    return prefix + MASK


def scrub(text: str) -> str:
    """`text` with registered secrets and authorization credentials replaced by `***`."""
    if not text:
        return text
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, MASK)
    return _PATTERNS.sub(_mask_match, text)

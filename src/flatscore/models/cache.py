"""An on-disk response cache (SQLite), so reruns of a study are exact and free.

Keyed by a hash of the full request (endpoint URL + body). The API key travels in a header
and is never part of the key; what is stored is scrubbed of secrets (`flatscore.store.redaction`),
so a response that echoes a credential never lands on disk.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from flatscore.store.redaction import scrub

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    latency_s REAL NOT NULL,
    created REAL NOT NULL
)
"""


def request_key(request: dict[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """Thread-safe; one connection guarded by a lock (writes are tiny and rare)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)

    def get(self, request: dict[str, Any]) -> tuple[dict[str, Any], float] | None:
        """The stored response body and its original latency, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT response, latency_s FROM responses WHERE key = ?", (request_key(request),)
            ).fetchone()
        return (json.loads(row[0]), float(row[1])) if row else None

    def put(self, request: dict[str, Any], response: dict[str, Any], latency_s: float) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (
                    request_key(request),
                    scrub(json.dumps(request, sort_keys=True)),
                    scrub(json.dumps(response)),
                    latency_s,
                    time.time(),
                ),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

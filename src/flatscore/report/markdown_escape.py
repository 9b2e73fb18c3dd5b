"""Model-generated text made literal for Markdown (summary.md, the report's tables).

Its own module so that every writer of Markdown (summary.md, the cost section) can use it
without importing the others.
"""

from __future__ import annotations

import re

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_escape(text: str) -> str:
    """Text that Markdown renders literally inside a line: emphasis, code, link and table
    characters backslashed, `<`/`&` as entities (so no HTML and no autolinks)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;")
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))

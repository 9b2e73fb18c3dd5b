"""The suite runs with --import-mode=importlib, which leaves sys.path alone: make the episode
builders next to this file importable by the analysis test modules."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

"""The suite runs with --import-mode=importlib, which leaves sys.path alone, so this folder
(the damage generator) is added here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))

"""One thread for torch (the CPU is shared); the suite runs with --import-mode=importlib,
which leaves sys.path alone, so the tiny-model helper's folder is added here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))

import torch

torch.set_num_threads(1)

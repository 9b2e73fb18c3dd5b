"""One thread for torch (the CPU is shared). The tiny-model helper next to this file is
importable because pytest's default import mode puts a test's own folder on sys.path."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

torch.set_num_threads(1)

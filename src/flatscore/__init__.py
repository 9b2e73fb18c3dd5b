"""flatscore: what quantization does to a tool-calling agent beyond the final score.

The public API is the names in `__all__` here and in the `__all__` of the public packages
(`flatscore.analysis`, `formats`, `report`, `study`, `run`, `models`, `models.quant`,
`agents`, `users`, `domains`); every other module path is internal and may change between
versions (docs/api.md). Names load on first use, so `import flatscore` stays light: the
analysis never imports torch, a study file loads without the episode machinery.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # episodes and run files
    "Episode": "flatscore.episode",
    "InputError": "flatscore.errors",
    "load_runs": "flatscore.formats",
    # files -> analysis -> report
    "analyze_runs": "flatscore.formats.pipeline",
    "analyze": "flatscore.analysis.analyze",
    "AnalysisSettings": "flatscore.analysis.settings",
    "AnalysisResult": "flatscore.analysis.result",
    "write_report": "flatscore.report",
    # studies
    "Study": "flatscore.study",
    "load_study": "flatscore.run.study",
    "run_study": "flatscore.run.driver",
    # plug-ins
    "register_agent": "flatscore.agents.base",
    "register_backend": "flatscore.models.shared",
    "register_arm": "flatscore.models.quant.arms",
    "load_rules": "flatscore.analysis.channels",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'flatscore' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)

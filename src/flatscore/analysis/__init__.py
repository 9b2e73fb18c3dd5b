"""The diagnostic core: per-call channels, S(K), amplification, invariance, recovery, pass^k
and paired statistics, from canonical episodes to an `AnalysisResult`.

Public names: `__all__` (docs/api.md); `analyze` itself is `flatscore.analyze`."""

from flatscore.analysis.channels import ChannelRules, load_rules
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.settings import AnalysisSettings

__all__ = ["AnalysisResult", "AnalysisSettings", "ChannelRules", "load_rules"]

"""The diagnostic core: per-call channels, S(K), amplification, invariance, recovery, pass^k
and paired statistics, from canonical episodes to an `AnalysisResult`."""

from flatscore.analysis.result import AnalysisResult

__all__ = ["AnalysisResult"]

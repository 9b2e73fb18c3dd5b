"""τ²-bench run live by flatscore: a study's `tau2:<domain>` domains, every arm against its
own endpoint, τ²'s code unchanged (see `runner` and docs/tau2-live.md). Needs the optional
`tau2` extra only when such a study runs; the study schema (`flatscore.study.tau2`) never
imports τ²."""

from flatscore.study.tau2 import (
    TAU2_PREFIX,
    Tau2Spec,
    Tau2UserSpec,
    check_tau2_domains,
    is_tau2_domain,
    tau2_domain,
)

__all__ = [
    "TAU2_PREFIX",
    "Tau2Spec",
    "Tau2UserSpec",
    "check_tau2_domains",
    "is_tau2_domain",
    "tau2_domain",
]

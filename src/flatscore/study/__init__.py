"""The study file's schema, as data: pydantic models and nothing that runs.

What a study says (`Study` and its sections), how a model is reached (`BackendSpec`,
`Endpoint`, `SamplingSpec`), what an arm's agent adds (`InjectSpec`, `RepairConfig`) and
τ²-bench's section (`Tau2Spec`). Nothing here imports a registry, a backend, an executor
or an episode source: `models`, `agents` and `run` import this package, never the other way.
The checks that need the registries run where a study is loaded (`flatscore.run.study`).
"""

from flatscore.study.agent import REPAIR_CHANNELS, InjectRates, InjectSpec, RepairConfig
from flatscore.study.backend import BackendSpec, Endpoint, SamplingSpec
from flatscore.study.schema import (
    AGENT_KIND,
    CONTROL_SEED_OFFSET,
    DEFAULT_STUDY_NAME,
    ArmSpec,
    ErrorBudgetSpec,
    ExecutorSpec,
    ModelSpec,
    RepairSpec,
    RunSettings,
    Study,
    UserSpec,
    study_from_json,
    study_json,
)
from flatscore.study.tau2 import Tau2Spec, Tau2UserSpec

__all__ = [
    "AGENT_KIND",
    "CONTROL_SEED_OFFSET",
    "DEFAULT_STUDY_NAME",
    "REPAIR_CHANNELS",
    "ArmSpec",
    "BackendSpec",
    "Endpoint",
    "ErrorBudgetSpec",
    "ExecutorSpec",
    "InjectRates",
    "InjectSpec",
    "ModelSpec",
    "RepairConfig",
    "RepairSpec",
    "RunSettings",
    "SamplingSpec",
    "Study",
    "Tau2Spec",
    "Tau2UserSpec",
    "UserSpec",
    "study_from_json",
    "study_json",
]

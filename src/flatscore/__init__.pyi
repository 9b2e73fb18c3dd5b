# Types of the public names `flatscore/__init__.py` loads on first use (its `_EXPORTS`).
from flatscore.agents.base import register_agent as register_agent
from flatscore.analysis.analyze import analyze as analyze
from flatscore.analysis.channels import load_rules as load_rules
from flatscore.analysis.result import AnalysisResult as AnalysisResult
from flatscore.analysis.settings import AnalysisSettings as AnalysisSettings
from flatscore.episode import Episode as Episode
from flatscore.errors import InputError as InputError
from flatscore.formats import load_runs as load_runs
from flatscore.formats.pipeline import analyze_runs as analyze_runs
from flatscore.models.quant.arms import register_arm as register_arm
from flatscore.models.shared import register_backend as register_backend
from flatscore.report import write_report as write_report
from flatscore.run.driver import run_study as run_study
from flatscore.run.study import load_study as load_study
from flatscore.study import Study as Study

__version__: str
__all__: list[str]

"""The one pydantic base of flatscore's own models: unknown fields are an error.

Every boundary type (episodes, study files, run settings, domain data) derives from
`StrictModel`, so a misspelt key in a file is reported (as one line, through
`flatscore.errors.from_validation`) instead of being dropped silently. A model that reads
someone else's format (τ² results) overrides `model_config` to ignore what it does not use.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A pydantic model that refuses unknown fields."""

    model_config = ConfigDict(extra="forbid")

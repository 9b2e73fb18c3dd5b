"""The JSON Schema of analysis.json, generated from the pydantic models.

Regenerate the committed copy with `python -m tools.regenerate schema` (from the repository);
a test fails when it is out of date.
"""

from __future__ import annotations

import json

from flatscore.analysis.result import AnalysisResult


def schema_text() -> str:
    schema = AnalysisResult.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "flatscore analysis.json"
    return json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=True) + "\n"

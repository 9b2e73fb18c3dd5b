"""`flatscore serve`: local arms behind an OpenAI-compatible HTTP endpoint.

`app` (routes and responses), `guard` (who may call, and how much), `request` (the strict
request schema), `wire` (OpenAI's message shapes, shared with the `openai` backend) and
`cancel` (stopping a generation whose client left). The backends live in `flatscore.models`.
"""

"""`flatscore import ...` (filled in by the importer work)."""

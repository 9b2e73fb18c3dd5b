"""Run files on disk: the append-only JSONL store (`jsonl`), guarded readers for files
nobody vouches for (`inputs`), secret scrubbing of what is written (`redaction`) and run
archives kept in git (`archive`)."""

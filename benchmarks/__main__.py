"""`python -m benchmarks NAME [options]`: see benchmarks/__init__.py."""

from benchmarks.harness import main

raise SystemExit(main())

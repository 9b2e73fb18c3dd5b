"""flatscore's benchmarks: one module per measurement, run on demand, never in the test suite.

    python -m benchmarks --list              # every benchmark and what it measures
    python -m benchmarks NAME --help         # what NAME measures, how, and its options
    python -m benchmarks NAME [options]      # run it; it ends with its Markdown table(s)

Run them from the repository root with the package installed (`make test` builds .venv;
`.venv/bin/python -m benchmarks ...`); most want `OMP_NUM_THREADS=1`. docs/benchmarks.md
holds each benchmark's current table and the command that reproduced it.
"""

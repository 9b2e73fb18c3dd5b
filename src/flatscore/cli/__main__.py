"""`python -m flatscore.cli`: the `flatscore` command."""

from flatscore.cli import main

main()

"""When a sequential test decides damage: flatscore's sequential verdicts beside evalsig 0.1.2's
`sequential_gate` on the same per-task differences (docs/analysis.md, "Sequential verdicts").

    python benchmarks/peers/sequential_stops.py [--studies 1000] [--look-every 6]
        [--first-look N] [--gamma-damage G] [--peers-python /tmp/peers/bin/python]

Simulates studies of 114 tasks × 4 trials with the model of tests/sequential_model.py, decides
each with flatscore's sequential procedure (one comparison per study) and hands the per-task
differences ref − arm to evalsig's `sequential_gate` (α = 0.05, `alternative="greater"`,
its defaults ρ = 1 and a 30-item warm-up, looking after every task) in a scratch
environment that holds evalsig, never flatscore (benchmarks/peers/requirements.txt). Prints
one markdown row per condition: how often each decides damage and its median tasks
(undecided studies counted at 114).

With `--evalsig FILE.npy` it is the peers' side: it reads the differences (studies × tasks)
and prints the tasks at which evalsig stopped (114 when it never did), as JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

TASKS = 114
CONDITIONS = (
    ("no gap, independent, s = 0.6", 0.0, 0.6, 0.0),
    ("7.5-point gap, independent, s = 0.6", 0.075, 0.6, 0.0),
    ("10-point gap, independent, s = 0.6", 0.1, 0.6, 0.0),
    ("20-point gap, independent, s = 0.6", 0.2, 0.6, 0.0),
    ("10-point gap, coupled, s = 0.9", 0.1, 0.9, 0.75),
    ("20-point gap, coupled, s = 0.9", 0.2, 0.9, 0.75),
)


def evalsig_side(path: str) -> None:
    import evalsig  # the peers' environment only

    differences = np.load(path)
    stops = []
    for row in differences:
        out = evalsig.sequential_gate(row, alpha=0.05, alternative="greater")
        stops.append(int(out.n_pairs) if out.stopped else TASKS)
    json.dump(stops, sys.stdout)


def flatscore_side(args: argparse.Namespace) -> None:
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tests"))
    from flatscore.analysis.sequential import SequentialDesign, decide, look_stats
    from sequential_model import simulate

    design = SequentialDesign(
        look_every=args.look_every, first_look=args.first_look, gamma_damage=args.gamma_damage
    )
    rng = np.random.default_rng(args.seed)
    print(
        "| condition | evalsig: damage decided | its median tasks "
        "| flatscore: damage decided | its median tasks |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, gap, s, coupling in CONDITIONS:
        c = simulate(rng, args.studies, gap, s, coupling)
        d, failed_arm, calls_arm, failed_ref, calls_ref = c.arrays()
        stats = look_stats(
            d, failed_arm, calls_arm, failed_ref, calls_ref, design, channels=c.channels()
        )
        dec = decide([stats], design)
        damage = dec.verdict[:, 0] == 1
        ours = np.where(damage, dec.tasks([stats.counts])[:, 0], TASKS)
        cache = Path(args.cache or ".") / f"evalsig-{args.seed}-{args.studies}-{name}.json"
        if args.cache and cache.exists():  # the same seed draws the same studies
            theirs = np.array(json.loads(cache.read_text()))
        else:
            with tempfile.NamedTemporaryFile(suffix=".npy") as f:
                np.save(f.name, c.differences)
                out = subprocess.run(
                    [args.peers_python, __file__, "--evalsig", f.name],
                    check=True,
                    capture_output=True,
                    text=True,
                )
            theirs = np.array(json.loads(out.stdout))
            if args.cache:
                cache.write_text(out.stdout)
        print(
            f"| {name} | {100 * np.mean(theirs < TASKS):.1f}% | {np.median(theirs):g} "
            f"| {100 * damage.mean():.1f}% | {np.median(ours):g} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evalsig", help="the peers' side: differences (.npy) to stop on")
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=47)
    parser.add_argument("--look-every", type=int, default=6)
    parser.add_argument("--first-look", type=int, default=None)
    parser.add_argument("--gamma-damage", type=float, default=-2.0)
    parser.add_argument("--peers-python", default="/tmp/peers/bin/python")
    parser.add_argument("--cache", help="a folder to keep evalsig's stops in, per condition")
    args = parser.parse_args()
    if args.evalsig:
        evalsig_side(args.evalsig)
    else:
        flatscore_side(args)


if __name__ == "__main__":
    main()

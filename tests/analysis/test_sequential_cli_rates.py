"""`flatscore analyze --sequential` decides exactly as the sequential procedure
(`sequential.decide`, then `sequential_replay.at_maximum` at the design's maximum) on 216
synthetic studies of 114 tasks × 4 trials written task by task (tests/sequential_model.py;
six conditions of the seeded simulation in test_sequential.py, 36 studies each), each study
read alone through the command line: so the rates the simulation measures on the procedure
are the command line's. Slow (a few minutes: one command per study)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from analysis_builders import episode
from flatscore.analysis.sequential import VERDICTS, SequentialDesign, decide, look_stats
from flatscore.analysis.sequential_channels import ChannelCounts
from flatscore.analysis.sequential_replay import at_maximum
from flatscore.analysis.stats import stable_rng
from flatscore.cli.app import app
from sequential_model import PLANTED, Comparisons, simulate

TASKS, TRIALS, STUDIES = 114, 4, 36
CHANNEL_OF = ("bad_arguments", "entity_not_found", "precondition", "other", "other")
"""The model's five channels as the environment records them (the last two merged)."""
CONDITIONS = {  # name → (gap, success, coupling, ratio, channel ratios)
    "flat": (0.0, 0.9, 0.75, 1.0, None),
    "flat_independent": (0.0, 0.6, 0.0, 1.0, None),
    "gap20": (0.2, 0.6, 0.0, 1.0, None),
    "margin": (0.075, 0.6, 0.75, 1.0, None),
    "doubled": (0.0, 0.9, 0.75, 2.0, None),
    "planted": (0.0, 0.9, 0.75, 1.0, PLANTED),
}


def _episodes(c: Comparisons, i: int, rng: np.random.Generator) -> list[str]:
    """Study i of `c` as JSONL lines; each failed call in the channel the model drew (its
    place among the episode's calls is arbitrary)."""
    lines = []
    for t in range(TASKS):
        for arm, ok, failures in (
            ("ref", c.outcomes_ref, c.channel_failures_ref),
            ("q", c.outcomes_arm, c.channel_failures_arm),
        ):
            for trial in range(TRIALS):
                kinds = [
                    CHANNEL_OF[j] for j, n in enumerate(failures[i, :, t, trial]) for _ in range(n)
                ]
                calls = [("get_user", k) for k in kinds] + [("get_user", "ok")] * (
                    c.calls - len(kinds)
                )
                order = rng.permutation(len(calls))
                ep = episode(
                    arm,
                    f"t{t:03d}",
                    trial,
                    [calls[j] for j in order],
                    success=bool(ok[i, t, trial]),
                )
                lines.append(ep.model_dump_json() + "\n")
    return lines


def _core(c: Comparisons, i: int, seed: int) -> tuple[str, bool, int]:
    """The procedure on the model's own per-task numbers, in the order the replay reads a
    study that did not run sequentially."""
    order = stable_rng(seed, "sequential", "m", "retail").permutation(TASKS)
    merged = np.stack(
        [
            c.channel_arm[i, 0],
            c.channel_arm[i, 1],
            c.channel_arm[i, 2],
            c.channel_arm[i, 3] + c.channel_arm[i, 4],
        ]
    )
    merged_ref = np.stack(
        [
            c.channel_ref[i, 0],
            c.channel_ref[i, 1],
            c.channel_ref[i, 2],
            c.channel_ref[i, 3] + c.channel_ref[i, 4],
        ]
    )
    calls = np.full((4, TASKS), float(c.calls))
    channels = ChannelCounts(
        tuple(dict.fromkeys(CHANNEL_OF)), merged[:, order], calls, merged_ref[:, order], calls
    )
    design = SequentialDesign()
    stats = look_stats(*(a[i, order] for a in c.arrays()), design, channels=channels)
    dec = decide([stats], design)
    return VERDICTS[int(dec.verdict[0])], bool(dec.decided[0]), int(dec.tasks([stats.counts])[0])


@pytest.mark.slow
def test_the_command_line_decides_as_the_procedure(tmp_path: Path) -> None:
    rng = np.random.default_rng(4747)
    tally: dict[str, dict[str, int]] = {}
    for name, (gap, s, coupling, ratio, channel_ratios) in CONDITIONS.items():
        c = simulate(
            rng, STUDIES, gap, s, coupling, ratio, TASKS, TRIALS, channel_ratios=channel_ratios
        )
        for i in range(STUDIES):
            runs = tmp_path / f"{name}-{i}.jsonl"
            runs.write_text("".join(_episodes(c, i, rng)), encoding="utf-8")
            out = tmp_path / f"{name}-{i}.json"
            app(
                [
                    "analyze",
                    str(runs),
                    "--reference",
                    "ref",
                    "--bootstrap",
                    "100",
                    "--sequential",
                    "--json",
                    str(out),
                ],
                standalone_mode=False,
            )
            result = json.loads(out.read_text("utf-8"))
            assert result["settings"]["default_K"] >= c.calls  # S(K) at the default K = success
            s_obj = result["cells"][0]["comparisons"][0]["sequential"]
            got = (s_obj["verdict"], s_obj["decided"], s_obj["tasks"])
            verdict, decided, tasks = _core(c, i, result["settings"]["seed"])
            # at the maximum it clears only what the fixed design clears (`at_maximum`)
            fixed = result["cells"][0]["comparisons"][0]["verdict"]
            verdict = at_maximum(verdict, tasks == TASKS, fixed)  # type: ignore[arg-type]
            assert got == (verdict, decided and verdict != "inconclusive", tasks), (name, i)
            counts = tally.setdefault(name, {})
            counts[got[0]] = counts.get(got[0], 0) + 1
    print(tally)
    # the conditions' verdicts as the simulation has them (coarsely: 36 studies each)
    assert tally["gap20"].get("visible damage", 0) == STUDIES
    assert tally["flat"].get("no damage detected", 0) >= 0.8 * STUDIES
    assert tally["doubled"].get("flat score, amplified failures", 0) >= 0.8 * STUDIES
    assert tally["planted"].get("flat score, amplified failures", 0) >= 0.8 * STUDIES
    assert tally["margin"].get("no damage detected", 0) <= 0.15 * STUDIES

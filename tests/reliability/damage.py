"""A seeded generator of damaged τ² result files and run files, each with what flatscore
must do with it.

Every case is a file (or directory, FIFO…) plus an expectation:
- `ok`: the command succeeds with exactly `episodes` episodes (and, for τ² imports, the
  listed rewards in order);
- `error`: exit 2 with one line naming the file;
- `either`: exit 0 with consistent data, or exit 2 with one line — when the damage may
  land in a field flatscore ignores.
Never a traceback, never a hang, never more than the memory cap.
"""

from __future__ import annotations

import copy
import json
import os
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tau2"
TAU2_BASES = [
    FIXTURES / "v1.0" / "ok.json",
    FIXTURES / "v1.0" / "alt.json",
    FIXTURES / "v1.0" / "steps.json",
    FIXTURES / "v0.2" / "ok.json",
    FIXTURES / "v0.2" / "telecom.json",
]
MARKUP = ["[/]", "[bold]x[/bold]", "a[/]b", "[link=file:///etc/passwd]x[/link]", "[red", ":smile:"]
DEEP = [150, 5_000, 100_000]
# Values out of range in either format (each format adds its own fields).
BAD_VALUES: list[tuple[str, Any]] = [
    ("reward", float("nan")),
    ("reward", float("inf")),
    ("reward", 5.0),
    ("reward", -1.0),
    ("trial", -1),
]
HUGE_LITERALS = ["1e999", "-1e999", "1" + "0" * 5000, "1e308", "123456789012345678901234567890"]
BAD_UTF8 = [b"\xc0\xaf", b"\xff", b"\xed\xa0\x80", b"\x80abc", b"\xf8\x88\x80\x80\x80"]
WRONG_VALUES: list[Any] = [None, True, 0, -1, 1.5, "x", "", [], [1, 2], {}, {"a": {"b": 1}}]

Expect = Literal["ok", "error", "either"]


@dataclass
class Case:
    name: str
    kind: Literal["tau2", "run"]
    path: str
    expect: Expect
    episodes: int | None = None  # for `ok`
    rewards: list[float | None] | None = None  # for `ok` τ² imports, in order
    literal: str | None = None  # text that must appear verbatim in the output (markup)
    notes: dict[str, Any] = field(default_factory=dict)


def _dump(data: Any) -> bytes:
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=True).encode("utf-8")


def _sim_rewards(data: dict[str, Any]) -> list[float | None]:
    return [
        (s.get("reward_info") or {}).get("reward") if isinstance(s, dict) else None
        for s in data["simulations"]
    ]


def _replace_value(text: bytes, key: str, literal: bytes, rng: random.Random) -> bytes | None:
    """Replace the value of one occurrence of `"key": <scalar>` with `literal`, textually."""
    needle = f'"{key}": '.encode()
    starts = []
    i = text.find(needle)
    while i >= 0:
        starts.append(i)
        i = text.find(needle, i + 1)
    if not starts:
        return None
    at = rng.choice(starts) + len(needle)
    end = at
    if text[at : at + 1] in (b"{", b"["):
        return None
    if text[at : at + 1] == b'"':
        end = text.index(b'"', at + 1) + 1
        while text[end - 2 : end - 1] == b"\\":
            end = text.index(b'"', end) + 1
    else:
        while text[end : end + 1] not in (b",", b"\n", b"}", b"]"):
            end += 1
    return text[:at] + literal + text[end:]


def _string_positions(text: bytes) -> list[int]:
    """Offsets just inside some string values (after `": "`)."""
    out = []
    i = text.find(b'": "')
    while i >= 0:
        out.append(i + 4)
        i = text.find(b'": "', i + 1)
    return out


class Tau2Damage:
    """Damaged τ² files from the fixtures written by τ²-bench itself."""

    def __init__(self, rng: random.Random, out: Path) -> None:
        self.rng = rng
        self.out = out
        self.n = 0

    def _write(self, name: str, raw: bytes, suffix: str = ".json") -> Path:
        self.n += 1
        path = self.out / f"t{self.n:04d}-{name}{suffix}"
        path.write_bytes(raw)
        return path

    def _base(self) -> tuple[Path, dict[str, Any]]:
        base = self.rng.choice(TAU2_BASES)
        return base, json.loads(base.read_text(encoding="utf-8"))

    def _sim(self, data: dict[str, Any]) -> dict[str, Any]:
        return self.rng.choice(data["simulations"])  # type: ignore[no-any-return]

    def case(self, kind: str) -> Case:
        _base, data = self._base()
        rng = self.rng
        if kind == "intact":
            raw = _dump(data)
            if rng.random() < 0.5:
                raw = raw.rstrip(b"\n")
            path = self._write(kind, raw)
            return Case(kind, "tau2", str(path), "ok", len(data["simulations"]), _sim_rewards(data))
        if kind == "truncate":
            raw = _dump(data)
            cut = rng.randrange(1, len(raw) - 1)
            return Case(
                kind, "tau2", str(self._write(kind, raw[:cut])), "error", notes={"cut": cut}
            )
        if kind == "wrong_type":
            sim = self._sim(data)
            target: dict[str, Any] = sim
            if rng.random() < 0.4 and sim.get("messages"):
                target = rng.choice(sim["messages"])
            key = rng.choice(sorted(target))
            target[key] = copy.deepcopy(rng.choice(WRONG_VALUES))
            return Case(f"{kind}:{key}", "tau2", str(self._write(kind, _dump(data))), "either")
        if kind == "deep":
            depth = rng.choice(DEEP)
            sim = self._sim(data)
            key = rng.choice(["messages", "info", "reward_info", "task_id", "raw_data"])
            sim[key] = "@DEEP@"
            raw = _dump(data).replace(b'"@DEEP@"', b"[" * depth + b"]" * depth)
            return Case(f"{kind}:{key}:{depth}", "tau2", str(self._write(kind, raw)), "error")
        if kind == "huge_number":
            literal = rng.choice(HUGE_LITERALS)
            key = rng.choice(["reward", "trial", "max_errors", "duration", "seed", "prompt_tokens"])
            raw = _replace_value(_dump(data), key, literal.encode(), rng)
            if raw is None:
                return self.case(kind)
            expect: Expect = "either"
            if literal in ("1e999", "-1e999") or len(literal) > 4300:
                expect = "error"  # not representable: overflow / more digits than Python reads
            if key == "reward" and literal != "123456789012345678901234567890":
                expect = "error"
            return Case(f"{kind}:{key}:{literal[:8]}", "tau2", str(self._write(kind, raw)), expect)
        if kind == "non_utf8":
            raw = _dump(data)
            at = rng.choice(_string_positions(raw))
            raw = raw[:at] + rng.choice(BAD_UTF8) + raw[at:]
            return Case(kind, "tau2", str(self._write(kind, raw)), "error")
        if kind == "markup":
            mark = rng.choice(MARKUP)
            where = rng.choice(["task_id", "llm", "domain_name", "termination_reason", "content"])
            if where == "task_id":
                for i, s in enumerate(data["simulations"]):
                    s["task_id"] = f"{mark}{i}"
            elif where == "llm":
                data["info"]["agent_info"]["llm"] = mark
            elif where == "domain_name":
                data["info"]["environment_info"]["domain_name"] = mark
            elif where == "termination_reason":
                self._sim(data)["termination_reason"] = mark
                path = self._write(kind, _dump(data))
                return Case(f"{kind}:{where}", "tau2", str(path), "error", literal=mark)
            else:
                for s in data["simulations"]:
                    for m in s.get("messages") or []:
                        if isinstance(m.get("content"), str):
                            m["content"] = mark + m["content"]
            path = self._write(kind, _dump(data))
            literal = mark if where == "domain_name" else None
            return Case(
                f"{kind}:{where}",
                "tau2",
                str(path),
                "ok",
                len(data["simulations"]),
                _sim_rewards(data),
                literal=literal,
            )
        if kind == "bad_value":
            sim = self._sim(data)
            key, value = rng.choice(
                [
                    *BAD_VALUES,
                    ("max_errors", 10**12),
                    ("max_errors", -3),
                    ("termination_reason", "exploded"),
                ]
            )
            if key == "reward":
                if not isinstance(sim.get("reward_info"), dict):
                    sim["reward_info"] = {}
                sim["reward_info"]["reward"] = value
            elif key == "max_errors":
                data["info"]["max_errors"] = value
            else:
                sim[key] = value
            return Case(
                f"{kind}:{key}={value}", "tau2", str(self._write(kind, _dump(data))), "error"
            )
        if kind == "duplicate":
            data["simulations"].append(copy.deepcopy(self._sim(data)))
            return Case(kind, "tau2", str(self._write(kind, _dump(data))), "either")
        if kind == "missing_key":
            sim = self._sim(data)
            key = rng.choice(sorted(sim))
            del sim[key]
            return Case(f"{kind}:{key}", "tau2", str(self._write(kind, _dump(data))), "either")
        if kind == "byte_flip":
            raw = bytearray(_dump(data))
            for _ in range(rng.randint(1, 4)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            return Case(kind, "tau2", str(self._write(kind, bytes(raw))), "either")
        if kind == "shape":
            raw = rng.choice(
                [
                    b"",
                    b"   \n",
                    b"null",
                    b"[]",
                    b"{}",
                    b"42",
                    b'"text"',
                    b"\xef\xbb\xbf{}",
                    b'{"info": {}}',
                    b'{"info": null, "simulations": []}',
                    b'{"info": {"environment_info": {"domain_name": "retail"}}, "simulations": {}}',
                    b'{"info": {"environment_info": {"domain_name": "retail"}}, "simulations": []}',
                ]
            )
            return Case(f"{kind}:{raw[:20]!r}", "tau2", str(self._write(kind, raw)), "error")
        raise ValueError(kind)

    def special(self) -> list[Case]:
        """Directories, FIFOs, links and names that look like markup."""
        out = self.out
        cases = []
        d = out / "dir.json"
        d.mkdir()
        cases.append(Case("special:directory", "tau2", str(d), "error"))
        fifo = out / "fifo.json"
        os.mkfifo(fifo)
        cases.append(Case("special:fifo", "tau2", str(fifo), "error"))
        link = out / "dangling.json"
        link.symlink_to(out / "nowhere.json")
        cases.append(Case("special:dangling-link", "tau2", str(link), "error"))
        cases.append(Case("special:dev-null", "tau2", "/dev/null", "error"))
        _base, data = self._base()
        for name in ("d[/].json", "results[run1].json", "[bold]x[/bold].json"):
            path = out / name  # d[/].json is the file `].json` in a folder `d[`
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(_dump(data))
            cases.append(
                Case(
                    f"special:name:{name}",
                    "tau2",
                    str(path),
                    "ok",
                    len(data["simulations"]),
                    _sim_rewards(data),
                    literal=str(path),
                )
            )
        return cases


class RunDamage:
    """Damaged canonical JSONL run files, from a valid run of `lines` (`json.dumps` style:
    `", "` and `": "` separators)."""

    def __init__(self, rng: random.Random, out: Path, lines: list[str]) -> None:
        self.rng = rng
        self.out = out
        self.lines = lines
        self.n = 0

    def _write(self, name: str, raw: bytes) -> Path:
        self.n += 1
        path = self.out / f"r{self.n:04d}-{name}.jsonl"
        path.write_bytes(raw)
        return path

    def _joined(self, lines: list[str]) -> bytes:
        return "".join(line + "\n" for line in lines).encode("utf-8")

    def case(self, kind: str) -> Case:
        rng = self.rng
        lines = list(self.lines)
        n = len(lines)
        if kind == "intact":
            variant = rng.choice(["plain", "no_final_newline", "crlf", "blank_lines"])
            raw = self._joined(lines)
            if variant == "no_final_newline":
                raw = raw.rstrip(b"\n")
            elif variant == "crlf":
                raw = raw.replace(b"\n", b"\r\n")
            elif variant == "blank_lines":
                raw = b"\n\n".join(raw.split(b"\n"))
            return Case(f"{kind}:{variant}", "run", str(self._write(kind, raw)), "ok", n)
        if kind == "truncate":
            raw = self._joined(lines)
            cut = rng.randrange(1, len(raw))
            kept = raw[:cut]
            complete = kept.count(b"\n")
            tail = kept.rsplit(b"\n", 1)[-1]
            if (
                tail
                and tail == raw[len(kept) - len(tail) : len(kept)]
                and tail in map(str.encode, lines)
            ):
                complete += 1  # cut exactly before a newline: a complete last line
            expect: Expect = "ok" if complete else "error"
            path = self._write(kind, kept)
            return Case(kind, "run", str(path), expect, complete or None, notes={"cut": cut})
        i = rng.randrange(n)
        ep = json.loads(lines[i])
        if kind == "wrong_type":
            key = rng.choice(sorted(ep))
            ep[key] = copy.deepcopy(rng.choice(WRONG_VALUES))
            lines[i] = json.dumps(ep)
            return Case(
                f"{kind}:{key}", "run", str(self._write(kind, self._joined(lines))), "either"
            )
        if kind == "deep":
            depth = rng.choice(DEEP)
            key = rng.choice(["metadata", "messages", "reward", "arm"])
            ep[key] = "@DEEP@"
            lines[i] = json.dumps(ep).replace('"@DEEP@"', "[" * depth + "]" * depth)
            return Case(
                f"{kind}:{key}:{depth}", "run", str(self._write(kind, self._joined(lines))), "error"
            )
        if kind == "huge_number":
            literal = rng.choice(HUGE_LITERALS)
            key = rng.choice(["reward", "trial", "seed", "latency_s", "prompt_tokens"])
            raw = _replace_value(self._joined(lines), key, literal.encode(), rng)
            if raw is None:
                return self.case(kind)
            expect = "either"
            if len(literal) > 4300 or (key == "reward" and literal != "-1e999"):
                expect = "error"
            return Case(f"{kind}:{key}:{literal[:8]}", "run", str(self._write(kind, raw)), expect)
        if kind == "non_utf8":
            raw = self._joined(lines)
            at = rng.choice(_string_positions(raw))
            raw = raw[:at] + rng.choice(BAD_UTF8) + raw[at:]
            return Case(kind, "run", str(self._write(kind, raw)), "error")
        if kind == "markup":
            mark = rng.choice(MARKUP)
            key = rng.choice(["arm", "model", "domain"])
            eps = [json.loads(line) for line in lines]
            for e in eps:
                e[key] = f"{mark}{e[key]}"
            raw = self._joined([json.dumps(e) for e in eps])
            return Case(f"{kind}:{key}", "run", str(self._write(kind, raw)), "ok", n, literal=mark)
        if kind == "bad_value":
            key, value = rng.choice(
                [
                    *BAD_VALUES,
                    ("schema_version", 99),
                    ("termination_reason", "exploded"),
                    ("error_budget", {"max_errors": 10**12, "counted": "all"}),
                ]
            )
            ep[key] = value
            lines[i] = json.dumps(ep)
            return Case(
                f"{kind}:{key}", "run", str(self._write(kind, self._joined(lines))), "error"
            )
        if kind == "duplicate":
            lines.insert(i, lines[i])
            return Case(kind, "run", str(self._write(kind, self._joined(lines))), "either")
        if kind == "byte_flip":
            raw = bytearray(self._joined(lines))
            for _ in range(rng.randint(1, 4)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            return Case(kind, "run", str(self._write(kind, bytes(raw))), "either")
        if kind == "shape":
            raw = rng.choice(
                [b"", b"\n\n", b"null\n", b"[]\n", b"{}\n", b"42\n", b"\xef\xbb\xbf{}\n"]
            )
            expect = "error"
            return Case(f"{kind}:{raw[:8]!r}", "run", str(self._write(kind, raw)), expect)
        raise ValueError(kind)


TAU2_KINDS = {
    "intact": 10,
    "truncate": 30,
    "wrong_type": 30,
    "deep": 18,
    "huge_number": 20,
    "non_utf8": 15,
    "markup": 20,
    "bad_value": 20,
    "duplicate": 8,
    "missing_key": 15,
    "byte_flip": 20,
    "shape": 12,
}
RUN_KINDS = {
    "intact": 8,
    "truncate": 14,
    "wrong_type": 14,
    "deep": 9,
    "huge_number": 10,
    "non_utf8": 8,
    "markup": 10,
    "bad_value": 12,
    "duplicate": 4,
    "byte_flip": 10,
    "shape": 5,
}


def generate(out: Path, run_lines: list[str], seed: int = 14) -> list[Case]:
    """All cases (≥ 300 files), deterministic for a seed."""
    rng = random.Random(seed)
    (out / "tau2").mkdir(parents=True)
    (out / "runs").mkdir()
    tau2 = Tau2Damage(rng, out / "tau2")
    runs = RunDamage(rng, out / "runs", run_lines)
    cases = [tau2.case(kind) for kind, k in TAU2_KINDS.items() for _ in range(k)]
    cases += tau2.special()
    cases += [runs.case(kind) for kind, k in RUN_KINDS.items() for _ in range(k)]
    return cases


def to_json(cases: list[Case]) -> str:
    return json.dumps([asdict(c) for c in cases])

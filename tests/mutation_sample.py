"""The mutation score of the core from a uniform random sample of its mutants (README, "Contributing").

mutmut (configured under ``[tool.mutmut]`` in pyproject.toml) makes about 15,000 mutants of the core; running every
one is many hours on two cores. A uniform random sample, drawn with a seed from the names mutmut generated, estimates
the share of mutants the tests detect, with a Wilson 95 % interval. Two samples that share no mutant keep the estimate
honest: survivors of the first get tests, and the second, drawn after those tests were written, measures.

    .venv/bin/mutmut run "calib.stats.decisions.x_decide__mutmut_1"   # generates mutants/ and the test map once
    .venv/bin/python tests/mutation_sample.py draw --n 400 --seed 1 > /tmp/first.txt
    .venv/bin/mutmut run $(cat /tmp/first.txt)
    .venv/bin/python tests/mutation_sample.py score /tmp/first.txt
    .venv/bin/python tests/mutation_sample.py draw --n 400 --seed 2 --exclude /tmp/first.txt > /tmp/second.txt

A mutant counts as detected when a test fails on it (mutmut: killed), it runs past its time limit (timeout) or it
crashes the process (segfault); as not detected when every test passes (survived) or no test of the selection calls
its function (no tests). Mutants judged equivalent (they compute the same thing; ``--equivalent FILE``, a name and a
reason per line) are left out of the denominator and listed.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import Counter
from pathlib import Path

MUTANTS = Path(__file__).resolve().parents[1] / "mutants"

#: mutmut's exit codes (mutmut.stats.status_by_exit_code) as this score reads them.
DETECTED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
            -11: "segfault", -9: "segfault"}
UNDETECTED = {0: "survived", 5: "no tests", 33: "no tests"}


def generated(mutants: Path = MUTANTS) -> dict[str, int | None]:
    """Every mutant name mutmut generated under ``mutants`` with its exit code (None: not run yet)."""
    out: dict[str, int | None] = {}
    for meta in sorted(mutants.glob("calib/**/*.py.meta")):
        out.update(json.loads(meta.read_text())["exit_code_by_key"])
    if not out:
        raise SystemExit(f"no mutants under {mutants}: run mutmut once first (see this file's docstring)")
    return out


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion k/n (95 % by default)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _names(path: str | None) -> list[str]:
    if not path:
        return []
    lines = Path(path).read_text().splitlines()
    return [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]


def draw(n: int, seed: int, exclude: list[str]) -> list[str]:
    """``n`` mutant names drawn uniformly without replacement, none of them in ``exclude``."""
    names = sorted(set(generated()) - set(exclude))
    if n > len(names):
        raise SystemExit(f"--n {n}: only {len(names)} mutants are left to draw from")
    return sorted(random.Random(seed).sample(names, n))


def score(names: list[str], equivalent: dict[str, str]) -> dict:
    """The detected share of ``names`` (the equivalent ones left out), per package and in all."""
    codes = generated()
    unknown = [m for m in names if m not in codes]
    if unknown:
        raise SystemExit(f"{len(unknown)} names are not mutants of this checkout's mutants/, e.g. {unknown[0]}")
    not_run = [m for m in names if codes[m] is None]
    rows: Counter = Counter()
    survivors, odd = [], []
    for m in names:
        if m in equivalent:
            continue
        code, package = codes[m], m.split(".")[1]
        if code in DETECTED:
            rows[(package, "detected")] += 1
        elif code in UNDETECTED:
            rows[(package, "undetected")] += 1
            survivors.append((m, UNDETECTED[code]))
        elif code is not None:
            odd.append((m, code))
    packages = sorted({p for p, _ in rows})
    table = {p: (rows[(p, "detected")], rows[(p, "detected")] + rows[(p, "undetected")]) for p in packages}
    k, n = sum(d for d, _ in table.values()), sum(t for _, t in table.values())
    return {"table": table, "detected": k, "judged": n, "interval": wilson(k, n), "survivors": survivors,
            "equivalent": sorted(m for m in names if m in equivalent), "not run": not_run, "other": odd}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("draw", help="print a uniform random sample of mutant names, one a line")
    d.add_argument("--n", type=int, required=True)
    d.add_argument("--seed", type=int, required=True)
    d.add_argument("--exclude", action="append", default=[], help="a file of names not to draw (repeatable)")
    s = sub.add_parser("score", help="the detected share of the names in FILE, with its Wilson 95 %% interval")
    s.add_argument("file")
    s.add_argument("--equivalent", help="a file of mutants judged equivalent: a name, then the reason, a line each")
    args = parser.parse_args(argv)
    if args.command == "draw":
        print("\n".join(draw(args.n, args.seed, [m for f in args.exclude for m in _names(f)])))
        return 0
    equivalent = {}
    if args.equivalent:
        for line in Path(args.equivalent).read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, _, reason = line.partition(" ")
                equivalent[name] = reason.strip()
    result = score(_names(args.file), equivalent)
    print(f"{'package':10} {'detected':>9} {'judged':>7} {'share':>7}")
    for package, (k, n) in result["table"].items():
        print(f"{package:10} {k:9d} {n:7d} {k / n:7.1%}")
    low, high = result["interval"]
    k, n = result["detected"], result["judged"]
    print(f"{'all':10} {k:9d} {n:7d} {k / max(n, 1):7.1%}   Wilson 95 % [{low:.1%}, {high:.1%}]")
    print(f"equivalent (left out): {len(result['equivalent'])}; not run yet: {len(result['not run'])}; "
          f"other outcomes: {result['other']}")
    for name, why in result["survivors"]:
        print(f"  not detected ({why}): {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

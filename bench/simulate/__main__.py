"""`python -m bench.simulate [--quick]`: the sharding protocol at scale, simulated (docs/bench.md, At scale).

Prints a line per row while it runs, then the table; writes the JSON to `bench/results/simulate.json`
(or `--out`). Exit status 1 when a zone ever ran at two replicas at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from bench.progress import Progress
from bench.simulate import table
from bench.simulate.params import ALL_EVENTS, FULL, QUICK, Matrix, Timing, parse_count
from bench.simulate.runner import run_matrix

RESULTS = Path(__file__).resolve().parents[1] / "results" / "simulate.json"


def _counts(text: str) -> tuple[int, ...]:
    try:
        return tuple(parse_count(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _events(text: str) -> tuple[str, ...]:
    events = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(set(events) - set(ALL_EVENTS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown event(s) {', '.join(unknown)} (known: {', '.join(ALL_EVENTS)})"
        )
    return events


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.simulate",
        description=__doc__.splitlines()[0] if __doc__ else None,
        allow_abbrev=False,
    )
    parser.add_argument("--quick", action="store_true", help="a small matrix (seconds; what the tests run)")
    parser.add_argument(
        "--replicas", type=_counts, help="comma-separated replica counts (default 10,100,1000)"
    )
    parser.add_argument(
        "--zones", type=_counts, help="comma-separated zone counts, 10k and 1M allowed (default 10k,100k,1M)"
    )
    parser.add_argument(
        "--events",
        type=_events,
        help=f"comma-separated events (default {','.join(FULL.events)}; also crash-coordinator)",
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="the run is the same for the same seed (default 1)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"the JSON file (default {RESULTS})")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument(
        "--no-fork", action="store_true", help="warm each event's cluster up again instead of forking it"
    )
    parser.add_argument(
        "--report", type=Path, metavar="JSON", help="run nothing: print the table of an earlier result file"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.report is not None:
        try:
            doc = orjson.loads(args.report.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            print(f"cannot read {args.report}: {exc}", file=sys.stderr)
            return 2
        print(table.render(doc, markdown=args.markdown))
        return 0
    base = QUICK if args.quick else FULL
    matrix = Matrix(args.replicas or base.replicas, args.zones or base.zones, args.events or base.events)
    progress = Progress()
    doc = run_matrix(matrix, Timing(), args.seed, progress.step, fork=not args.no_fork)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    print()
    print(table.render(doc, markdown=args.markdown))
    print()
    print(f"results: {args.out}")
    return 1 if any(row["overlapping_zones"] for row in doc["rows"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())

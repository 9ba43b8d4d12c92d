"""`python -m bench [--quick]`: the bench suite against the fake provider (docs/bench.md).

Runs every scenario with real processes on 127.0.0.1, shows progress, prints a table at the end, writes
`bench/results/<timestamp>.json` and `latest.json`, and draws PNG plots when matplotlib is installed. Every
process it starts is stopped before it exits, on Ctrl-C and SIGTERM too.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

import orjson

from bench import plots, report, suite
from bench.profiles import PROFILES
from bench.progress import Progress

RESULTS = Path(__file__).resolve().parent / "results"


class _Stop(BaseException):
    """Ctrl-C or SIGTERM: unwind, so every cluster's finally stops its processes."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    # The first signal starts the unwinding; later ones are ignored so they cannot cut the cleanup short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Stop(signal.Signals(signum).name)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__.splitlines()[0] if __doc__ else None,
        allow_abbrev=False,
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes, about 14 minutes on 2 cores")
    size.add_argument(
        "--profile", choices=sorted(PROFILES), help="full (default), quick or smoke (for tests)"
    )
    parser.add_argument(
        "--only",
        default="",
        help=f"comma-separated scenarios to run (others are marked skipped): {','.join(suite.SCENARIOS)}",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"where results go (default {RESULTS})")
    parser.add_argument(
        "--run-dir", type=Path, help="where process logs go (default: a new temporary directory)"
    )
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the process logs even when all went well"
    )
    parser.add_argument("--no-plots", action="store_true", help="write the JSON and the table only")
    parser.add_argument(
        "--report",
        type=Path,
        metavar="JSON",
        help="run nothing: print the table of a result file and draw its plots",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    profile = PROFILES[args.profile or ("quick" if args.quick else "full")]
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(only) - set(suite.SCENARIOS))
    if unknown:
        print(
            f"unknown scenario(s): {', '.join(unknown)} (known: {', '.join(suite.SCENARIOS)})",
            file=sys.stderr,
        )
        return 2
    draw = not args.no_plots
    if draw and not plots.available():
        print(plots.INSTALL_HINT)
        draw = False
    if args.report is not None:
        return _report(args.report, draw)
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="shardsync-bench-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress()
    progress.step(f"profile {profile.name}; process logs in {run_dir}")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        doc = suite.run(profile, run_dir, progress, only)
    except (KeyboardInterrupt, _Stop):
        # The scenarios' finally blocks have stopped their processes by now; further signals stay ignored
        # until the exit.
        print(f"\ninterrupted: every process started was stopped; no result written (logs: {run_dir})")
        return 130
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    path = report.write(doc, args.out, stamp)
    print()
    print(report.render(doc))
    print()
    print(f"results: {path} (and {args.out / 'latest.json'})")
    if draw:
        for png in plots.draw(doc, args.out, stamp):
            print(f"plot:    {png}")
    elif not args.no_plots:
        print(plots.INSTALL_HINT)
    failed = [name for name in suite.SCENARIOS if isinstance(doc.get(name), dict) and "error" in doc[name]]
    if failed or args.keep_logs or args.run_dir:
        print(f"logs:    {run_dir}")
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 1 if failed or doc["safety"]["total_overlapping_writes"] else 0


def _report(path: Path, draw: bool) -> int:
    """The table and plots of an earlier run's JSON. The plots go beside it as `<name>-report-<plot>.png`,
    never over the run's own `<name>-<plot>.png` (committed beside bench/results/example's JSON)."""
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        print(f"cannot read {path}: {exc}", file=sys.stderr)
        return 2
    print(report.render(doc))
    if draw:
        for png in plots.draw(doc, path.parent, f"{path.stem}-report", latest=False):
            print(f"plot:    {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

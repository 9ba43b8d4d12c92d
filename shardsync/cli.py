"""Command line: one sub-command per job, each implemented in the module that owns that job.

Every command module exposes `configure(parser)` to declare its flags and `main(args) -> int` to run.
Modules are imported only when their command is chosen, so `shardsync --help` stays fast and a command's
heavy imports (the kubernetes client, dnspython) cost nothing to the others.

Every mistake is one line on stderr, never a traceback: a usage mistake (an unknown or abbreviated flag, a
bad value) exits 2 naming the command whose --help tells more (`OneLineParser`); each command reports what
it can foresee (a busy port, a missing file) itself, and anything else that escapes a command is one line
with exit 1 here (the trace with --log-level=debug, where the command has that flag). A reader that goes
away (`shardsync shards | head`) ends the command quietly with 141, the status of a process ended by
SIGPIPE, as other Unix tools do.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from shardsync import __version__

# name -> (module, one-line help). The module holds configure() and main().
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("shardsync.replica.command", "run one replica (external-dns style flags)"),
    "apiserver": ("shardsync.local.apiserver.command", "run the embedded Kubernetes API server"),
    "fake-provider": ("shardsync.providers.fake.command", "serve the fake DNS provider over HTTP (shared)"),
    "webhook-server": (
        "shardsync.providers.webhook.command",
        "serve a DNS provider over external-dns's webhook protocol (for --provider=webhook)",
    ),
    "local": ("shardsync.local.command", "run N replicas, an API server and a fake provider here, live"),
    "shards": ("shardsync.shards.command", "show the zone assignment and sync state, explain, what-if"),
}

OUTPUT_CLOSED = 128 + signal.SIGPIPE  # 141


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (argparse prints the whole usage block first),
    naming the command whose --help tells more; exit code 2. A flag is recognised only by its full name
    (`allow_abbrev=False`): `--txt-owner` must not pass for `--txt-owner-id`, nor mean something else once a
    flag with a longer name appears. Sub-parsers are of this class too, so this holds for every one."""

    command = ""  # the chosen sub-command, which an unrecognized argument belongs to

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        prog = f"{self.prog} {self.command}" if self.command else self.prog
        self.exit(2, f"{prog}: {message}; see {prog} --help\n")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="shardsync",
        description="Kubernetes DNS controller with N active replicas sharding DNS zones.",
    )
    parser.add_argument("--version", action="version", version=f"shardsync {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=OneLineParser)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser.command = chosen if chosen in COMMANDS else ""
    for name, (module_name, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.configure(cmd)
            cmd.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | None = None
    try:
        args = build_parser(args_list).parse_args(args_list)
        return int(args._module.main(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return output_closed()
    except Exception as exc:  # every foreseeable mistake has its own message; this is the rest
        command = getattr(args, "command", None)
        if getattr(args, "log_level", "") == "debug":
            traceback.print_exc()
        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
            cause = cause.exceptions[0]
        prog = f"shardsync {command}" if command else "shardsync"
        print(f"{prog}: {type(cause).__name__}: {cause}".splitlines()[0], file=sys.stderr)
        return 1


def output_closed() -> int:
    """Our reader went away: stop quietly. stdout and stderr are pointed at /dev/null first, so the
    interpreter's last flush of what is still buffered does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            os.dup2(devnull, stream.fileno())
    except (OSError, ValueError):  # no file descriptors (an embedding); nothing left to protect
        pass
    return OUTPUT_CLOSED

"""Command line: one sub-command per job, each implemented in the module that owns that job.

Every command module exposes `configure(parser)` to declare its flags and `main(args) -> int` to run.
Modules are imported only when their command is chosen, so `shardsync --help` stays fast and a command's
heavy imports (the kubernetes client, dnspython) cost nothing to the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from shardsync import __version__

# name -> (module, one-line help). The module holds configure() and main().
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("shardsync.run_command", "run one replica (external-dns style flags)"),
    "apiserver": ("shardsync.local.apiserver.command", "run the embedded Kubernetes API server"),
    "fake-provider": ("shardsync.providers.fake.command", "serve the fake DNS provider over HTTP (shared)"),
    "local": ("shardsync.local.command", "run N replicas, an API server and a fake provider here, live"),
    "shards": ("shardsync.shards.command", "show the zone assignment and sync state, explain, what-if"),
}


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (argparse prints the whole usage block first),
    naming the command whose --help tells more; exit code 2."""

    command = ""  # the chosen sub-command, which an unrecognized argument belongs to

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
    args = build_parser(args_list).parse_args(args_list)
    try:
        return int(args._module.main(args))
    except KeyboardInterrupt:
        return 130

"""Entry point of the `skiff` command.

Each command family lives in its own module with a ``register(subparsers)``
function; this module only assembles them. A command's handler returns the
process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from skiff.client.errors import MessageValidationError, NotANameServerError
from skiff.common.errors import ConfigError, SkiffError

COMMAND_MODULES: tuple[str, ...] = (
    "skiff.cli.namesrv", "skiff.cli.broker", "skiff.cli.admin", "skiff.cli.topic", "skiff.cli.consumer",
    "skiff.cli.message", "skiff.cli.timer", "skiff.cli.acl", "skiff.cli.bench", "skiff.cli.chaos",
    "skiff.cli.dashboard", "skiff.cli.archive", "skiff.cli.version",
)
"""Modules that register subcommands, in the order `skiff --help` lists them."""
BAD_ARGUMENT = (ConfigError, MessageValidationError)
"""Bad input refused before any work: a configuration key or value (servers and clients alike,
an address among them), a name, an expression, a message. Like argparse's own refusals these
exit 2; every other failure (servers' answers, the network, timeouts, a port in use) exits 1."""


NAMESRV_ADVICE = "-n takes the NameServer's address"
"""How a NameServer list that names a broker is corrected (`NotANameServerError`)."""
PARSER_ATTR = "cli_parser"
"""Where `SkiffParser` leaves the innermost (sub)command parser that parsed the line."""


class SkiffParser(argparse.ArgumentParser):
    """The parser of `skiff` and, through ``add_subparsers``, of each (sub)command.

    It remembers which (sub)command parsed the line, so an option no parser took is
    reported with that command's usage (``skiff topic create``'s, not ``skiff``'s); and
    when a required option is missing it also names the options it did not know, so a
    misspelled required option (``--topc``) is reported as such.
    """

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._seen = list(sys.argv[1:] if args is None else args)
        parsed, extra = super().parse_known_args(args, namespace)
        if not hasattr(parsed, PARSER_ATTR):  # the innermost parser returns first and sets it
            setattr(parsed, PARSER_ATTR, self)
        return parsed, extra

    def error(self, message: str) -> NoReturn:
        if message.startswith("the following arguments are required"):
            unknown = self._unknown_options()
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}; {message}"
        super().error(message)

    def _unknown_options(self) -> list[str]:
        """The option-like words this parser was given that none of its options (or an
        abbreviation of one) takes."""
        known = list(self._option_string_actions)
        words = getattr(self, "_seen", [])
        if "--" in words:
            words = words[: words.index("--")]
        out = []
        for word in words:
            if not word.startswith("-") or word == "-" or self._negative_number_matcher.match(word):
                continue
            name = word.split("=", 1)[0]
            if name in known or (name.startswith("--") and any(k.startswith(name) for k in known)):
                continue
            if not name.startswith("--") and name[:2] in known:  # -tTOPIC, -q8
                continue
            out.append(word)
        return out


def error_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser whose usage a bad command line is reported with: the innermost one that parsed it."""
    found = getattr(args, PARSER_ATTR, None)
    return found if isinstance(found, argparse.ArgumentParser) else parser


def build_parser() -> argparse.ArgumentParser:
    parser = SkiffParser(prog="skiff", description="Skiff: a RocketMQ-compatible message queue.")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    if extra and not getattr(args, "accepts_extra", False):
        error_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.handler(args, extra) or 0)
    except NotANameServerError as exc:
        print(f"skiff: {exc.explain(NAMESRV_ADVICE)}", file=sys.stderr)
        return 1
    except BAD_ARGUMENT as exc:
        print(f"skiff: {exc}", file=sys.stderr)
        return 2
    except SkiffError as exc:
        print(f"skiff: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130

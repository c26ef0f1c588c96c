"""argparse with gpudrv's command-line conventions: exit 2 and one line on stderr for bad input, no
prefix abbreviations, and "did you mean" for a mistyped command, verb, choice or flag.

No abbreviations: `--fro` is an error, not `--from`; otherwise a flag added later (`--from-cluster`)
silently changes what an old command line means, or breaks it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

SubParsers = argparse._SubParsersAction  # the type of a parser's subcommands (argparse names it privately)


class Parser(argparse.ArgumentParser):
    """The parser of gpudrv and of each of its subcommands (add_parser makes the same class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Exit 2 and one line on stderr (argparse would print the usage too); the message flattened,
        as it may quote a value with a newline."""
        flat = message.replace("\r", "\\r").replace("\n", "\\n")
        verb = self.prog.partition(" ")[2]
        self.exit(2, f"gpudrv: {verb + ': ' if verb else ''}{flat} (see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own check, with the nearest choice named: `audti` -> audit, `-o jsn` -> json.
        if action.choices is None or value in action.choices:
            return
        choices = [str(choice) for choice in action.choices]
        close = difflib.get_close_matches(str(value), choices, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        if isinstance(action, SubParsers):
            what = str(action.metavar or "command").lower()
            raise argparse.ArgumentError(None, f"unknown {what} {value!r}{hint}")
        listed = ", ".join(choices)
        raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {listed}){hint}")


def subcommands(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    return next((action for action in parser._actions if isinstance(action, SubParsers)), None)


def chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the subcommand the command line names (`gpudrv matrix add`: add's), or the
    deepest one reached when it names none (`gpudrv matrix`: matrix's)."""
    current = parser
    while (action := subcommands(current)) is not None:
        name = getattr(args, action.dest, None)
        if name is None:
            break
        current = action.choices[name]
    return current


def missing_command(parser: argparse.ArgumentParser) -> NoReturn:
    """`gpudrv` (or `gpudrv matrix`) alone: the list of what it takes on stdout, as git does, and exit
    2 with one line on stderr, as for any usage error: `gpudrv $VERB` with VERB unset must not pass."""
    action = subcommands(parser)
    what = str(action.metavar if action is not None else "command").lower()
    sys.stdout.write(parser.format_help())
    sys.stdout.flush()
    verb = parser.prog.partition(" ")[2]
    where = f"gpudrv: {verb + ': ' if verb else ''}"
    parser.exit(2, f"{where}no {what} given (listed above; {parser.prog} {what.upper()} --help for one)\n")


def refuse_extras(
    parser: argparse.ArgumentParser, args: argparse.Namespace, extras: Sequence[str], live_only: bool
) -> NoReturn:
    """Arguments no option took: one line, with the flag meant when one is near (`--fro`: --from).
    `live_only`: the command reads the live cluster and has no --from; say that, not "did you mean"."""
    leaf = chosen(parser, args)
    names = [extra.partition("=")[0] for extra in extras if extra.startswith("-")]
    if live_only and "--from" in names and "--from" not in leaf._option_string_actions:
        leaf.error(f"no --from here: {leaf.prog.partition(' ')[2]} reads the live cluster, not manifests")
    known = [*leaf._option_string_actions, *parser._option_string_actions]
    meant = {name: option for name in names if (option := _nearest(name, known))}
    hint = ", ".join(f"{option} for {name}" if len(meant) > 1 else option for name, option in meant.items())
    leaf.error(f"unrecognized arguments: {' '.join(extras)}" + (f"; did you mean {hint}?" if hint else ""))


def _nearest(name: str, options: Sequence[str]) -> str | None:
    """The option `name` was meant to be: the one it abbreviates, else the closest spelling."""
    longer = sorted({option for option in options if option.startswith(name) and len(name) > 2})
    if len(longer) == 1:
        return longer[0]
    close = difflib.get_close_matches(name, [option for option in options if option.startswith("--")], n=1)
    return close[0] if close else None

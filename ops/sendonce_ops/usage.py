"""The command line's usage errors, said as every other error of ours is: one line, with the fix, exit code 2.

argparse prints its whole usage block first, and a misspelt option (``--stak Shop info``) surfaces as the next
word's error (``invalid choice: 'Shop'``); here an option no command declares is named with its closest match.
Both console commands (``sendonce`` and ``sendonce-local``) parse with it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {' '.join(message.split())} (see `{self.prog} --help`)\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        words = list(sys.argv[1:] if args is None else args)
        known = set(_option_strings(self))
        for word in words:
            if word == "--":
                break
            option = word.split("=", 1)[0]
            if option.startswith("--") and option not in known and not _abbreviates(option, known):
                close = difflib.get_close_matches(option, sorted(known), n=1)
                self.error(f"unknown option {option}" + (f"; did you mean {close[0]}?" if close else ""))
        return super().parse_args(words, namespace)


def _option_strings(parser: argparse.ArgumentParser) -> Iterator[str]:
    """Every long option of ``parser`` and of its subcommands, at any depth."""
    for action in parser._actions:
        yield from (option for option in action.option_strings if option.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                yield from _option_strings(subparser)


def _abbreviates(option: str, known: set[str]) -> bool:
    # argparse takes an unambiguous prefix of a long option (allow_abbrev); it says itself when one is ambiguous.
    return any(name.startswith(option) for name in known)

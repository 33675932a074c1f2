"""The command line's usage errors, said as every other error of ours is: one line, with the fix, exit code 2.

argparse prints its whole usage block first, and a misspelt option (``--stak Shop info``) surfaces as the next
word's error (``invalid choice: 'Shop'``); here an option the command given does not declare is named with its
closest match among the command's own options.
Both console commands (``sendonce`` and ``sendonce-local``) parse with it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn


class _Subcommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """A subcommand's ``--help`` opens with the line the command list shows for it."""

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        kwargs.setdefault("description", kwargs.get("help"))
        return super().add_parser(name, **kwargs)


class OneLineParser(argparse.ArgumentParser):
    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("action", _Subcommands)
        return super().add_subparsers(**kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {' '.join(message.split())} (see `{self.prog} --help`)\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        words = list(sys.argv[1:] if args is None else args)
        chain = _command_chain(self, words)
        known = {option for parser in chain for option in _own_options(parser)}
        for word in words:
            if word == "--":
                break
            option = word.split("=", 1)[0]
            if option.startswith("--") and option not in known and not _abbreviates(option, known):
                close = difflib.get_close_matches(option, sorted(known), n=1)
                chain[-1].error(f"unknown option {option}" + (f"; did you mean {close[0]}?" if close else ""))
        return super().parse_args(words, namespace)


def _command_chain(parser: argparse.ArgumentParser, words: Sequence[str]) -> list[argparse.ArgumentParser]:
    """The parser and the subcommands ``words`` name, in order (``sendonce dlq redrive``): only their options are
    the command's, so a misspelt option is matched against those and the error points to that command's help."""
    chain, value_next = [parser], False
    for word in words:
        if word == "--":
            break
        if value_next:
            value_next = False
            continue
        if word.startswith("-"):
            action = _action_of(chain, word.split("=", 1)[0])
            value_next = action is not None and "=" not in word and action.nargs != 0  # no option takes several
            continue
        subcommand = _subcommands(chain[-1]).get(word)
        if subcommand is not None:
            chain.append(subcommand)
    return chain


def _action_of(chain: Sequence[argparse.ArgumentParser], option: str) -> argparse.Action | None:
    """The action ``option`` names in the chain: by its name, or by a prefix of one name only, as argparse reads it."""
    actions = {name: action for parser in chain for action in parser._actions for name in action.option_strings}
    if option in actions:
        return actions[option]
    named = {id(action): action for name, action in actions.items() if name.startswith(option)}
    return next(iter(named.values())) if len(named) == 1 else None


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def _own_options(parser: argparse.ArgumentParser) -> Iterator[str]:
    """The long options ``parser`` itself declares (not its subcommands')."""
    for action in parser._actions:
        yield from (option for option in action.option_strings if option.startswith("--"))


def _abbreviates(option: str, known: set[str]) -> bool:
    # argparse takes an unambiguous prefix of a long option (allow_abbrev); it says itself when one is ambiguous.
    return any(name.startswith(option) for name in known)

"""Argument checks shared by the commands' parsers."""
from __future__ import annotations

import argparse


def refuse_empty_values(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exit with a usage error for ``--option=--``, which argparse before Python 3.12 turns
    into an empty list instead of refusing it."""
    for action in parser._actions:
        if action.nargs is None and getattr(args, action.dest, None) == []:
            name = "/".join(action.option_strings) or action.dest
            parser.error(f"argument {name}: expected one argument")

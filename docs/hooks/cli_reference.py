"""MkDocs hook: the command-line reference page gets every ``ppsvm ... --help`` from the real parser at build time.

docs/reference/cli.md holds the marker ``<!-- ppsvm-help -->``; this hook replaces it with one section per command
and subcommand (a heading ``ppsvm coordinator train`` and its ``--help`` text), walking the parser that
``ppsvm`` itself builds (:func:`ppsvm.cli.build_parser`), so the page cannot drift from the command. The help is
formatted at a fixed width of 100 columns, whatever the terminal the build runs in.

Run by hand, ``python docs/hooks/cli_reference.py`` prints the generated Markdown.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- ppsvm-help -->"
PAGE = "reference/cli.md"
WIDTH = "100"


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Each subcommand's (one-line help, parser) under ``parser``, in the parser's order; aliases once."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield helps.get(name, ""), sub


def walk(parser: argparse.ArgumentParser, depth: int = 0) -> Iterator[tuple[int, str, argparse.ArgumentParser]]:
    """(depth, one-line help, parser) for ``parser`` and every subcommand below it, depth first."""
    for summary, sub in subcommands(parser):
        yield depth + 1, summary, sub
        yield from walk(sub, depth + 1)


def help_text(parser: argparse.ArgumentParser) -> str:
    """``parser.format_help()`` at a fixed width (argparse reads the width from ``COLUMNS``)."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def fence(text: str) -> str:
    return f"```text\n{text}\n```"


def cli_reference() -> str:
    """The Markdown that replaces the marker: a table of every command, then each one's ``--help``."""
    from ppsvm.cli import build_parser

    parser = build_parser(reproduce_targets=True)
    commands = list(walk(parser))
    table = ["| command | what it does |", "|---|---|"]
    for _, summary, sub in commands:
        anchor = sub.prog.replace(" ", "-")
        table.append(f"| [`{sub.prog}`](#{anchor}) | {summary.replace('|', '&#124;')} |")
    sections = [
        "## Every command",
        "",
        *table,
        "",
        "## ppsvm",
        "",
        fence(help_text(parser)),
    ]
    for depth, _, sub in commands:
        level = "#" * min(depth + 1, 4)
        sections += ["", f"{level} {sub.prog} {{#{sub.prog.replace(' ', '-')}}}", "", fence(help_text(sub))]
    return "\n".join(sections) + "\n"


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """MkDocs event: fill the marker on the command-line reference page; other pages pass unchanged."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its marker {MARKER}: the generated --help has nowhere to go")
    return markdown.replace(MARKER, cli_reference())


if __name__ == "__main__":
    print(cli_reference())

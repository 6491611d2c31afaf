"""Build-time hook: numpydoc's Sphinx roles in the rendered docstrings, as code.

The docstrings cross-reference with Sphinx roles (``:mod:`ppsvm.core.lp```, ``:func:`~ppsvm.data.sources.load_cell```),
which mkdocstrings leaves as text: ":mod:" before the code. The role is dropped; ``~`` keeps the last name only,
as Sphinx shows it.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc|obj|const):<code>(~?)([^<]*)</code>")


def _as_code(match: re.Match[str]) -> str:
    short, name = match.groups()
    return f"<code>{name.rsplit('.', 1)[-1] if short else name}</code>"


def on_page_content(html: str, **_: Any) -> str:
    return _ROLE.sub(_as_code, html)

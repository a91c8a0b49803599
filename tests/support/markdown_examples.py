"""The code examples of a Markdown file, as a reader would copy them: fenced blocks cut into commands.

Pure: parsing and the substitutions that point an example at a test's own broker and folders. The
runner is tests/e2e/test_readme_examples.py.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

_FENCE = re.compile(r"^```(\w*)\s*$")
_TRAILING_COMMENT = re.compile(r"\s+#\s.*$")


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int          # where the block starts in its file (1-based, the fence line)

    def where(self, name: str) -> str:
        return f"{name}:{self.line}"


def blocks(markdown: str) -> list[Block]:
    """Every fenced block with a language tag, in order."""
    out: list[Block] = []
    lang: str | None = None
    start, body = 0, []
    for i, line in enumerate(markdown.splitlines(), start=1):
        m = _FENCE.match(line)
        if lang is None and m:
            lang, start, body = m.group(1), i, []
        elif lang is not None and line.strip() == "```":
            if lang:
                out.append(Block(lang, "\n".join(body) + "\n", start))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def _strip_comment(line: str) -> str:
    """`cmd --x   # note` → `cmd --x` (a `#` inside quotes stays)."""
    m = _TRAILING_COMMENT.search(line)
    if not m:
        return line
    head = line[:m.start()]
    try:
        shlex.split(head)
    except ValueError:      # an open quote: the '#' is inside it
        return line
    return head


def commands(shell: str) -> list[str]:
    """A shell block's commands: comment lines dropped, trailing comments cut, `\\` continuations joined."""
    out: list[str] = []
    pending = ""
    for raw in shell.splitlines():
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        line = _strip_comment(raw.rstrip())
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        out.append((pending + line.strip()).strip())
        pending = ""
    if pending.strip():
        out.append(pending.strip())
    return out


def substitute(text: str, replacements: Mapping[str, str]) -> str:
    """The example pointed at the test's broker and folders: each key replaced by its value, longest first."""
    for old in sorted(replacements, key=len, reverse=True):
        text = text.replace(old, replacements[old])
    return text


def readme(path: Path) -> list[Block]:
    return blocks(path.read_text())

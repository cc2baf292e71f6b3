"""House rules that no linter checks: function length, and comments that cite history.

Functions stay under MAX_LINES lines (def to last line, docstring included), like the
examples STYLE.md follows; the few that read best whole are listed with the reason. Code,
comments and docstrings explain the code, so they name no issue number: history belongs in
git and in the tracker. Run by .ci/run; exits 1 and names each place that breaks a rule.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

MAX_LINES = 40
LENGTH_ROOTS = ("archsearch",)
HISTORY_ROOTS = ("archsearch", "bench", "tests")
# path:function -> why it reads best as one piece.
LONG_FUNCTIONS_ALLOWED: dict[str, str] = {}
ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? #?\d+")
HISTORY_SUFFIXES = {".py", ".js", ".html", ".css"}


def long_functions(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            key = f"{path.as_posix()}:{node.name}"
            if length > MAX_LINES and key not in LONG_FUNCTIONS_ALLOWED:
                found.append(f"{path}:{node.lineno} {node.name} is {length} lines (> {MAX_LINES})")
    return found


def issue_numbers(path: Path) -> list[str]:
    return [
        f"{path}:{number} names an issue: {line.strip()[:80]}"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if ISSUE_NUMBER.search(line)
    ]


def sources(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.suffix in HISTORY_SUFFIXES and "vendor" not in p.parts and "__pycache__" not in p.parts
    )


def main() -> int:
    problems = []
    for root in map(Path, LENGTH_ROOTS):
        for path in sources(root):
            if path.suffix == ".py" and "migrations" not in path.parts:
                problems += long_functions(path)
    for root in map(Path, HISTORY_ROOTS):
        for path in sources(root):
            problems += issue_numbers(path)
    stale = [key for key in LONG_FUNCTIONS_ALLOWED if not Path(key.split(":")[0]).exists()]
    problems += [f"{key}: allowed as long, but the file is gone" for key in stale]
    kept = f"house rules kept: functions <= {MAX_LINES} lines, no issue numbers"
    print("\n".join(problems) or kept)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

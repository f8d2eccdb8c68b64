#!/usr/bin/env python3
"""Keeps the rooms small: no production source over 800 lines, no function
over 150.

A file past 800 lines holds more than one concern (ps_task.cpp grew to 1,476
lines and eight jobs before it was split by concern); a function past 150
lines is a sequence of steps that want names. The production code is core/,
ui/ and app/; tests, benchmarks and fuzzers are not counted.

Functions are found as clang-format leaves them (.clang-format): a definition
opens with "{" alone at the start of a line and closes with "}" alone there.
A function that must stay longer for a reason goes in LONG_FUNCTIONS with its
length and the reason; none does today.

Usage: scripts/check-sizes.py [--list N]  (--list also prints every function
over N lines, longest first). Exit status 1 names each file or function over
its limit and what to do.
"""

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PRODUCTION = ("core", "ui", "app")
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 150

# name -> the most lines it may have, with the reason beside it. Empty: every
# function is within MAX_FUNCTION_LINES.
LONG_FUNCTIONS = {}

# A line that starts a definition's signature (not a declaration, a comment,
# a preprocessor line or a closing brace).
SIGNATURE_START = re.compile(r"^[A-Za-z_~][^;]*$")
NAME = re.compile(r"([A-Za-z_][A-Za-z_0-9:~]*(?:operator\S+)?)\s*\(")


def sources():
    for top in PRODUCTION:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in (".cpp", ".h") and path.is_file():
                yield path


def functions(path):
    """(name, first line, length) of each function defined at file scope or
    in a namespace (clang-format puts their braces at column 0)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if SIGNATURE_START.match(line) and not line.startswith(("namespace", "using ", "class ", "struct ", "enum ")):
            j = i
            while j < len(lines) and lines[j] != "{" and not lines[j].rstrip().endswith((";", "}")):
                j += 1
            if j < len(lines) and lines[j] == "{":
                k = j + 1
                while k < len(lines) and lines[k] != "}" and lines[k] != "};":
                    k += 1
                match = NAME.search(" ".join(lines[i:j]))
                if match and lines[k] == "}":
                    yield match.group(1), i + 1, k - i + 1
                i = k + 1
                continue
        i += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list", type=int, metavar="N", help="print every function over N lines")
    args = parser.parse_args()

    problems = []
    every = []
    for path in sources():
        relative = path.relative_to(ROOT)
        count = path.read_text(encoding="utf-8").count("\n")
        if count > MAX_FILE_LINES:
            problems.append(
                f"{relative}: {count} lines, over {MAX_FILE_LINES}: split it by concern "
                f"(as core/node/ps_task*.cpp are), one file per job"
            )
        if path.suffix != ".cpp":
            continue
        for name, line, length in functions(path):
            every.append((length, f"{relative}:{line}", name))
            allowed = LONG_FUNCTIONS.get(name, MAX_FUNCTION_LINES)
            if length > allowed:
                why = f"over its allowance of {allowed}" if name in LONG_FUNCTIONS else f"over {MAX_FUNCTION_LINES}"
                problems.append(f"{relative}:{line}: {name} is {length} lines, {why}: give its steps names")

    if args.list is not None:
        for length, where, name in sorted(every, reverse=True):
            if length > args.list:
                print(f"{length:5}  {name}  ({where})")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    if args.list is None:
        allowed = f" (but {', '.join(LONG_FUNCTIONS)})" if LONG_FUNCTIONS else ""
        print(f"every production file is at most {MAX_FILE_LINES} lines, every function at most "
              f"{MAX_FUNCTION_LINES}{allowed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks that formatting changed only whitespace and comments: every tracked C++/CUDA source's code (comments and all
whitespace removed, string and raw-string literals kept whole) equals the same file's code at a git revision.
Run after `clang-format -i` over the tree, before committing it:
    python3 tests/tools/format_changes_whitespace_only.py [REV, default HEAD]
Prints each file whose code differs and exits 1 if any."""
import re
import subprocess
import sys

TOKENS = re.compile(rb'''(R"([^(\s]*)\((?:.|\n)*?\)\2")|("(?:\\.|[^"\\\n])*")|('(?:\\.|[^'\\\n])*')|(//[^\n]*)|(/\*(?:.|\n)*?\*/)''')


def code(text: bytes) -> bytes:
    text = text.replace(b'\\\n', b'\n')  # line continuations move when a macro is re-wrapped
    text = TOKENS.sub(lambda m: b' ' if (m.group(5) or m.group(6)) else m.group(0), text)
    return re.sub(rb'\s+', b'', text)


def main() -> int:
    rev = sys.argv[1] if len(sys.argv) > 1 else 'HEAD'
    files = subprocess.run(['git', 'ls-files', '*.h', '*.cpp', '*.cu', '*.cuh'], capture_output=True, text=True,
                           check=True).stdout.split()
    differ = []
    for f in files:
        before = subprocess.run(['git', 'show', f'{rev}:{f}'], capture_output=True).stdout
        with open(f, 'rb') as fh:
            after = fh.read()
        if before != after and code(before) != code(after):
            differ.append(f)
    for f in differ:
        print('code differs:', f)
    print(f'{len(files)} files checked against {rev}; code differs in {len(differ)}')
    return 1 if differ else 0


if __name__ == '__main__':
    sys.exit(main())

#!/usr/bin/env bash
# Fails when a C++ file of the repository (tracked, or new and not ignored) does not match .clang-format or has a line
# past 120 columns, or when a .cpp does not open with a comment saying what it is for.
#   scripts/check_format.sh          check (the `format_check` test runs this)
#   scripts/check_format.sh --fix    rewrite the files in place
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format}
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' 2>/dev/null ||
                        find src include tests profiling -name '*.[ch]pp')
if [ "${1:-}" = --fix ]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
status=0
if ! "$clang_format" --dry-run --Werror "${files[@]}" 2> /tmp/astraflow_format.$$; then
  grep -E '^[^ ].*(warning|error):' /tmp/astraflow_format.$$ | head -40 >&2
  echo "check_format: files differ from .clang-format (scripts/check_format.sh --fix rewrites them)" >&2
  status=1
fi
rm -f /tmp/astraflow_format.$$
# Columns are characters, not bytes (comments hold UTF-8 arrows and symbols).
long=$(python3 - "${files[@]}" <<'PY'
import sys
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            width = len(line.rstrip("\n"))
            if width > 120:
                print(f"{path}:{n}: {width} columns")
PY
)
# The first line of every .cpp is a comment: what the file is for.
bare=$(for f in "${files[@]}"; do
  case "$f" in *.cpp) case "$(head -1 "$f")" in //*) ;; *) echo "$f: does not open with a comment saying what it is for" ;; esac ;; esac
done)
if [ -n "$bare" ]; then
  echo "$bare" | head -40 >&2
  status=1
fi
if [ -n "$long" ]; then
  echo "$long" | head -40 >&2
  echo "check_format: lines past the 120-column limit" >&2
  status=1
fi
[ $status -eq 0 ] && echo "check_format: ${#files[@]} files match .clang-format, none past 120 columns, every .cpp opens with its purpose"
exit $status

#!/usr/bin/env bash
# What the sandbox (include/astraflow/tasks/sandbox.hpp) costs a run: N sandboxed runs of a
# trivial passing Python program beside N plain `python3 -c pass` runs (posix_spawn), measured
# side by side in one process (build/bin/bench_sandbox), then the same with /bin/true as the
# interpreter, where the start-up of the program itself is next to nothing and the sandbox's
# own cost shows. Prints one JSON line each: runs/s of both, their ratio, milliseconds added.
#   profiling/bench_sandbox.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
build/bin/bench_sandbox "$n" /usr/bin/python3
build/bin/bench_sandbox "$n" /bin/true

#!/usr/bin/env bash
# OpenEnv episodes per second against one local server (examples/openenv_guess, written with
# openenv-core): astraflow's `openenv` environment with 1, 16 and 64 sessions open at once
# (build/bin/bench_openenv), then the same games through openenv-core's own Python client, one
# session, as the reference for the per-step cost. N episodes each (default 256).
#   profiling/bench_openenv.sh [N]      (configure with -DASTRAFLOW_ENABLE_BENCHMARKS=ON first)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-256}
build/bin/bench_openenv .venv/bin/python examples/openenv_guess/server.py "$n"
.venv/bin/python profiling/bench_openenv_reference.py examples/openenv_guess/server.py "$n"

#!/usr/bin/env bash
# Runs profiling/plot_run.py with the project's .venv (h5py and matplotlib, pinned in
# requirements/test.txt and profiling.txt; scripts/setup.sh installs them):
#   profiling/plot_run.sh RUN_DIR [OUT_DIR] [--window START:END]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c "import h5py, matplotlib" 2>/dev/null; then
  echo "plot_run: .venv lacks h5py or matplotlib; run scripts/setup.sh first" >&2
  exit 2
fi
exec .venv/bin/python profiling/plot_run.py "$@"

#!/usr/bin/env bash
# Installs what profiling/plot_run.py needs (Debian's python3-h5py and python3-matplotlib,
# only when missing) and runs it:  profiling/plot_run.sh RUN_DIR [OUT_DIR] [--window START:END]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c "import h5py, matplotlib" 2>/dev/null; then
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_=sudo
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -q --no-install-recommends python3-h5py python3-matplotlib >/dev/null
fi
exec /usr/bin/python3 profiling/plot_run.py "$@"

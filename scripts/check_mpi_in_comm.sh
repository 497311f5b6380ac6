#!/usr/bin/env bash
# Every MPI call and every raw communicator or window handle stays inside the comm module
# (docs/architecture.md §2): the other modules use Comm's and Win's typed operations. Fails,
# naming the lines, on an MPI_*( call or a .raw() under src/ or include/ outside comm.
# src/core/error.cpp is the one exception: core is below comm, and its error text names the
# failing rank (MPI_Initialized/MPI_Comm_rank, no communication).
set -uo pipefail
cd "$(dirname "$0")/.."
hits=$(grep -rnE '\bMPI_[A-Z][A-Za-z_]*\(|[.>]raw\(\)' src include --include='*.cpp' --include='*.hpp' |
  grep -vE '^(src/comm/|include/astraflow/comm/|src/core/error\.cpp:)')
if [ -n "$hits" ]; then
  echo "MPI outside the comm module (use Comm/Win's typed operations; docs/architecture.md §2):"
  echo "$hits"
  exit 1
fi
echo "check_mpi_in_comm: every MPI call is inside comm"

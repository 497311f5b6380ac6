# Sourced by profiling/sim_*.sh (docs/simulation.md): the options every simulation experiment
# shares, the Python packages its tables and figures need, and its work folder.
#   sim_parse "$@"   sets $plot (--plot PNG), $args (the positional arguments) and opt[NAME]
#                    for every other --NAME VALUE
#   sim_need_python  sets $py to the project's .venv python, refusing when it lacks h5py or
#                    matplotlib (requirements/profiling.txt: scripts/setup.sh installs them)
#   sim_workdir NAME sets $out to a new folder, removed on exit unless KEEP is set
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$here/scripts/env.sh"
declare -A opt
sim_parse() {
  plot=""
  args=()
  while [ $# -gt 0 ]; do
    case $1 in
      --plot) plot=$2; shift 2 ;;
      --*) opt[${1#--}]=$2; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
}
sim_need_python() {
  py="$here/.venv/bin/python"
  "$py" -c "import h5py, matplotlib" 2>/dev/null && return
  echo "profiling: .venv lacks h5py or matplotlib; run scripts/setup.sh (it installs requirements/profiling.txt)" >&2
  exit 1
}
sim_workdir() {
  out=$(mktemp -d)
  trap '[ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT
  echo "$1: runs in $out" >&2
}

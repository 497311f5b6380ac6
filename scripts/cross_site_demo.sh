#!/usr/bin/env bash
# Cross-site rollout on one machine (docs/cross-site.md): the home job
# (configs/cross_site_home.yaml: dataflow, trainer, one rollout rank) and a remote site's job
# (configs/cross_site_remote.yaml: gateway + one rollout rank) as two separate mpiruns that meet
# only over UCX. By default over loopback; with --shaped, each job runs in its own network
# namespace behind an emulated slow link (scripts/shape_link.sh, root).
#
#   scripts/cross_site_demo.sh [--shaped [--rate 4gbit] [--rtt 300ms]] [--set key=value ...]
#
# Extra --set arguments go to the home job. The shared token comes from ASTRAFLOW_SITE_TOKEN
# (a random one is made when it is unset). Outputs: runs/cross_site_home/, runs/cross_site_remote/
# and their logs next to them.
set -euo pipefail
cd "$(dirname "$0")/.."
ASTRAFLOW_REQUIREMENTS=build bash scripts/setup.sh
source scripts/env.sh

shaped=0 shape_args=() home_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --shaped) shaped=1; shift ;;
    --rate|--rtt) shape_args+=("$1" "$2"); shift 2 ;;
    *) home_args+=("$1"); shift ;;
  esac
done

warm=$(build/bin/astraflow warm-start-path configs/cross_site_home.yaml)
if [ ! -e "$warm" ]; then
  echo "cross_site_demo: making the warm start ($warm, the quickstart's)" >&2
  build/bin/astraflow sft configs/cross_site_home.yaml >/dev/null
fi
export ASTRAFLOW_SITE_TOKEN=${ASTRAFLOW_SITE_TOKEN:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}

home_prefix=() remote_prefix=() address=127.0.0.1:17417
if [ $shaped = 1 ]; then
  bash scripts/shape_link.sh up "${shape_args[@]}"
  trap 'bash scripts/shape_link.sh down' EXIT
  home_prefix=(bash scripts/shape_link.sh exec home --)
  remote_prefix=(bash scripts/shape_link.sh exec remote --)
  address=10.77.0.1:17417
fi

mkdir -p runs
echo "cross_site_demo: home listens on $address; logs in runs/cross_site_{home,remote}.log"
"${home_prefix[@]}" mpirun -np "$(build/bin/astraflow layout-size configs/cross_site_home.yaml)" \
  build/bin/astraflow run configs/cross_site_home.yaml --set cross_site.listen="$address" "${home_args[@]}" \
  >runs/cross_site_home.log 2>&1 &
home_pid=$!
"${remote_prefix[@]}" mpirun -np "$(build/bin/astraflow layout-size configs/cross_site_remote.yaml)" \
  build/bin/astraflow run configs/cross_site_remote.yaml --set cross_site.connect="$address" \
  >runs/cross_site_remote.log 2>&1 || echo "cross_site_demo: the remote job failed (runs/cross_site_remote.log)" >&2
wait "$home_pid" || { echo "cross_site_demo: the home job failed (runs/cross_site_home.log)" >&2; exit 1; }

python3 - runs/cross_site_home/summary.json runs/cross_site_remote/summary.json <<'EOF'
import json, sys
home, remote = (json.load(open(p)) for p in sys.argv[1:3])
trainer = [r for r in home["ranks"] if r["role"] == "trainer"][0]
gw = remote["gateway"]
w = home["weights"]["policies"]["solver"]
print(f"home: {home['versions']} versions in {home['wall_seconds']:.1f} s, eval {home['eval_accuracy_start']} -> "
      f"{home['eval_accuracy_end']}; produced {home['produced']}, consumed {home['consumed']}, "
      f"stale {home['stale_dropped']}")
for name, s in home["cross_site"]["sites"].items():
    print(f"site {name}: {s['tasks_sent']} tasks sent, {s['trajectories']} trajectories back, "
          f"{s['weight_updates']} weight updates ({s['weight_full_updates']} full), {s['weight_bytes']} bytes "
          f"(full versions would be {s['weight_updates'] * w['version_bytes']})")
print(f"trainer: {trainer['trajectories_trained']} trajectories trained, "
      f"{trainer['trajectories_from_remote_sites']} from the remote site")
same = gw["weights_hash.solver"] == trainer["weights_hash"]
print(f"remote weights v{gw['final_version.solver']:.0f}: {'bit-identical to' if same else 'DIFFERENT from'} the trainer's")
EOF

#!/usr/bin/env bash
# Emulates a slow inter-site link on one machine (docs/cross-site.md): two network namespaces,
# af_home (10.77.0.1) and af_remote (10.77.0.2), joined by a veth pair whose both ends are shaped
# with tc — netem for delay (half the RTT each way) and rate, or, on kernels without sch_netem,
# tbf for the rate alone (the script says which it got).
#
#   scripts/shape_link.sh up [--rate 4gbit] [--rtt 300ms]   create and shape (root)
#   scripts/shape_link.sh exec home|remote -- CMD...          run CMD inside a namespace
#   scripts/shape_link.sh status                              addresses and qdiscs
#   scripts/shape_link.sh down                                remove everything it made
set -euo pipefail
cd "$(dirname "$0")/.."

home_ns=af_home remote_ns=af_remote
home_ip=10.77.0.1 remote_ip=10.77.0.2

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "shape_link: needs root (network namespaces and tc)" >&2
    exit 1
  fi
  if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    echo "shape_link: installing iproute2" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2 >/dev/null
  fi
}

shape() {  # shape <namespace> <device> <rate> <one-way delay>
  local ns=$1 dev=$2 rate=$3 delay=$4
  if tc -n "$ns" qdisc add dev "$dev" root netem delay "$delay" rate "$rate" 2>/dev/null; then
    echo "shape_link: $ns/$dev netem delay $delay rate $rate"
  else
    tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst 256kb latency 50ms
    echo "shape_link: $ns/$dev tbf rate $rate — this kernel has no sch_netem, so no delay is added" >&2
  fi
}

down() {
  ip netns del "$home_ns" 2>/dev/null || true
  ip netns del "$remote_ns" 2>/dev/null || true
}

case "${1:-}" in
  up)
    shift
    rate=4gbit rtt=300ms
    while [ $# -gt 0 ]; do
      case $1 in
        --rate) rate=$2; shift 2 ;;
        --rtt) rtt=$2; shift 2 ;;
        *) echo "shape_link: unknown option $1 (allowed: --rate R, --rtt T)" >&2; exit 2 ;;
      esac
    done
    need_root
    down
    ms=${rtt%ms}
    [[ $ms =~ ^[0-9]+$ ]] || { echo "shape_link: --rtt must be in ms, e.g. 300ms (given $rtt)" >&2; exit 2; }
    ip netns add "$home_ns"
    ip netns add "$remote_ns"
    ip link add af_veth_h type veth peer name af_veth_r
    ip link set af_veth_h netns "$home_ns"
    ip link set af_veth_r netns "$remote_ns"
    ip -n "$home_ns" addr add "$home_ip/24" dev af_veth_h
    ip -n "$remote_ns" addr add "$remote_ip/24" dev af_veth_r
    for ns in "$home_ns" "$remote_ns"; do ip -n "$ns" link set lo up; done
    ip -n "$home_ns" link set af_veth_h up
    ip -n "$remote_ns" link set af_veth_r up
    shape "$home_ns" af_veth_h "$rate" "$((ms / 2))ms"
    shape "$remote_ns" af_veth_r "$rate" "$((ms / 2))ms"
    echo "shape_link: up — home $home_ip ($home_ns), remote $remote_ip ($remote_ns)"
    ;;
  exec)
    need_root
    side=${2:-}
    [ "${3:-}" = "--" ] || { echo "usage: shape_link.sh exec home|remote -- CMD..." >&2; exit 2; }
    shift 3
    case $side in
      home) exec ip netns exec "$home_ns" "$@" ;;
      remote) exec ip netns exec "$remote_ns" "$@" ;;
      *) echo "shape_link: exec home|remote (given '$side')" >&2; exit 2 ;;
    esac
    ;;
  status)
    for ns in "$home_ns" "$remote_ns"; do
      echo "== $ns"
      ip -n "$ns" -brief addr 2>/dev/null || echo "(absent)"
      tc -n "$ns" qdisc show 2>/dev/null | grep -v "noqueue" || true
    done
    ;;
  down)
    need_root
    down
    echo "shape_link: down"
    ;;
  *)
    sed -n '2,10p' "$0"
    exit 2
    ;;
esac

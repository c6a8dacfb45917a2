#!/usr/bin/env bash
# Start this node's Ray: the head of the training cluster, or a worker that joins it.
#
#   ROLE=head   NODE_IP=10.0.0.1 GPUS_PER_NODE=8 scripts/start_ray.sh
#   ROLE=worker NODE_IP=10.0.0.2 HEAD_ADDRESS=10.0.0.1:6379 GPUS_PER_NODE=8 scripts/start_ray.sh
#   DRY_RUN=true ROLE=head NODE_IP=10.0.0.1 GPUS_PER_NODE=8 scripts/start_ray.sh   (print, start nothing)
#
# Variables:
#   ROLE            head | worker
#   NODE_IP         this node's IP address (IPv4 or IPv6), the one the other nodes reach it on
#   GPUS_PER_NODE   GPUs this node gives Ray (a non-negative integer); unset: Ray detects them
#   head only:      RAY_PORT (GCS port, default 6379), DASHBOARD_PORT (default 8265),
#                   DASHBOARD_HOST (default NODE_IP: the dashboard is not bound to 0.0.0.0
#                   unless DASHBOARD_HOST=0.0.0.0 says so)
#   worker only:    HEAD_ADDRESS (host:port of the head's GCS, e.g. 10.0.0.1:6379)
#   DRY_RUN         true: print the node checks and the `ray start ...` command; start nothing, exit 0
#   RAY             the ray executable (default: .venv/bin/ray if present, else ray on PATH); the node
#                   checks run with the python beside it (the environment Ray's workers will run)
#   NODE_CHECK      false: start Ray without this node's checks (the launch checks every node again)
#   CONFIG, CKPT_DIR, TBT_USER_SPEC, TBT_JUDGE_SPEC, ... as scripts/run_train.sh takes them: optional;
#                   with CONFIG the node checks cover the config's inputs and endpoints too
#
# Before Ray starts, this node is checked (python -m trainer.verl.node_check, trainer/verl/nodes.py): verl
# with every patch of trainer/verl/patches in force, the process hooks loaded by verl, and with CONFIG
# set the config's data, model and dataset paths, its user / judge endpoints from this node, and what
# it needs here (its compiled kernels import, its tracker can start, ninja and nvcc on the workers'
# PATH, room for the kept checkpoints: trainer/verl/node_needs.py). The environment's bin/ and
# $CUDA_HOME/bin (default /usr/local/cuda) go first on the PATH Ray's workers inherit. With
# CKPT_DIR set, the head writes a marker there that each worker must read (one shared filesystem).
# A node that fails is not started: its problems and their fixes, exit 1.
# Arguments are passed on to `ray start` (e.g. --temp-dir /scratch/ray --block).
# Bad variables: one message naming the variable, exit 2. Stop a node with `ray stop` on it.
# -h / --help as the first argument: this text (ray's own: ray start --help).
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi

die() { echo "start_ray.sh: $*" >&2; exit 2; }

is_ipv4() {
  local ip=$1 part parts
  [[ $ip =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
  IFS=. read -r -a parts <<<"$ip"
  for part in "${parts[@]}"; do
    ((10#$part <= 255)) || return 1
  done
}

is_ipv6() {  # syntax only: hex groups and colons (at most one ::), or an IPv4 tail
  local ip=$1
  [[ $ip =~ ^[0-9A-Fa-f:.]{2,45}$ && $ip == *:*:* ]] || return 1
  [[ $ip != *:::* ]] || return 1
  local rest=${ip#*::}
  [[ $rest != *::* ]] || return 1
}

is_ip() { is_ipv4 "$1" || is_ipv6 "$1"; }

is_hostname() {
  [[ $1 =~ ^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$ ]]
}

check_port() {  # NAME VALUE
  [[ $2 =~ ^[0-9]{1,5}$ ]] && ((10#$2 >= 1 && 10#$2 <= 65535)) \
    || die "$1=$2: not a port number (1-65535)"
}

check_ip() {  # NAME VALUE
  [[ -n $2 ]] || die "$1 is not set (this node's IP address, e.g. 10.0.0.1)"
  is_ip "$2" || die "$1=$2: not an IPv4 or IPv6 address"
}

case "${DRY_RUN:-false}" in
  true | 1 | yes) dry_run=true ;;
  false | 0 | no | "") dry_run=false ;;
  *) die "DRY_RUN=${DRY_RUN}: must be true or false" ;;
esac

[[ -n ${ROLE:-} ]] || die "ROLE is not set (head or worker)"
[[ $ROLE == head || $ROLE == worker ]] || die "ROLE=${ROLE}: must be head or worker"
check_ip NODE_IP "${NODE_IP:-}"

gpus=()
if [[ -n ${GPUS_PER_NODE:-} ]]; then
  [[ $GPUS_PER_NODE =~ ^[0-9]+$ ]] || die "GPUS_PER_NODE=${GPUS_PER_NODE}: not a non-negative integer"
  gpus=(--num-gpus "$((10#$GPUS_PER_NODE))")
fi

case "$ROLE" in
  head)
    port=${RAY_PORT:-6379}
    dashboard_port=${DASHBOARD_PORT:-8265}
    dashboard_host=${DASHBOARD_HOST:-$NODE_IP}
    check_port RAY_PORT "$port"
    check_port DASHBOARD_PORT "$dashboard_port"
    is_ip "$dashboard_host" || die "DASHBOARD_HOST=${dashboard_host}: not an IPv4 or IPv6 address"
    [[ $((10#$port)) != $((10#$dashboard_port)) ]] || die "RAY_PORT=$port and DASHBOARD_PORT=$dashboard_port: the same port"
    cmd=(start --head --node-ip-address "$NODE_IP" --port "$((10#$port))" "${gpus[@]}"
         --dashboard-host "$dashboard_host" --dashboard-port "$((10#$dashboard_port))")
    ;;
  worker)
    head=${HEAD_ADDRESS:-}
    [[ -n $head ]] || die "HEAD_ADDRESS is not set (the head's host:port, e.g. 10.0.0.1:6379)"
    [[ $head == *:* ]] || die "HEAD_ADDRESS=${head}: not host:port"
    host=${head%:*}
    head_port=${head##*:}
    if [[ $host == \[*\] ]]; then
      is_ipv6 "${host:1:${#host}-2}" || die "HEAD_ADDRESS=${head}: [${host:1:${#host}-2}] is not an IPv6 address"
    elif [[ $host == *:* ]]; then
      die "HEAD_ADDRESS=${head}: write an IPv6 head as [address]:port"
    else
      { [[ -n $host ]] && { is_ipv4 "$host" || { [[ ! $host =~ ^[0-9.]+$ ]] && is_hostname "$host"; }; }; } \
        || die "HEAD_ADDRESS=${head}: '${host}' is not an IP address or host name"
    fi
    [[ $head_port =~ ^[0-9]{1,5}$ ]] && ((10#$head_port >= 1 && 10#$head_port <= 65535)) \
      || die "HEAD_ADDRESS=${head}: '${head_port}' is not a port number (1-65535)"
    cmd=(start --address "$head" --node-ip-address "$NODE_IP" "${gpus[@]}")
    ;;
esac
[[ -n ${GPUS_PER_NODE:-} ]] || echo "start_ray.sh: GPUS_PER_NODE is not set: Ray detects this node's GPUs" >&2

cd "$(dirname "$0")/.."
if [[ -n ${RAY:-} ]]; then
  ray=$RAY
elif [[ -x .venv/bin/ray ]]; then
  ray=.venv/bin/ray
else
  ray=ray
fi

case "${NODE_CHECK:-true}" in
  true | 1 | yes) node_check=true ;;
  false | 0 | no) node_check=false ;;
  *) die "NODE_CHECK=${NODE_CHECK}: must be true or false" ;;
esac
if [[ $ray == */* && -x $(dirname "$ray")/python ]]; then
  py=$(dirname "$ray")/python  # the environment this Ray runs
elif [[ -x .venv/bin/python ]]; then
  py=.venv/bin/python
else
  py=python
fi
# the PATH this node's Ray workers get: the environment's bin/ (ninja; vLLM's FlashInfer JIT-compiles
# with it) and the CUDA toolkit's (nvcc), ahead of the rest; a daemon started without them cannot
# get them later
bin_dir=$(cd "$(dirname "$(command -v "$py" || echo "$py")")" 2>/dev/null && pwd || true)
cuda_bin="${CUDA_HOME:-/usr/local/cuda}/bin"
for d in "$cuda_bin" "$bin_dir"; do
  [[ -n $d && -d $d && :$PATH: != *:$d:* ]] && PATH="$d:$PATH"
done
export PATH
if [[ $node_check == true ]]; then
  if [[ $dry_run == true ]]; then
    NODE_IP=$NODE_IP "$py" -m trainer.verl.node_check --role "$ROLE" --dry-run || exit $?
  else
    NODE_IP=$NODE_IP "$py" -m trainer.verl.node_check --role "$ROLE" \
      || { echo "start_ray.sh: node $NODE_IP not ready (the FAIL line above): Ray not started here (NODE_CHECK=false skips the check)" >&2; exit 1; }
  fi
fi

if [[ $dry_run == true ]]; then
  printf '%q' "$ray"
  printf ' %q' "${cmd[@]}" "$@"
  printf '\n'
  exit 0
fi
command -v "$ray" >/dev/null || die "RAY=${ray}: no such executable (uv sync, or set RAY)"
exec "$ray" "${cmd[@]}" "$@"

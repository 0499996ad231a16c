#!/usr/bin/env bash
# One click: the hymt appliance with Docker and the NVIDIA runtime, or natively (--native) under the same
# supervisord programs. Usage: ./start.sh [--native] [--model DIR | --test-model] [--port N] [--stop] [--help]
# --test-model: natively, on a tiny random-weight model (no GPU or checkpoint needed; it translates into noise).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)

native=0; stop=0; model=""; port=""; test_model=0
while [ $# -gt 0 ]; do
  case "$1" in
    --native) native=1 ;;
    --stop) stop=1 ;;
    --test-model) native=1; test_model=1 ;;
    --model) [ $# -ge 2 ] || { echo "start.sh: --model needs a directory" >&2; exit 2; }; model=$2; shift ;;
    --port) [ $# -ge 2 ] || { echo "start.sh: --port needs a number" >&2; exit 2; }; port=$2; shift ;;
    -h|--help) sed -n '2,4p' "$0" | sed 's/^# //'; exit 0 ;;
    *) echo "start.sh: unknown option $1 (see ./start.sh --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$model" ] && [ "$test_model" = 1 ]; then
  echo "start.sh: --model and --test-model exclude each other" >&2; exit 2
fi
if [ -n "$model" ]; then
  [ -f "$model/config.json" ] || { echo "start.sh: $model is not a model directory (no config.json)" >&2; exit 2; }
  model=$(cd "$model" && pwd)
fi
if [ -n "$port" ] && ! [[ "$port" =~ ^[0-9]+$ ]]; then echo "start.sh: --port must be a number" >&2; exit 2; fi

# "unhealthy" is not an end: a server that failed to load answers it until it exits, and a server that stays
# unhealthy is restarted by the health service, which says "failed" once supervisord or it gives up.
wait_healthy() {  # $1: command printing the probe's answer (its first word the state), $2: URL
  local started=$SECONDS state
  while :; do
    probe_answer=$($1 2>/dev/null || true)
    state=${probe_answer%%[: $'\n']*}
    printf '\rwaiting for the model to load: %-10s %4ds ' "${state:-starting}" $((SECONDS - started))
    case "$state" in
      healthy|degraded) printf '\nhymt is ready: %s\n' "$2"; return 0 ;;
      failed|stopped) printf '\n'; return 1 ;;
    esac
    sleep 2
  done
}

# --- natively, under the same supervisord configuration as the image ---------------------------------------------
# With a GPU, the image's torch (the Dockerfile's TORCH_VERSION and index: what the benchmarks measured); without
# one, the CPU build the tests run.
TORCH_GPU=2.11.0
TORCH_GPU_INDEX=https://download.pytorch.org/whl/cu130
TORCH_CPU=2.13.0
TORCH_CPU_INDEX=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}

# .venv with torch and the pinned packages; pip runs only when pyproject.toml or the kind of torch changed. $1: 1
# with a GPU (torch's CUDA 13.0 build), 0 without (the CPU build, so no NVIDIA wheels).
install_venv() {
  local stamp_file=.venv/.hymt-installed stamp torch
  if [ "$1" = 1 ]; then torch=$TORCH_GPU; else torch=$TORCH_CPU; fi
  stamp="torch $torch gpu=$1 $(sha256sum pyproject.toml | cut -d' ' -f1)"
  if [ ! -x .venv/bin/python ]; then
    echo "creating .venv"; python3 -m venv .venv
  fi
  if [ -x .venv/bin/hymt ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  echo "installing hymt and its pinned dependencies into .venv (once; again only when they change)"
  local pip=(.venv/bin/pip install -q --disable-pip-version-check)
  if [ "$1" = 1 ]; then
    "${pip[@]}" --index-url "$TORCH_GPU_INDEX" "torch==$torch"
    "${pip[@]}" -e ".[gpu]"
    .venv/bin/python -m hymt.engine.humming_cache  # its compiled kernels stay valid across reinstalls
  else
    # A CPU build this machine's pip already holds (a local wheelhouse) is taken without asking PyTorch's index,
    # which may be out of reach; otherwise PyTorch's CPU index serves it.
    if "${pip[@]}" --dry-run --no-index --no-deps "torch==$torch+cpu" >/dev/null 2>&1; then
      "${pip[@]}" "torch==$torch+cpu"
    else
      "${pip[@]}" --extra-index-url "$TORCH_CPU_INDEX" "torch==$torch+cpu"
    fi
    "${pip[@]}" -e .
  fi
  echo "$stamp" >"$stamp_file"
}

# supervisord's shutdown only asks; wait (the programs' stop timeouts and a margin) until it has exited.
stop_native() {
  local pid; pid=$(cat "$HYMT_RUN_DIR/supervisord.pid" 2>/dev/null || true)
  if ! [ -x .venv/bin/supervisorctl ] || ! .venv/bin/supervisorctl -s "$1" shutdown >/dev/null 2>&1; then
    echo "hymt is not running"; return 0
  fi
  local started=$SECONDS
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do
    if [ $((SECONDS - started)) -ge 60 ]; then
      echo "start.sh: supervisord ($pid) is still stopping after 60 s" >&2; exit 1
    fi
    sleep 0.5
  done
  echo "hymt stopped"
}

run_native() {
  export HYMT_ROOTFS="$ROOT/rootfs" HYMT_RUN_DIR="$ROOT/.run" HYMT_LOG_DIR="$ROOT/.run/logs"
  export HYMT_COMPILE_CACHE_DIR="${HYMT_COMPILE_CACHE_DIR:-$ROOT/.cache/compile}"
  export HYMT_DATA_DIR="${HYMT_DATA_DIR:-$ROOT/.run/data}"
  export HYMT_PYTHON="$ROOT/.venv/bin/python" HYMT_SUPERVISORD="$ROOT/.venv/bin/supervisord"
  local sock="unix://$HYMT_RUN_DIR/supervisor.sock"
  if [ "$stop" = 1 ]; then stop_native "$sock"; return 0; fi
  command -v python3 >/dev/null || { echo "start.sh: python3 is missing: install Python 3.11 or newer" >&2; exit 1; }
  local gpu=0
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi
  if [ "$gpu" = 0 ] && [ -z "$model" ] && [ "$test_model" = 0 ] && [ -z "${HYMT_MODEL:-}" ]; then
    echo "start.sh: no GPU found (nvidia-smi) and no model given: ./start.sh --test-model shows the appliance on a" \
         "tiny random-weight model, ./start.sh --native --model DIR serves a checkpoint on disk" >&2
    exit 2
  fi
  install_venv "$gpu"
  if [ "$test_model" = 1 ]; then
    model="$ROOT/.cache/test-model"
    [ -f "$model/config.json" ] || .venv/bin/hymt make-test-model "$model" >/dev/null
    echo "the test model has random weights: the appliance works, but its translations are random tokens"
  fi
  [ -n "$model" ] && export HYMT_MODEL="$model"
  if [ -z "${HYMT_MODEL:-}" ]; then
    echo "no --model: the first start downloads tencent/Hunyuan-MT-7B (about 16 GB) from the Hugging Face hub"
  fi
  # Port 80 needs root outside a container; natively the default is 8080.
  export HYMT_PORT="${port:-${HYMT_PORT:-8080}}"
  if .venv/bin/supervisorctl -s "$sock" status hymt-server >/dev/null 2>&1; then
    echo "start.sh: hymt is already running natively (./start.sh --native --stop first)" >&2; exit 1
  fi
  mkdir -p "$HYMT_LOG_DIR"
  # Appended to (O_APPEND): supervisord's programs that log to /dev/stdout open the file again, and without
  # O_APPEND their lines and supervisord's would overwrite each other.
  : >"$HYMT_LOG_DIR/appliance.log"
  setsid nohup rootfs/usr/local/bin/hymt-entrypoint >>"$HYMT_LOG_DIR/appliance.log" 2>&1 < /dev/null &
  local pid=$!
  # As in the container: the health service says "failed" (with the reason) when supervisord gives up on the
  # server, and an entrypoint that ended has refused the setup.
  probe() {
    if ! kill -0 "$pid" 2>/dev/null; then echo "stopped: the entrypoint exited"; return; fi
    "$HYMT_PYTHON" -m healthcheck.probe --port "$HYMT_PORT" --log-tail
  }
  if ! wait_healthy probe "http://localhost:$HYMT_PORT/"; then
    local why
    case "$probe_answer" in
      failed:*) echo "start.sh: the appliance did not come up: ${probe_answer#failed: }" >&2 ;;
      # appliance.log is this start's alone (the programs' own logs go on from earlier starts).
      *) why=$(grep 'hymt: cannot start\|hymt: error' "$HYMT_LOG_DIR/appliance.log" 2>/dev/null | tail -n 1 || true)
         echo "start.sh: the appliance did not come up: ${why:-see the logs in $HYMT_LOG_DIR}" >&2 ;;
    esac
    # A start that failed does not keep retrying in the background: shut down, and wait until it has.
    .venv/bin/supervisorctl -s "$sock" shutdown >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    exit 1
  fi
  [ "$test_model" = 1 ] && echo "(the test model: its translations are random tokens)"
  echo "logs: $HYMT_LOG_DIR; stop with ./start.sh --native --stop"
}

# --- with Docker and the NVIDIA container runtime -----------------------------------------------------------------
run_docker() {
  if [ "$stop" = 1 ]; then docker compose down; return 0; fi
  if ! docker info >/dev/null 2>&1; then
    echo "start.sh: Docker's engine is not reachable (is the daemon running, may this user use it?); or run ./start.sh --native" >&2
    exit 1
  fi
  if ! docker info --format '{{json .Runtimes}}' | grep -q nvidia && ! docker info 2>/dev/null | grep -qi 'cdi.*nvidia'; then
    echo "start.sh: the NVIDIA container runtime is missing: install nvidia-container-toolkit, or run ./start.sh --native" >&2
    exit 1
  fi
  [ -n "$model" ] && export HYMT_MODEL_DIR="$model" HYMT_MODEL_ID=""
  [ -n "$port" ] && export HYMT_HOST_PORT="$port"
  if ! docker image inspect "${HYMT_IMAGE:-hymt:latest}" >/dev/null 2>&1; then
    echo "building the image (downloads the model once; this takes a while)"
    docker compose build
  fi
  docker compose up -d
  local cid; cid=$(docker compose ps -q hymt)
  # Docker's own health status stays "starting" for the whole start period (15 minutes) however the start goes;
  # the probe inside the container knows at once when the server cannot start (and a container that stopped or
  # restarts has failed: its entrypoint refused the setup). The answer that ended the wait is the one reported:
  # asking again could meet the health service between two checks.
  probe() {
    local state; state=$(docker inspect --format '{{.State.Status}} {{.RestartCount}}' "$cid")
    [ "$state" = "running 0" ] || { echo "stopped: the container is ${state:-gone}"; return; }
    docker exec "$cid" hymt-probe --log-tail
  }
  if ! wait_healthy probe "http://localhost:${HYMT_HOST_PORT:-80}/"; then
    local why
    case "$probe_answer" in
      failed:*) echo "start.sh: the container did not come up: ${probe_answer#failed: }" >&2 ;;
      *) why=$(docker logs --tail 50 "$cid" 2>&1 | grep 'hymt: cannot start\|could not start' | tail -n 1 || true)
         echo "start.sh: the container did not come up: ${why:-see docker compose logs hymt}" >&2
         echo "its last log lines:" >&2
         docker compose logs --no-log-prefix --tail 15 hymt 2>&1 | sed "s/^/  /" >&2 || true ;;
    esac
    echo "(docker compose logs hymt for more; ./start.sh --stop to remove it)" >&2
    exit 1
  fi
}

if [ "$native" = 1 ]; then
  run_native
elif ! command -v docker >/dev/null 2>&1; then
  echo "Docker is not installed: starting natively (use --native to skip this check)"
  run_native
else
  run_docker
fi

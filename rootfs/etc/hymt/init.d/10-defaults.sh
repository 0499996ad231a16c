# Defaults for every setting supervisord's files read as %(ENV_...)s; a value already in the environment wins.
set -eu
export HYMT_RUN_DIR="${HYMT_RUN_DIR:-/run/hymt}"
export HYMT_LOG_DIR="${HYMT_LOG_DIR:-/var/log/hymt}"
export HYMT_PYTHON="${HYMT_PYTHON:-python3}"
export HYMT_SUPERVISORD="${HYMT_SUPERVISORD:-supervisord}"
export HYMT_PORT="${HYMT_PORT:-80}"
export HYMT_HEALTH_PORT="${HYMT_HEALTH_PORT:-8081}"
export HYMT_DECISION_FILE="${HYMT_DECISION_FILE:-$HYMT_RUN_DIR/decision.json}"
# Seconds supervisord waits for the server to stop before SIGKILL (also ends a hung, stopped process).
export HYMT_STOP_WAIT_S="${HYMT_STOP_WAIT_S:-35}"
# Seconds the server must stay up for supervisord to count a start as good (see conf.d/hymt-server.conf).
export HYMT_SERVER_START_S="${HYMT_SERVER_START_S:-30}"
mkdir -p "$HYMT_RUN_DIR" "$HYMT_LOG_DIR"

#!/bin/bash
# A throwaway S3 API server on this machine (moto's server mode, from the project's .venv), so the
# object-store tests run against a real HTTP endpoint speaking S3: conditional writes (If-None-Match,
# If-Match), multipart uploads, ranged GETs. Not for production: it keeps every object in memory
# (large ones spill to temporary files), takes any credentials and forgets everything when stopped.
#
#   deploy/s3/local-s3.sh start    # start it unless it already answers; wait until it does
#   deploy/s3/local-s3.sh stop     # stop the server this script started, and wait until it is gone
#   deploy/s3/local-s3.sh status   # exit 0 when it answers; prints its endpoint
# `start` is idempotent and quick when the server already answers (`make s3-up` / `make s3-down`).
#
# It listens on 127.0.0.1:$S3_PORT (default 9555: not Slurm's 6817-6822, the UI's 3000, MinIO's
# 9000, nor the ephemeral range the tests' own servers take). Its pid file and log are kept in
# $SLM4IE_S3_HOME (default ${TMPDIR:-/tmp}/slm4ie-s3-$S3_PORT), so servers on other ports (a test
# session's own) have their own. Clients point at it with AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT
# and any AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PORT=${S3_PORT:-9555}
[[ $PORT =~ ^[0-9]+$ ]] || { echo "S3_PORT must be a port number, not '$PORT'" >&2; exit 2; }
STATE=${SLM4IE_S3_HOME:-${TMPDIR:-/tmp}/slm4ie-s3-$PORT}
[[ $STATE == /* ]] || { echo "SLM4IE_S3_HOME must be an absolute path" >&2; exit 2; }
SERVER=${SLM4IE_MOTO_SERVER:-$REPO/.venv/bin/moto_server}
PID_FILE=$STATE/moto.pid LOG=$STATE/moto.log
ENDPOINT=http://127.0.0.1:$PORT

answers() {  # an HTTP answer from moto on the port (its own endpoint, not just an open socket)
  local status
  { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null || return 1
  printf 'GET /moto-api/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  IFS= read -r -t 5 status <&3 || status=""
  exec 3<&- 3>&-
  [[ $status == "HTTP/1."?" 200"* ]]
}

alive() { [[ -f $PID_FILE ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }

stop_pid() {  # TERM, then up to 5 s for it to go, then KILL
  local pid=$1
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
start)
  if answers; then echo "S3 server answers at $ENDPOINT"; exit 0; fi
  [[ -x $SERVER ]] || { echo "no $SERVER: run 'make venv' first (moto is in the test extra)" >&2; exit 1; }
  if ! alive && { exec 4<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null; then
    echo "port $PORT is taken by something that is not an S3 server of ours: set S3_PORT" >&2; exit 1
  fi
  mkdir -p "$STATE"
  if ! alive; then
    # in the foreground of its own session (setsid): $! is the server itself, and a Ctrl-C in the
    # shell that started it does not reach it
    setsid "$SERVER" -H 127.0.0.1 -p "$PORT" </dev/null >"$LOG" 2>&1 &
    echo $! > "$PID_FILE"
  fi
  for _ in $(seq 120); do
    if answers; then echo "S3 server answers at $ENDPOINT (log: $LOG)"; exit 0; fi
    alive || break
    sleep 0.25
  done
  echo "the S3 server did not come up on $ENDPOINT; see $LOG" >&2
  tail -n 20 "$LOG" >&2 || true
  [[ -f $PID_FILE ]] && stop_pid "$(cat "$PID_FILE")" && rm -f "$PID_FILE"
  exit 1 ;;
stop)
  if [[ -f $PID_FILE ]]; then
    stop_pid "$(cat "$PID_FILE")"
    rm -f "$PID_FILE"
  fi ;;
status)
  answers && echo "$ENDPOINT" ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac

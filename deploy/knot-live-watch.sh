#!/usr/bin/env bash
# knot-live-watch: the `knot pid` sidecar's loop (deploy/k8s/knot-live-sidecar.yaml). It probes the
# application's health endpoint every INTERVAL seconds; after FAILURES failed probes in a row it
# reads the application process live with `knot pid` (stopped for milliseconds, then running on),
# writes the report (and the small core it read) to OUT, logs the verdict, and waits COOLDOWN
# seconds before it may do so again. The pod must share its process namespace.
#
# Environment (defaults in brackets):
#   HEALTH_HOST [127.0.0.1]  HEALTH_PORT [8080]  HEALTH_PATH [/healthz]
#                     the probe: an HTTP/1.0 GET; healthy = a 2xx or 3xx status within TIMEOUT
#   TIMEOUT [5]       seconds a probe may take
#   INTERVAL [10]     seconds between probes
#   FAILURES [3]      failed probes in a row that trigger a reading
#   COOLDOWN [600]    seconds after a reading before the next may be taken
#   PROCESS           the application: a substring of its command line (/proc/PID/cmdline with
#                     spaces); required
#   OUT [/reports]    where live.<pid>.<time>.knot.json (and .core) go
#   KNOT [knot]       the knot binary
#   KNOT_ARGS         more arguments for `knot pid` (e.g. --max-copy-mib=256)
#   ONCE              if set: exit after the first reading (status: knot's), for tests
set -u

HEALTH_HOST="${HEALTH_HOST:-127.0.0.1}"
HEALTH_PORT="${HEALTH_PORT:-8080}"
HEALTH_PATH="${HEALTH_PATH:-/healthz}"
TIMEOUT="${TIMEOUT:-5}"
INTERVAL="${INTERVAL:-10}"
FAILURES="${FAILURES:-3}"
COOLDOWN="${COOLDOWN:-600}"
OUT="${OUT:-/reports}"
KNOT="${KNOT:-knot}"
: "${PROCESS:?set PROCESS to a substring of the command line of the application}"

log() { echo "knot-live: $*" >&2; }

# An application that closes the probe's connection before reading the request must fail the
# probe, not kill the loop (SIGPIPE on the write).
trap '' PIPE

# One probe with bash's /dev/tcp (the image has no curl): true when healthy. (A connection to
# localhost is refused at once when nothing listens; the read is bounded by TIMEOUT.)
probe() {
  local line=""
  # The braces keep `2>/dev/null` to the connect: on `exec` itself it would send the loop's own
  # stderr (its log) to /dev/null for good after the first probe that connects.
  { exec 3<>"/dev/tcp/$HEALTH_HOST/$HEALTH_PORT"; } 2>/dev/null || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$HEALTH_PATH" "$HEALTH_HOST" >&3
  IFS= read -r -t "$TIMEOUT" line <&3
  exec 3<&- 3>&-
  [[ "$line" =~ ^HTTP/[0-9.]+\ [23][0-9][0-9] ]]
}

# The application's pid: the first process (not this script, not knot) whose command line
# contains PROCESS.
find_pid() {
  local p cmd
  for p in /proc/[0-9]*; do
    p="${p#/proc/}"
    [[ "$p" == "$$" || "$p" == "$BASHPID" ]] && continue
    cmd="$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" || continue
    [[ -z "$cmd" || "$cmd" == *knot-live-watch* || "$cmd" == *"$KNOT pid"* ]] && continue
    if [[ "$cmd" == *"$PROCESS"* ]]; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

read_live() {
  local pid="$1" stamp base status verdict
  stamp="$(date -u +%Y%m%dT%H%M%SZ)"
  base="$OUT/live.$pid.$stamp"
  # shellcheck disable=SC2086 # KNOT_ARGS is a list of arguments
  "$KNOT" pid "$pid" --format json --output "$base.knot.json" --core "$base.core" ${KNOT_ARGS:-}
  status=$?
  if [[ $status -eq 0 || $status -eq 3 ]]; then
    verdict="$(grep -o '"verdict": *"[a-z_]*"' "$base.knot.json" | head -n1)"
    verdict="${verdict%\"}"
    verdict="${verdict##*\"}"
    log "pid $pid read live: ${verdict:-?} → $base.knot.json"
  else
    log "pid $pid: knot pid failed with status $status (4: not permitted or no such process; see above)"
  fi
  return "$status"
}

log "probing http://$HEALTH_HOST:$HEALTH_PORT$HEALTH_PATH every ${INTERVAL}s; a reading after $FAILURES failures in a row; reports in $OUT"
failed=0
while :; do
  if probe; then
    failed=0
  else
    failed=$((failed + 1))
    log "health probe failed ($failed of $FAILURES)"
  fi
  if (( failed >= FAILURES )); then
    if pid="$(find_pid)"; then
      read_live "$pid"
      status=$?
      [[ -n "${ONCE:-}" ]] && exit "$status"
      sleep "$COOLDOWN"
    else
      log "no process matches PROCESS=$PROCESS"
      [[ -n "${ONCE:-}" ]] && exit 4
    fi
    failed=0
  fi
  sleep "$INTERVAL"
done

# Progress of the image build's long steps, for people at a terminal: while a step runs, one line redrawn
# in place once a second (the step, its latest log line, the time so far), as image-pull draws its layers;
# then the step's line with its time. On anything else (a log, a pipe, CI) it prints nothing: the build's
# own lines say what happens. Sourced by build.sh and seal.sh.

PROGRESS_PID=""
PROGRESS_LABEL=""
PROGRESS_START=0

# progress_line <label> <log file>: the redrawn line, cut to the terminal's width.
progress_line() {
  local last="" cols=${COLUMNS:-80} line
  [ -n "$2" ] && [ -f "$2" ] && last=$(tail -n 1 "$2" 2>/dev/null | tr -d '\r' | tr -c '[:print:]' ' ')
  line="$1 ($((SECONDS - PROGRESS_START)) s)${last:+: $last}"
  printf '\r\033[K%s' "${line:0:$((cols - 1))}" >&2
}

# progress_start <label> [log file]: starts the redrawn line of a step (on a terminal only).
progress_start() {
  progress_end
  [ -t 2 ] || return 0
  PROGRESS_LABEL=$1
  PROGRESS_START=$SECONDS
  progress_line "$1" "${2:-}"
  (
    while sleep 1; do progress_line "$1" "${2:-}"; done
  ) &
  PROGRESS_PID=$!
}

# progress_abort: stops the redrawn line and clears it (a failure's message follows on a clean line).
progress_abort() {
  [ -n "$PROGRESS_PID" ] || return 0
  kill "$PROGRESS_PID" 2>/dev/null || true
  wait "$PROGRESS_PID" 2>/dev/null || true
  PROGRESS_PID=""
  printf '\r\033[K' >&2
}

# progress_end: stops the redrawn line and leaves the step's line with its time.
progress_end() {
  [ -n "$PROGRESS_PID" ] || return 0
  kill "$PROGRESS_PID" 2>/dev/null || true
  wait "$PROGRESS_PID" 2>/dev/null || true
  PROGRESS_PID=""
  printf '\r\033[K%s: done in %d s\n' "$PROGRESS_LABEL" "$((SECONDS - PROGRESS_START))" >&2
}

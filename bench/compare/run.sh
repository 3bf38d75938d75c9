#!/usr/bin/env bash
# make compare: needle's workloads W1-W3 on needle, Asynq and Dask distributed,
# each as 3 workers x 2 slots on loopback, in one run; prints needle/peer
# ratios. See README.md.
#
# Environment:
#   REPS=3                repetitions of each workload on each system
#   DASK_PYTHON=/usr/bin/python3   the python with Debian's python3-distributed
#   NEEDLE_FLAGS=         extra flags for `needle bench` (e.g. --data-dir /var/tmp)
#   OUT=bench/compare/out where the JSON reports and logs are kept
#   W1_TASKS=100000 W2_TASKS=500   workload sizes (needle's defaults)
#   DASK_W1_TASKS=20000   Dask's W1 size (at ~1,000 tasks/s, 100,000 would
#                         take minutes per repetition to say the same)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
REPS=${REPS:-3}
W1_TASKS=${W1_TASKS:-100000}
DASK_W1_TASKS=${DASK_W1_TASKS:-20000}
W2_TASKS=${W2_TASKS:-500}
PY=${DASK_PYTHON:-/usr/bin/python3}
OUT=${OUT:-$HERE/out}
DURATIONS=$ROOT/bench/testdata/w3-durations-ms.txt
SETUP="3 workers x 2 slots, loopback, $(nproc) CPUs"

log() { printf '== %s\n' "$*" >&2; }

# --- everything this script starts is in PIDS, stopped by pid on exit ------
PIDS=()
TMP=$(mktemp -d -t needle-compare.XXXXXX)

start() { # start LOGFILE CMD...: run CMD in the background, remember its pid
	local logf=$1
	shift
	"$@" >"$logf" 2>&1 &
	PIDS+=($!)
}

run_fg() { # run_fg CMD...: run CMD, wait for it; remembered while it runs
	# In the background and waited for, so that Ctrl-C interrupts the wait
	# and runs the trap at once: bash defers a trap while a foreground child
	# runs, and ignores the Ctrl-C if that child exits normally after it (the
	# clients and needle bench catch SIGINT and exit 1).
	"$@" &
	local pid=$! rc=0
	PIDS+=("$pid")
	wait "$pid" || rc=$?
	unset 'PIDS[${#PIDS[@]}-1]'
	return "$rc"
}

stop_all() { # SIGTERM every started pid (newest first), SIGKILL after 10 s
	local i pid
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		kill -TERM "${PIDS[i]}" 2>/dev/null || true
	done
	for ((i = 0; i < 100; i++)); do
		local alive=0
		for pid in "${PIDS[@]}"; do
			kill -0 "$pid" 2>/dev/null && alive=1
		done
		((alive)) || break
		sleep 0.1
	done
	for pid in "${PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	PIDS=()
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	((${#PIDS[@]})) && log "stopping ${#PIDS[*]} started processes"
	stop_all
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
	"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # wait_port PORT PID NAME LOGFILE
	local i
	for ((i = 0; i < 300; i++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		if ! kill -0 "$2" 2>/dev/null; then
			log "$3 exited before listening on $1:"
			tail -20 "$4" >&2
			return 1
		fi
		sleep 0.1
	done
	log "$3 not listening on $1 after 30 s"
	tail -20 "$4" >&2
	return 1
}

# --- install what is missing (Debian packages) ------------------------------
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
"$PY" -c 'import distributed' 2>/dev/null || missing+=(python3-distributed)
if ((${#missing[@]})); then
	SUDO=
	[ "$(id -u)" = 0 ] || SUDO=sudo
	log "installing ${missing[*]}"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- build ------------------------------------------------------------------
log "building needle, needled and asynqbench"
(cd "$ROOT" && make build)
(cd "$HERE" && go build -o "$TMP/asynqbench" ./asynq)
mkdir -p "$OUT"
rm -f "$OUT/needle.json" "$OUT/asynq.json" "$OUT/dask.json"
status=0

# --- needle -----------------------------------------------------------------
log "needle: needle bench --peers 3 --slots 2 --workloads w1,w2,w3 --reps $REPS"
# needle bench starts and stops its own needled processes (own process
# groups, SIGTERM then SIGKILL, also on Ctrl-C and on SIGTERM from here).
# shellcheck disable=SC2086
run_fg "$ROOT/bin/needle" bench --peers 3 --slots 2 --workloads w1,w2,w3 \
	--reps "$REPS" --w1-tasks "$W1_TASKS" --w2-tasks "$W2_TASKS" \
	--json "$OUT/needle.json" ${NEEDLE_FLAGS:-} > >(tee "$OUT/needle.txt") || {
	status=1
	log "needle bench failed"
}

# --- asynq ------------------------------------------------------------------
RPORT=$(free_port)
log "asynq: redis-server on 127.0.0.1:$RPORT (save '' appendonly no), 3 workers x concurrency 2"
mkdir -p "$TMP/redis"
start "$OUT/redis.log" redis-server --bind 127.0.0.1 --port "$RPORT" --dir "$TMP/redis" \
	--save '' --appendonly no --daemonize no
wait_port "$RPORT" "${PIDS[-1]}" redis-server "$OUT/redis.log"
for i in 0 1 2; do
	pinned=
	[ "$i" = 0 ] && pinned=--pinned
	start "$OUT/asynq-worker$i.log" "$TMP/asynqbench" worker --redis "127.0.0.1:$RPORT" \
		--id "$i" --concurrency 2 $pinned
done
run_fg "$TMP/asynqbench" client --redis "127.0.0.1:$RPORT" --durations "$DURATIONS" \
	--reps "$REPS" --w1-tasks "$W1_TASKS" --w2-tasks "$W2_TASKS" \
	--setup "$SETUP; redis $(redis-server --version | grep -o 'v=[^ ]*') persistence off" \
	--json "$OUT/asynq.json" >/dev/null || {
	status=1
	log "asynq client failed (worker logs in $OUT)"
}
stop_all

# --- dask -------------------------------------------------------------------
DPORT=$(free_port)
log "dask: scheduler on 127.0.0.1:$DPORT, 3 workers x 2 threads (no nanny)"
start "$OUT/dask-scheduler.log" "$PY" -m distributed.cli.dask_scheduler \
	--host 127.0.0.1 --port "$DPORT" --no-dashboard
wait_port "$DPORT" "${PIDS[-1]}" dask-scheduler "$OUT/dask-scheduler.log"
for i in 0 1 2; do
	start "$OUT/dask-worker$i.log" "$PY" -m distributed.cli.dask_worker "tcp://127.0.0.1:$DPORT" \
		--name "w$i" --nthreads 2 --no-nanny --host 127.0.0.1 --no-dashboard \
		--local-directory "$TMP/dask-w$i"
done
run_fg "$PY" "$HERE/dask/daskbench.py" --scheduler "tcp://127.0.0.1:$DPORT" --durations "$DURATIONS" \
	--reps "$REPS" --w1-tasks "$DASK_W1_TASKS" --w2-tasks "$W2_TASKS" --setup "$SETUP" \
	--json "$OUT/dask.json" >/dev/null || {
	status=1
	log "dask client failed (logs in $OUT)"
}
stop_all

# --- table ------------------------------------------------------------------
echo
"$PY" "$HERE/table.py" "$OUT/needle.json" "$OUT/asynq.json" "$OUT/dask.json" | tee "$OUT/table.txt"
exit "$status"

#!/usr/bin/env bash
# Browser test of the web dashboard (peer/dash): starts one needled, submits a
# DAG group with curl, opens http://127.0.0.1:PORT/#track=<group> in headless
# Chromium, checks the rendered DOM shows the group and its task states, and
# saves a screenshot to ${SCREENSHOT_DIR:-/tmp}/needle-dashboard.png.
#
# Then it starts a second needled that needs an API token and runs the Go
# browser test of every view (peer/dash/browser_test.go, build tag browser),
# which drives Chromium over the DevTools protocol: #groups (filters, cancel),
# #failed (the error of a failed task, a retry click checked through the API),
# #task=ID (logs followed live), #schedules (trigger, pause), #audit,
# #workers (hidden while the peer serves no GET /v1/workers), the overview's
# throughput chart, and the token dialog. One screenshot per view is saved as
# ${SCREENSHOT_DIR}/needle-dashboard-<view>.png.
#
# Needs Go, curl and Chromium (Debian's chromium package; installed with
# apt-get when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'dashboard-test: FAIL: %s\n' "$*" >&2; exit 1; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi
}

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v curl >/dev/null || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	as_root apt-get update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
chromium --version >&2 || true

log "building needled"
mkdir -p bin
go build -o bin/ ./cmd/needled

TMP=$(mktemp -d)
SHOT_DIR=${SCREENSHOT_DIR:-/tmp}
SHOT="$SHOT_DIR/needle-dashboard.png"
mkdir -p "$SHOT_DIR"
PID=""
PID2=""
stop() {
	local pid=$1
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
}
cleanup() {
	rc=$?
	stop "$PID"
	stop "$PID2"
	if [ "$rc" -ne 0 ]; then
		echo "--- needled log (tail) ---" >&2
		tail -n 40 "$TMP/needled.log" >&2 2>/dev/null || true
		echo "--- token needled log (tail) ---" >&2
		tail -n 20 "$TMP/needled2.log" >&2 2>/dev/null || true
		if [ -f "$TMP/dom.html" ]; then
			echo "--- dumped DOM (head) ---" >&2
			head -c 4000 "$TMP/dom.html" >&2 || true
			echo >&2
		fi
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT

# A free port: random in 20000-31999, below Linux's ephemeral ports
# (32768 and up: the local end of an outgoing connection can hold one
# that nothing answers on), skipping ones that answer.
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 12000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || break
	done
	echo "$p"
}
healthy() { # url pid
	for i in $(seq 150); do
		curl -sf "$1/healthz" >/dev/null 2>&1 && return 0
		kill -0 "$2" 2>/dev/null || die "needled at $1 exited"
		[ "$i" -lt 150 ] || die "needled at $1 not healthy after 30s"
		sleep 0.2
	done
}
PORT=${PORT:-$(free_port)}
BASE="http://127.0.0.1:$PORT"

log "starting needled on $BASE"
env -u NEEDLE_API_TOKEN ./bin/needled --data "$TMP/data" --http "127.0.0.1:$PORT" \
	--listen /ip4/127.0.0.1/tcp/0 --exec-allow sh=/bin/sh >"$TMP/needled.log" 2>&1 &
PID=$!
healthy "$BASE" "$PID"

log "checking the page is served"
curl -sf -D "$TMP/headers" -o "$TMP/index.html" "$BASE/" || die "GET / failed (is the dashboard mounted?)"
grep -qi '^content-type: text/html' "$TMP/headers" || die "GET / is not text/html"
grep -qi "^content-security-policy: .*default-src 'self'" "$TMP/headers" || die "GET / has no strict CSP"
curl -sf -o /dev/null "$BASE/dash/app.js" || die "GET /dash/app.js failed"
curl -sf -o /dev/null "$BASE/dash/style.css" || die "GET /dash/style.css failed"

log "submitting a group"
BODY='{"mode":"dag","tasks":[
 {"name":"fetch","handler":"sleep","payload":{"ms":200}},
 {"name":"parse","handler":"echo","payload":1,"deps":["fetch"]},
 {"name":"check","handler":"echo","payload":2,"deps":["fetch"]},
 {"name":"sum","handler":"echo","payload":3,"deps":["parse","check"]}]}'
RESP=$(curl -sf -X POST -H 'Content-Type: application/json' -d "$BODY" "$BASE/v1/groups") || die "POST /v1/groups failed"
GROUP=$(printf '%s' "$RESP" | sed -n 's/.*"group": *"\([^"]*\)".*/\1/p')
[ -n "$GROUP" ] || die "no group id in: $RESP"
log "group $GROUP"
STATE=$(curl -sf "$BASE/v1/groups/$GROUP?wait=20s&tasks=false" | sed -n 's/.*"state": *"\([A-Z]*\)".*/\1/p')
[ "$STATE" = SUCCEEDED ] || die "group ended $STATE, want SUCCEEDED"

URL="$BASE/#track=$GROUP"
chrome() {
	timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--disable-dev-shm-usage --user-data-dir="$(mktemp -d "$TMP/profile.XXXXXX")" \
		--virtual-time-budget=5000 "$@" 2>>"$TMP/chromium.log"
}

log "loading $URL in headless chromium"
ok=""
for attempt in 1 2 3; do
	chrome --dump-dom "$URL" >"$TMP/dom.html" || true
	if grep -qF "$GROUP" "$TMP/dom.html" && grep -q 'SUCCEEDED' "$TMP/dom.html" &&
		grep -qF '>sum<' "$TMP/dom.html" && grep -q 'class="status ok"' "$TMP/dom.html"; then
		ok=1
		break
	fi
	log "attempt $attempt: the DOM does not show the group yet"
	sleep 1
done
[ -n "$ok" ] || die "the page does not show group $GROUP as SUCCEEDED (see the DOM below)"
# The peers table lists this peer.
grep -q 'class="self-row"' "$TMP/dom.html" || die "the peers table has no row for this peer"

log "taking a screenshot"
# Open the last task as well, so that the picture shows its event history.
SUM=$(printf '%s' "$RESP" | sed -n 's/.*"sum": *"\([^"]*\)".*/\1/p')
rm -f "$SHOT"
chrome --hide-scrollbars --window-size=1280,900 --screenshot="$SHOT" "$URL${SUM:+&task=$SUM}" >/dev/null || true
[ -s "$SHOT" ] || die "no screenshot written to $SHOT"
[ "$(head -c 8 "$SHOT" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || die "$SHOT is not a PNG"
log "screenshot: $SHOT ($(wc -c <"$SHOT") bytes)"

PORT2=$(free_port)
while [ "$PORT2" = "$PORT" ]; do PORT2=$(free_port); done
TOKEN_URL="http://127.0.0.1:$PORT2"
TOKEN="dash-test-$RANDOM$RANDOM"
log "starting a needled that needs an API token on $TOKEN_URL"
NEEDLE_API_TOKEN="$TOKEN" ./bin/needled --data "$TMP/data2" --http "127.0.0.1:$PORT2" \
	--listen /ip4/127.0.0.1/tcp/0 >"$TMP/needled2.log" 2>&1 &
PID2=$!
healthy "$TOKEN_URL" "$PID2"

log "browser test of every view (go test -tags browser ./peer/dash/)"
NEEDLE_URL="$BASE" NEEDLE_TOKEN_URL="$TOKEN_URL" NEEDLE_TOKEN="$TOKEN" SCREENSHOT_DIR="$SHOT_DIR" \
	CHROMIUM="$(command -v chromium)" \
	go test -tags browser -count=1 -run '^TestDashboardViews$' -v ./peer/dash/ >&2 ||
	die "the browser test of the views failed"
for v in groups failed task schedules audit workers overview token; do
	f="$SHOT_DIR/needle-dashboard-$v.png"
	[ -s "$f" ] || die "no screenshot of the $v view ($f)"
done
log "screenshots: $(ls "$SHOT_DIR"/needle-dashboard*.png | tr '\n' ' ')"
echo "dashboard-test: OK"

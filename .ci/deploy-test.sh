#!/usr/bin/env bash
# Deployment test: the container image, the compose mesh, the systemd unit
# and the Kubernetes manifests of deploy/.
#
#  1. make release cross-compiles the static binaries the image is built of
#     (the Dockerfile's build stage runs the same make release).
#  2. deploy/'s own Go module decodes the Kubernetes manifests strictly into
#     the API's types and checks that compose, the unit and the Dockerfile
#     agree with each other and with needled.
#  3. systemd-analyze verify on the unit (any warning fails).
#  4. With podman (Debian's, installed when missing): docker-compose config
#     on deploy/compose.yaml; the image built (from the Dockerfile when its
#     base images can be pulled, else its run stage on the binaries of step 1
#     and a local minimal base); the compose mesh of three containers up; a
#     group submitted through one peer, read through another, one container
#     stopped (a drain), the group read again; everything torn down.
#
# A tool that cannot be installed, or containers that cannot run here, are
# reported with the exact error and skipped; a check that runs and fails
# fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '== deploy: %s\n' "$*" >&2; }
die() { printf 'deploy-test: FAIL: %s\n' "$*" >&2; exit 1; }
skip() { printf 'deploy-test: SKIPPED: %s\n' "$*" >&2; SKIPPED+=("$1"); }
SKIPPED=()
PASSED=0

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi
}
APT_UPDATED=""
apt_install() { # apt_install PKG...: 0 when installed, 1 (and the error printed) otherwise
	local out
	if [ -z "$APT_UPDATED" ]; then
		as_root apt-get update -qq >/dev/null 2>&1 || true
		APT_UPDATED=1
	fi
	if ! out=$(as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" 2>&1); then
		printf '%s\n' "$out" | tail -n 5 >&2
		return 1
	fi
}

TMP=$(mktemp -d)
PROJECT="needleci$$"
SERVICE_PID=""
COMPOSE=()
cleanup() {
	rc=$?
	if [ ${#COMPOSE[@]} -gt 0 ]; then
		if [ "$rc" -ne 0 ]; then
			echo "--- compose ps and logs (tail) ---" >&2
			"${COMPOSE[@]}" ps >&2 2>&1 || true
			"${COMPOSE[@]}" logs --tail=30 >&2 2>&1 || true
		fi
		timeout 120 "${COMPOSE[@]}" down -v >/dev/null 2>&1 || true
	fi
	if [ -n "$SERVICE_PID" ]; then
		kill "$SERVICE_PID" 2>/dev/null || true
		wait "$SERVICE_PID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT

# 1. Release binaries.
ARCH=$(go env GOARCH)
log "make release (linux/amd64, linux/arm64)"
make -s release DIST="$TMP/dist" VERSION=v0.0.0-ci >/dev/null
(cd "$TMP/dist" && sha256sum --quiet -c SHA256SUMS) || die "SHA256SUMS does not match dist/"
for f in needled-linux-amd64 needle-linux-amd64 needled-linux-arm64 needle-linux-arm64; do
	[ -x "$TMP/dist/$f" ] || die "make release wrote no $f"
done
"$TMP/dist/needled-linux-$ARCH" --version | grep -q 'v0.0.0-ci' || die "needled --version is not stamped: $("$TMP/dist/needled-linux-$ARCH" --version)"
if file "$TMP/dist/needled-linux-$ARCH" 2>/dev/null | grep -q 'dynamically linked'; then
	die "needled-linux-$ARCH is dynamically linked"
fi
PASSED=$((PASSED + 1))

# 2. The manifests and files, decoded and cross-checked.
log "deploy/ checks (Kubernetes types, compose, unit, Dockerfile)"
if (cd deploy && go mod download) >"$TMP/mod.log" 2>&1; then
	(cd deploy && go vet . && go test -count=1 .) || die "deploy/ checks"
	PASSED=$((PASSED + 1))
else
	cat "$TMP/mod.log" >&2
	skip "deploy-go-checks" "the modules of deploy/go.mod could not be downloaded"
fi

# 3. systemd-analyze verify, with ExecStart on the binary built above.
if ! command -v systemd-analyze >/dev/null && ! apt_install systemd; then
	skip "systemd-analyze" "systemd-analyze could not be installed (apt-get install systemd failed, above)"
elif command -v systemd-analyze >/dev/null; then
	log "systemd-analyze verify deploy/systemd/needled.service"
	mkdir -p "$TMP/unit"
	sed "s#/usr/local/bin/needled#$TMP/dist/needled-linux-$ARCH#" deploy/systemd/needled.service >"$TMP/unit/needled.service"
	out=$(systemd-analyze verify "$TMP/unit/needled.service" 2>&1) || die "systemd-analyze verify: $out"
	[ -z "$out" ] || die "systemd-analyze verify warns: $out"
	PASSED=$((PASSED + 1))
fi

# 3b. The Debian package: built from the binaries of step 1, its fields
# and files checked, its unit verified, then installed, run and purged
# where this script may use dpkg as root.
debian_package() {
	if ! command -v dpkg-deb >/dev/null; then
		skip "deb" "dpkg-deb is missing (not a Debian system)"
		return 0
	fi
	log "deploy/deb/build.sh (the Debian package)"
	local deb
	deb=$(bash deploy/deb/build.sh v0.0.0-ci "$ARCH" "$TMP/dist") || die "deploy/deb/build.sh"
	[ "$(basename "$deb")" = "needle_0.0.0~ci_${ARCH}.deb" ] || die "the package is named $(basename "$deb")"
	[ "$(dpkg-deb -f "$deb" Package Version Architecture | tr '\n' ' ')" = "Package: needle Version: 0.0.0~ci Architecture: $ARCH " ] ||
		die "control fields: $(dpkg-deb -f "$deb" Package Version Architecture)"
	local files
	files=$(dpkg-deb -c "$deb" | awk '{print $1, $6}')
	for want in '-rwxr-xr-x ./usr/bin/needled' '-rwxr-xr-x ./usr/bin/needle' '-rw-r--r-- ./lib/systemd/system/needled.service' \
		'drwx------ ./etc/needle/' 'drwxr-xr-x ./etc/needle/members.d/' '-rw-r--r-- ./etc/needle/needled.env'; do
		grep -qxF -- "$want" <<<"$files" || die "the package lacks $want; it holds: $files"
	done
	dpkg-deb -x "$deb" "$TMP/debroot"
	cmp -s "$TMP/debroot/usr/bin/needled" "$TMP/dist/needled-linux-$ARCH" || die "the packaged needled is not the release binary"
	if command -v systemd-analyze >/dev/null; then
		mkdir -p "$TMP/unit"
		sed "s#/usr/bin/needled#$TMP/debroot/usr/bin/needled#" "$TMP/debroot/lib/systemd/system/needled.service" >"$TMP/unit/needled-deb.service"
		out=$(systemd-analyze verify "$TMP/unit/needled-deb.service" 2>&1) || die "systemd-analyze verify (package): $out"
		[ -z "$out" ] || die "systemd-analyze verify (package) warns: $out"
	fi
	PASSED=$((PASSED + 1))
	if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
		skip "deb-install" "neither root nor password-less sudo: the package is not installed"
		return 0
	fi
	if dpkg -s needle >/dev/null 2>&1; then
		skip "deb-install" "a needle package is installed on this machine already; not replacing it"
		return 0
	fi
	log "dpkg -i, needled --version, dpkg --purge"
	as_root dpkg -i "$deb" >"$TMP/dpkg.log" 2>&1 || { cat "$TMP/dpkg.log" >&2; die "dpkg -i"; }
	grep -q 'installed, not started' "$TMP/dpkg.log" || die "postinst said: $(cat "$TMP/dpkg.log")"
	/usr/bin/needled --version | grep -q 'v0.0.0-ci' || die "installed needled --version: $(/usr/bin/needled --version)"
	for f in /etc/needle/swarm.key /etc/needle/api.token; do
		[ "$(as_root stat -c %a "$f")" = 600 ] || die "$f is missing or not mode 600"
	done
	[ "$(as_root stat -c %a /etc/needle)" = 700 ] || die "/etc/needle is not mode 700"
	grep -q 'api.token' "$TMP/dpkg.log" || die "postinst does not say to copy api.token with swarm.key: $(cat "$TMP/dpkg.log")"
	key=$(as_root cat /etc/needle/swarm.key)
	token=$(as_root cat /etc/needle/api.token)
	as_root dpkg -i "$deb" >/dev/null 2>&1 || die "dpkg -i over itself (an upgrade)"
	[ "$(as_root cat /etc/needle/swarm.key)" = "$key" ] || die "reinstalling replaced the swarm key"
	[ "$(as_root cat /etc/needle/api.token)" = "$token" ] || die "reinstalling replaced the API token"
	as_root dpkg --purge needle >/dev/null 2>&1 || die "dpkg --purge needle"
	[ ! -e /usr/bin/needled ] && [ ! -e /etc/needle ] && [ ! -e /lib/systemd/system/needled.service ] ||
		die "dpkg --purge left files behind: $(ls -d /usr/bin/needled /etc/needle /lib/systemd/system/needled.service 2>&1)"
	# Another host: the first host's pair copied in before the install is
	# kept, key and token both (a token of its own would answer the first
	# host's clients 401).
	as_root install -d -m 0700 /etc/needle
	printf '%s\n' "$key" | as_root sh -c 'umask 077; cat >/etc/needle/swarm.key'
	printf '%s\n' "$token" | as_root sh -c 'umask 077; cat >/etc/needle/api.token'
	as_root dpkg -i "$deb" >/dev/null 2>&1 || die "dpkg -i over a copied key and token"
	[ "$(as_root cat /etc/needle/swarm.key)" = "$key" ] && [ "$(as_root cat /etc/needle/api.token)" = "$token" ] ||
		die "installing replaced a swarm key and API token copied from another host"
	as_root dpkg --purge needle >/dev/null 2>&1 || die "dpkg --purge needle (the second install)"
	PASSED=$((PASSED + 1))
}
debian_package

# 3c. The RPM package: built from the binaries of step 1 (rpmbuild from
# Debian's rpm when missing), its fields, files, modes and scriptlets
# checked. It is not installed: this is a Debian machine.
rpm_package() {
	if ! command -v rpmbuild >/dev/null && ! apt_install rpm; then
		skip "rpm" "rpmbuild could not be installed (apt-get install rpm failed, above)"
		return 0
	fi
	log "deploy/rpm/build.sh (the RPM package)"
	local pkg want rarch
	rarch=$(case $ARCH in amd64) echo x86_64 ;; arm64) echo aarch64 ;; esac)
	pkg=$(bash deploy/rpm/build.sh v0.0.0-ci "$ARCH" "$TMP/dist") || die "deploy/rpm/build.sh"
	[ "$(basename "$pkg")" = "needle-0.0.0~ci-1.$rarch.rpm" ] || die "the RPM is named $(basename "$pkg")"
	[ "$(rpm -qp --qf '%{NAME} %{VERSION} %{RELEASE} %{ARCH}' "$pkg")" = "needle 0.0.0~ci 1 $rarch" ] ||
		die "RPM fields: $(rpm -qp --qf '%{NAME} %{VERSION} %{RELEASE} %{ARCH}' "$pkg")"
	local files
	files=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$pkg")
	for want in '-rwxr-xr-x /usr/bin/needled' '-rwxr-xr-x /usr/bin/needle' '-rw-r--r-- /usr/lib/systemd/system/needled.service' \
		'drwx------ /etc/needle' 'drwxr-xr-x /etc/needle/members.d' '-rw-r--r-- /etc/needle/needled.env'; do
		grep -qxF -- "$want" <<<"$files" || die "the RPM lacks $want; it holds: $files"
	done
	rpm -qp --configfiles "$pkg" | grep -qx /etc/needle/needled.env || die "needled.env is not a config file of the RPM"
	rpm -qp --scripts "$pkg" | grep -q 'needle keygen --if-missing' || die "the RPM's %post writes no key: $(rpm -qp --scripts "$pkg")"
	command -v cpio >/dev/null || apt_install cpio || true
	if command -v cpio >/dev/null; then
		mkdir -p "$TMP/rpmroot" && (cd "$TMP/rpmroot" && rpm2cpio "$pkg" | cpio -idm --quiet) || die "rpm2cpio"
		cmp -s "$TMP/rpmroot/usr/bin/needled" "$TMP/dist/needled-linux-$ARCH" || die "the RPM's needled is not the release binary"
		grep -q '^ExecStart=/usr/bin/needled ' "$TMP/rpmroot/usr/lib/systemd/system/needled.service" || die "the RPM's unit does not run /usr/bin/needled"
	fi
	PASSED=$((PASSED + 1))
}
rpm_package

# 4. Containers.
containers() {
	if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v docker-compose >/dev/null; then
		log "installing podman, runc, docker-compose"
		apt_install podman runc docker-compose || { skip "containers" "podman/runc/docker-compose could not be installed (error above)"; return 0; }
	fi
	podman --version >&2
	log "docker-compose config"
	docker-compose -f deploy/compose.yaml config -q || die "docker-compose config rejects deploy/compose.yaml"
	PASSED=$((PASSED + 1))

	build_image || return 0
	run_mesh
}

build_image() {
	local go_image out
	go_image=$(sed -n 's/^ARG GO_IMAGE=//p' Dockerfile)
	if out=$(timeout 120 podman pull -q "$go_image" 2>&1); then
		log "podman build (the Dockerfile)"
		podman build -q --format docker -t needle:local --build-arg VERSION=v0.0.0-ci . >/dev/null || die "podman build of the Dockerfile"
	else
		printf 'deploy-test: cannot pull %s, so the Dockerfile is built from its run stage on the binaries of make release:\n%s\n' "$go_image" "$out" >&2
		log "podman build (local base, the Dockerfile's run stage, make release's binaries)"
		mkdir -p "$TMP/base/var/lib" "$TMP/ctx/out/bin" "$TMP/ctx/out/keys" "$TMP/ctx/out/state"
		# 0700 as the build stage's install -d makes it: the image's
		# /var/lib/needle keeps this mode.
		install -d -m 0700 "$TMP/ctx/out/state/needle"
		printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$TMP/base/passwd"
		printf 'root:x:0:\nnonroot:x:65532:\n' >"$TMP/base/group"
		# /var/lib as distroless has it (root's), not made by the COPY into it.
		printf 'FROM scratch\nCOPY passwd group /etc/\nCOPY var/ /var/\n' >"$TMP/base/Containerfile"
		podman build -q -t localhost/needle-ci-base "$TMP/base" >/dev/null || die "podman build of the local base image"
		cp "$TMP/dist/needled-linux-$ARCH" "$TMP/ctx/out/bin/needled"
		cp "$TMP/dist/needle-linux-$ARCH" "$TMP/ctx/out/bin/needle"
		awk '/^FROM \$\{GO_IMAGE\} AS build/ { print "FROM scratch AS build"; print "COPY out/ /out/"; skip = 1; next }
			skip && /^FROM / { skip = 0 }
			!skip { print }' Dockerfile >"$TMP/ctx/Containerfile"
		podman build -q --format docker -t needle:local --build-arg BASE_IMAGE=localhost/needle-ci-base \
			-f "$TMP/ctx/Containerfile" "$TMP/ctx" >/dev/null || die "podman build of the Dockerfile's run stage"
	fi
	[ "$(podman image inspect needle:local --format '{{.Config.User}}')" = "65532:65532" ] || die "the image does not run as 65532:65532"
	# The data dir: 0700 and 65532's, or every container's needled warns
	# "chmod 700 it", which no one can do in the shell-less image.
	# (podman cp's tar names the directory "/", root's: the image is
	# mounted instead, in podman's user namespace when not root.)
	local datadir
	# shellcheck disable=SC2016
	local stat_data='m=$(podman image mount needle:local) && stat -c "%a %u:%g" "$m/var/lib/needle"; podman image unmount needle:local >/dev/null'
	if [ "$(id -u)" -eq 0 ]; then
		datadir=$(sh -c "$stat_data" 2>&1) || true
	else
		datadir=$(podman unshare sh -c "$stat_data" 2>&1) || true
	fi
	[ "$datadir" = "700 65532:65532" ] || die "the image's /var/lib/needle is not mode 700 owned by 65532:65532: $datadir"
	if ! out=$(podman run --rm needle:local --version 2>&1); then
		printf 'deploy-test: podman run with the default settings fails here:\n%s\n' "$out" >&2
		# A sandbox without CAP_SYS_RESOURCE cannot raise the limits podman
		# asks for, and crun refuses hybrid cgroups: try runc and the
		# limits the shell already has.
		cat >"$TMP/containers.conf" <<-CONF
			[containers]
			default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]
			[engine]
			runtime = "runc"
		CONF
		export CONTAINERS_CONF="$TMP/containers.conf"
		if ! out=$(podman run --rm needle:local --version 2>&1); then
			printf 'deploy-test: with runc and nofile=%s, nproc=4096 too:\n%s\n' "$(ulimit -Hn)" "$out" >&2
			skip "containers" "containers cannot run on this machine (errors above); the image was built and the compose file validated"
			return 1
		fi
		log "containers run with runc and lower limits ($CONTAINERS_CONF)"
	fi
	printf '%s\n' "$out" | grep -q '^needled ' || die "needled --version in the image printed: $out"
	PASSED=$((PASSED + 1))
}

run_mesh() {
	local port token group out
	podman system service --time=0 "unix://$TMP/podman.sock" >"$TMP/service.log" 2>&1 &
	SERVICE_PID=$!
	for _ in $(seq 100); do [ -S "$TMP/podman.sock" ] && break; sleep 0.1; done
	[ -S "$TMP/podman.sock" ] || die "podman system service did not start: $(cat "$TMP/service.log")"
	export DOCKER_HOST="unix://$TMP/podman.sock"
	# Below Linux's ephemeral ports (32768 and up): compose failed once to
	# bind one that the local end of an outgoing connection held.
	for _ in $(seq 50); do
		port=$((20000 + RANDOM % 12000))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
	done
	export NEEDLE_PORT=$port NEEDLE_IMAGE=needle:local
	COMPOSE=(timeout 120 docker-compose -p "$PROJECT" -f deploy/compose.yaml)

	log "compose up: three peers, API on 127.0.0.1:$port"
	if ! "${COMPOSE[@]}" up -d --no-build; then
		# podman races a container that exits at once (the keys one):
		# "read /proc/N/cgroup: no such process". up is idempotent: the
		# containers made are kept, the rest made now.
		log "compose up failed; once more"
		"${COMPOSE[@]}" up -d --no-build || die "compose up"
	fi
	podman cp "${PROJECT}_needle-0_1:/etc/needle/api.token" "$TMP/api.token" || die "no API token in the keys volume"
	export NEEDLE_API_TOKEN_FILE="$TMP/api.token" NEEDLE_ADDR="http://127.0.0.1:$port"
	unset NEEDLE_API_TOKEN
	NEEDLE="$TMP/dist/needle-linux-$ARCH"
	for i in $(seq 120); do
		out=$("$NEEDLE" peers 2>&1 || true)
		[ "$(printf '%s\n' "$out" | grep -c ' alive ')" -eq 3 ] && break
		[ "$i" -lt 120 ] || die "no three live peers after 60 s: $out"
		sleep 0.5
	done
	for c in needle-0 needle-1 needle-2; do
		for i in $(seq 60); do
			podman healthcheck run "${PROJECT}_${c}_1" >/dev/null 2>&1 && break
			[ "$i" -lt 60 ] || die "$c's HEALTHCHECK (needle health) fails"
			sleep 0.5
		done
	done
	# Without the token the published API refuses.
	if out=$(env -u NEEDLE_API_TOKEN_FILE "$NEEDLE" peers 2>&1); then
		die "needle peers without the token succeeded: $out"
	fi
	printf '%s\n' "$out" | grep -q '401' || die "needle peers without the token: $out; want a 401"

	# A fresh volume takes the image's data dir, 0700: no peer warns.
	out=$("${COMPOSE[@]}" logs 2>&1 || true)
	if printf '%s\n' "$out" | grep -q 'readable by others'; then
		die "a peer warns of its data dir's mode: $(printf '%s\n' "$out" | grep 'readable by others' | head -n 3)"
	fi

	log "a group through needle-0 (published), read through needle-1"
	out=$("$NEEDLE" submit -f - <<-'JSON'
		{"mode":"parallel","tasks":[{"handler":"echo","payload":1},{"handler":"echo","payload":2},{"handler":"sleep","payload":{"ms":100}}]}
	JSON
	) || die "submit: $out"
	group=$(printf '%s\n' "$out" | grep -o 'g[0-9a-f]*' | head -n 1)
	[ -n "$group" ] || die "no group id in: $out"
	"${COMPOSE[@]}" exec -T needle-1 needle wait "$group" >/dev/null 2>&1 || die "needle wait $group through needle-1"
	# The mesh is seconds old: leadership may be moving to the peers that
	# just joined, and a read in that window answers 503; retry it as a
	# client would.
	for i in $(seq 20); do
		got=$("${COMPOSE[@]}" exec -T needle-1 needle get "$group" 2>&1) && printf '%s\n' "$got" | grep -q 'SUCCEEDED' && break
		[ "$i" -lt 20 ] || die "group $group through needle-1 is not SUCCEEDED: $got"
		sleep 0.5
	done

	log "stop needle-0 (SIGTERM drains), read the group through needle-1 and needle-2"
	"${COMPOSE[@]}" stop needle-0 || die "compose stop needle-0"
	[ "$(podman inspect "${PROJECT}_needle-0_1" --format '{{.State.ExitCode}}')" = 0 ] || die "needle-0 did not exit 0 after its drain"
	for c in needle-1 needle-2; do
		ok=""
		for _ in $(seq 60); do
			if "${COMPOSE[@]}" exec -T "$c" needle get "$group" 2>/dev/null | grep -q 'SUCCEEDED'; then ok=1; break; fi
			sleep 0.5
		done
		[ -n "$ok" ] || die "group $group not readable through $c after needle-0 stopped"
	done
	out=$("${COMPOSE[@]}" exec -T needle-2 needle submit --handler echo --payload 3 --wait 2>&1) || die "submit through needle-2 after the stop: $out"

	log "compose down"
	"${COMPOSE[@]}" down -v >/dev/null 2>&1 || die "compose down"
	COMPOSE=()
	[ -z "$(podman ps -a -q --filter "name=${PROJECT}_")" ] || die "containers left after compose down"
	PASSED=$((PASSED + 1))
}

containers

if [ ${#SKIPPED[@]} -gt 0 ]; then
	echo "deploy-test: skipped: ${SKIPPED[*]}"
	echo "deploy-test: $PASSED passed, 0 failed, ${#SKIPPED[@]} skipped"
else
	echo "deploy-test: $PASSED passed, 0 failed"
fi

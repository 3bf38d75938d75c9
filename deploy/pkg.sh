# Shell functions the package builds share (deploy/deb/build.sh,
# deploy/rpm/build.sh source this file).

# pkg_version VERSION prints the package version of a release's VERSION:
# v1.2.3 is 1.2.3, a commit without a tag 0.0.0+git.<commit>, git
# describe's dashes become pluses (neither format takes a dash in an
# upstream version); it fails on anything else.
pkg_version() {
	local v
	case $1 in
	v[0-9]*) v=${1#v} ;;
	[0-9]*) v=$1 ;;
	*) v=0.0.0+git.$1 ;;
	esac
	v=${v//-/+}
	if ! printf '%s' "$v" | grep -Eq '^[0-9][A-Za-z0-9.+~]*$'; then
		echo "build.sh: version $1 gives $v, not a package version" >&2
		return 1
	fi
	printf '%s\n' "$v"
}

# pkg_binaries DIST ARCH fails unless make release wrote both binaries.
pkg_binaries() {
	local b
	for b in needled needle; do
		[ -x "$1/$b-linux-$2" ] || { echo "build.sh: $1/$b-linux-$2 missing (make release)" >&2; return 1; }
	done
}

# pkg_unit OUT writes deploy/systemd/needled.service to OUT running the
# packaged /usr/bin/needled, without its install steps (the package's).
pkg_unit() {
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	sed -e 's#/usr/local/bin/needled#/usr/bin/needled#' \
		-e '/^#   install /d' -e '/^#   needle keygen/d' -e '/^#   systemctl daemon-reload/d' \
		"$root/deploy/systemd/needled.service" >"$1"
	if grep -q /usr/local "$1"; then
		echo "build.sh: the unit still names /usr/local" >&2
		return 1
	fi
}

#!/usr/bin/env bash
# Builds the RPM package of needle from release binaries, for RHEL,
# Fedora, Rocky, Alma and SUSE hosts:
#
#   deploy/rpm/build.sh VERSION ARCH DIST
#
# reads DIST/needled-linux-ARCH and DIST/needle-linux-ARCH (make release;
# ARCH amd64 or arm64) and writes DIST/needle-<version>-1.<rpm arch>.rpm
# with the layout of the Debian package (deploy/deb/build.sh): the
# binaries in /usr/bin, deploy/systemd/needled.service as
# /usr/lib/systemd/system/needled.service running /usr/bin/needled, and
# deploy/systemd/needled.env as /etc/needle/needled.env
# (%config(noreplace)). Installing writes a swarm key and an API token
# into /etc/needle when there are none and starts nothing. `make rpm`
# runs it.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 VERSION ARCH DIST" >&2; exit 2; }
version=$1 arch=$2 dist=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
command -v rpmbuild >/dev/null || { echo "build.sh: rpmbuild is missing (Debian: apt-get install rpm)" >&2; exit 1; }

case $arch in
amd64) rpmarch=x86_64 ;;
arm64) rpmarch=aarch64 ;;
*) echo "build.sh: no RPM architecture for $arch" >&2; exit 1 ;;
esac
# An RPM version has no dash: v1.2.3 is 1.2.3, a commit without a tag
# 0.0.0+git.<commit>; git describe's dashes become pluses.
case $version in
v[0-9]*) rpmver=${version#v} ;;
[0-9]*) rpmver=$version ;;
*) rpmver=0.0.0+git.$version ;;
esac
rpmver=${rpmver//-/+}
if ! printf '%s' "$rpmver" | grep -Eq '^[0-9][A-Za-z0-9.+~]*$'; then
	echo "build.sh: version $version gives $rpmver, not an RPM version" >&2
	exit 1
fi
for b in needled needle; do
	[ -x "$dist/$b-linux-$arch" ] || { echo "build.sh: $dist/$b-linux-$arch missing (make release)" >&2; exit 1; }
done

top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
mkdir -p "$top/SOURCES" "$top/SPECS" "$top/RPMS"
cp "$dist/needled-linux-$arch" "$top/SOURCES/needled"
cp "$dist/needle-linux-$arch" "$top/SOURCES/needle"
sed -e 's#/usr/local/bin/needled#/usr/bin/needled#' \
	-e '/^#   install /d' -e '/^#   needle keygen/d' -e '/^#   systemctl daemon-reload/d' \
	"$root/deploy/systemd/needled.service" >"$top/SOURCES/needled.service"
if grep -q /usr/local "$top/SOURCES/needled.service"; then
	echo "build.sh: the unit still names /usr/local" >&2
	exit 1
fi
cp "$root/deploy/systemd/needled.env" "$root/LICENSE" "$top/SOURCES/"
sed -e "s/@VERSION@/$rpmver/" "$here/needle.spec" >"$top/SPECS/needle.spec"
rpmbuild --quiet -bb --target "$rpmarch" --define "_topdir $top" \
	--define '_build_id_links none' "$top/SPECS/needle.spec" >/dev/null
out="$dist/needle-$rpmver-1.$rpmarch.rpm"
cp "$top/RPMS/$rpmarch/needle-$rpmver-1.$rpmarch.rpm" "$out"
echo "$out"

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
# (%config(noreplace)), and the empty directory /etc/needle/members.d.
# Installing writes a swarm key and an API token
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
. "$root/deploy/pkg.sh"
rpmver=$(pkg_version "$version")
pkg_binaries "$dist" "$arch"

top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
mkdir -p "$top/SOURCES" "$top/SPECS" "$top/RPMS"
cp "$dist/needled-linux-$arch" "$top/SOURCES/needled"
cp "$dist/needle-linux-$arch" "$top/SOURCES/needle"
pkg_unit "$top/SOURCES/needled.service"
cp "$root/deploy/systemd/needled.env" "$root/LICENSE" "$top/SOURCES/"
sed -e "s/@VERSION@/$rpmver/" "$here/needle.spec" >"$top/SPECS/needle.spec"
rpmbuild --quiet -bb --target "$rpmarch" --define "_topdir $top" \
	--define '_build_id_links none' "$top/SPECS/needle.spec" >/dev/null
out="$dist/needle-$rpmver-1.$rpmarch.rpm"
cp "$top/RPMS/$rpmarch/needle-$rpmver-1.$rpmarch.rpm" "$out"
echo "$out"

#!/usr/bin/env bash
# Builds the Debian package of needle from release binaries:
#
#   deploy/deb/build.sh VERSION ARCH DIST
#
# reads DIST/needled-linux-ARCH and DIST/needle-linux-ARCH (make release)
# and writes DIST/needle_<version>_ARCH.deb: the two binaries in /usr/bin,
# deploy/systemd/needled.service as /lib/systemd/system/needled.service
# (running /usr/bin/needled), deploy/systemd/needled.env as the conffile
# /etc/needle/needled.env, and the empty directory /etc/needle/members.d
# (root's, 0755) that the unit binds for a members file. Installing it writes a swarm key and an API
# token into /etc/needle (root only) when there are none (every host but
# the first gets the first host's pair copied over them), and starts
# nothing: a peer must know the mesh it joins (NEEDLE_JOIN) before its first
# start, or it founds a new one. `make deb` runs it.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 VERSION ARCH DIST" >&2; exit 2; }
version=$1 arch=$2 dist=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

. "$root/deploy/pkg.sh"
debver=$(pkg_version "$version")
pkg_binaries "$dist" "$arch"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
install -d -m 0755 "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" "$stage/usr/share/doc/needle"
install -d -m 0700 "$stage/etc/needle"
# The unit binds it read-only for a members file (NEEDLE_MEMBERS): made
# here, a packaged host needs only the file; 0755 for the service's user
# to list it through the bind (/etc/needle stays 0700).
install -d -m 0755 "$stage/etc/needle/members.d"
install -m 0755 "$dist/needled-linux-$arch" "$stage/usr/bin/needled"
install -m 0755 "$dist/needle-linux-$arch" "$stage/usr/bin/needle"
pkg_unit "$stage/lib/systemd/system/needled.service"
chmod 0644 "$stage/lib/systemd/system/needled.service"
install -m 0644 "$root/deploy/systemd/needled.env" "$stage/etc/needle/needled.env"
install -m 0644 "$root/LICENSE" "$stage/usr/share/doc/needle/copyright"
install -m 0755 "$here/postinst" "$here/prerm" "$here/postrm" "$stage/DEBIAN/"
echo /etc/needle/needled.env > "$stage/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: needle
Version: $debver
Architecture: $arch
Maintainer: needle developers <needle@localhost>
Installed-Size: $size
Section: net
Priority: optional
Homepage: https://github.com/needle-mesh/needle
Description: peer-to-peer task scheduler mesh
 needled runs on every host of a mesh, each peer both scheduler and
 worker: tasks, DAGs, data-parallel groups, pipelines and cron schedules
 submitted to any peer run somewhere in the mesh, survive node failures
 and are read back by id. needle is its command-line client.
 .
 The package installs the needled.service systemd unit, disabled: set
 NEEDLE_JOIN in /etc/needle/needled.env on every peer but the first, copy
 both /etc/needle/swarm.key and /etc/needle/api.token of the first host to
 the others (root only, mode 0600), then systemctl enable --now needled.
 Every host's install writes its own key and token: a host that kept its
 own key is no member, and one that kept its own token refuses the
 others' clients (401).
CONTROL
out="$dist/needle_${debver}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null
echo "$out"

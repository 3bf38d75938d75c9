# Shell functions the package builds share (deploy/deb/build.sh,
# deploy/rpm/build.sh source this file).

# pkg_version VERSION prints the package version (the same for dpkg and
# rpm) of VERSION as the Makefile's `git describe --tags --match 'v*'
# --always --dirty` prints it, so that dpkg, rpm, apt and dnf order the
# packages as the builds were made (an "upgrade" to an older build is a
# downgrade to them, and a repo serves the newest):
#
#   v1.2.3              1.2.3
#   v1.2.3-rc1          1.2.3~rc1     a ~ sorts before the release (dpkg,
#                                     rpm >= 4.10); a + would sort after it
#   v1.2.3-4-gabc1234   1.2.3+git<date>.abc1234   commits after v1.2.3:
#                                     after it, before 1.2.4~rc1 and 1.2.4
#   abc1234             0.0.0+git<date>.abc1234   no tag yet
#   dev                 0.0.0+git<date>.dev       the Makefile's without git
#   ...-dirty           the same with +dirty (.dirty after a +git part)
#
# <date> is the commit's committer date in UTC, YYYYMMDDHHMMSS
# (pkg_commit_date): a hash alone sorts at random, and a commit count
# differs between clones (a shallow one counts 1). Other dashes of a
# pre-release become dots (neither format takes a dash in an upstream
# version); it fails on anything else.
pkg_version() {
	local in=$1 tag="" hash="" dirty="" v date
	if [[ $in == *-dirty ]]; then
		dirty=1
		in=${in%-dirty}
	fi
	if [[ $in =~ ^(v?[0-9].*)-[0-9]+-g([0-9a-f]{4,40})$ ]]; then
		tag=${BASH_REMATCH[1]} hash=${BASH_REMATCH[2]}
	elif [[ $in =~ ^[0-9a-f]{4,40}$ || $in == dev ]]; then
		hash=$in
	else
		tag=$in
	fi
	if [ -n "$tag" ]; then
		if ! [[ $tag =~ ^v?([0-9]+(\.[0-9]+)*)(-([0-9A-Za-z][0-9A-Za-z.-]*))?$ ]]; then
			echo "build.sh: version $1 is none of vX.Y.Z, vX.Y.Z-PRERELEASE, vX.Y.Z-N-gCOMMIT (git describe), COMMIT or dev" >&2
			return 1
		fi
		v=${BASH_REMATCH[1]}
		if [ -n "${BASH_REMATCH[4]}" ]; then
			v+="~${BASH_REMATCH[4]//-/.}"
		fi
	else
		v=0.0.0
	fi
	if [ -n "$hash" ]; then
		date=$(pkg_commit_date "$hash") || return 1
		v+="+git$date.$hash"
	fi
	if [ -n "$dirty" ]; then
		if [[ $v == *+* ]]; then v+=.dirty; else v+=+dirty; fi
	fi
	if ! [[ $v =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
		echo "build.sh: version $1 gives $v, not a package version" >&2
		return 1
	fi
	printf '%s\n' "$v"
}

# pkg_commit_date COMMIT prints COMMIT's committer date in UTC as
# YYYYMMDDHHMMSS, from the git history of the checkout this file is in
# (a fresh clone's, a shallow one's too: it holds its head commit). With
# no history that holds COMMIT (a source tarball, or COMMIT is dev) it
# says so on stderr and prints SOURCE_DATE_EPOCH's date when that is set
# (reproducible-builds.org: a tarball's packager sets it to the commit's
# time), else the build's time, which sorts a rebuild of an old commit
# as new.
pkg_commit_date() {
	local root d
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	# TZ=UTC with format-local: the committer's own zone would make a
	# later commit from a zone further east sort earlier.
	if [[ $1 =~ ^[0-9a-f]{4,40}$ ]] &&
		d=$(TZ=UTC git -C "$root" -c log.showSignature=false log -1 --format=%cd \
			--date=format-local:%Y%m%d%H%M%S "$1^{commit}" -- 2>/dev/null) &&
		[[ $d =~ ^[0-9]{14}$ ]]; then
		printf '%s\n' "$d"
		return 0
	fi
	if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
		if ! [[ $SOURCE_DATE_EPOCH =~ ^[0-9]+$ ]] || ! d=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S); then
			echo "build.sh: SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH is not a count of seconds" >&2
			return 1
		fi
		echo "build.sh: commit $1 is in no git history at $root (a source tarball?): the package version is dated by SOURCE_DATE_EPOCH ($d UTC)" >&2
	else
		d=$(date -u +%Y%m%d%H%M%S)
		echo "build.sh: commit $1 is in no git history at $root (a source tarball?): the package version is dated by the build's time ($d UTC), not the commit's; set SOURCE_DATE_EPOCH to the commit's time for that" >&2
	fi
	printf '%s\n' "$d"
}

# pkg_binaries DIST ARCH fails unless make release wrote both binaries.
pkg_binaries() {
	local b
	for b in needled needle; do
		[ -x "$1/$b-linux-$2" ] || { echo "build.sh: $1/$b-linux-$2 missing (make release)" >&2; return 1; }
	done
}

# pkg_unit OUT writes deploy/systemd/needled.service to OUT running the
# packaged /usr/bin/needled, without the install steps that open it (the
# package's: from its third line to the next bare "#"). The steps further
# down, those of a members file, stay: the operator's.
pkg_unit() {
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	sed -e 's#/usr/local/bin/needled#/usr/bin/needled#' -e '3,/^#$/d' \
		"$root/deploy/systemd/needled.service" >"$1"
	if grep -q -e /usr/local -e 'needle keygen' -e 'dist/' "$1"; then
		echo "build.sh: the unit still holds the manual install's steps" >&2
		return 1
	fi
}

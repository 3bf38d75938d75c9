package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pkgVersion runs pkg.sh's pkg_version VERSION through bash, with pkg.sh
// copied into root/deploy so that its git history is root's. It returns
// the version printed, stderr, and whether it succeeded.
func pkgVersion(t *testing.T, root, version string, env ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command("bash", "-c", `. "$1/deploy/pkg.sh" && pkg_version "$2"`, "pkg", root, version)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return strings.TrimSpace(out.String()), errb.String(), err == nil
}

// gitTree makes a directory holding deploy/pkg.sh and, with commits, a git
// repository of one commit per committer date, returning the commits'
// short hashes. Git reads no configuration of the machine, and looks for
// no repository above the directory.
func gitTree(t *testing.T, dates ...string) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	for _, v := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	script, err := os.ReadFile("pkg.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "deploy", "pkg.sh"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(dates) == 0 {
		return dir, nil
	}
	git := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgSign=false"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git(nil, "init", "-q")
	var hashes []string
	for _, d := range dates {
		git([]string{"GIT_COMMITTER_DATE=" + d, "GIT_AUTHOR_DATE=" + d}, "commit", "-q", "--allow-empty", "-m", d)
		hashes = append(hashes, git(nil, "rev-parse", "--short=7", "HEAD"))
	}
	return dir, hashes
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: %s is not installed, so pkg.sh's versions are not checked: %v", tool, err)
		}
	}
}

// dpkgLess reports whether dpkg orders a before b, failing the test when
// dpkg finds either malformed.
func dpkgLess(t *testing.T, a, b string) bool {
	t.Helper()
	var errb bytes.Buffer
	cmd := exec.Command("dpkg", "--compare-versions", a, "lt", b)
	cmd.Stderr = &errb
	err := cmd.Run()
	if errb.Len() > 0 {
		t.Errorf("dpkg --compare-versions %s lt %s: %s", a, b, errb.String())
	}
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatal(err)
	}
	return err == nil
}

// rpmCompare is rpm.vercmp(a, b): -1, 0 or 1.
func rpmCompare(t *testing.T, a, b string) string {
	t.Helper()
	out, err := exec.Command("rpm", "--eval", `%{lua: print(rpm.vercmp("`+a+`", "`+b+`"))}`).CombinedOutput()
	if err != nil {
		t.Fatalf("rpm vercmp %s %s: %v: %s", a, b, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Package versions sort as the builds were made: untagged commits by
// their committer date (in UTC), a pre-release before its release,
// commits after a tag after it and before the next release. Finding 4 of
// the SRE audit: 0.0.0+git.<hash> sorted by hash, X.Y.Z+rc1 after X.Y.Z.
func TestPackageVersionsSort(t *testing.T) {
	needTools(t, "bash", "git", "dpkg")
	// older is 00:00 UTC but 09:00 in its committer's zone; newer 04:00
	// UTC but 20:00 the day before in its own: dated in the committers'
	// zones, they would sort the wrong way round.
	root, c := gitTree(t, "2026-12-06T09:00:00+09:00", "2026-12-05T20:00:00-08:00")
	older, newer := c[0], c[1]
	tz := "TZ=Asia/Tokyo" // pkg.sh must not use the builder's zone either
	for in, want := range map[string]string{
		older:                           "0.0.0+git20261206000000." + older,
		newer:                           "0.0.0+git20261206040000." + newer,
		newer + "-dirty":                "0.0.0+git20261206040000." + newer + ".dirty",
		"v1.2.0":                        "1.2.0",
		"1.2.0":                         "1.2.0",
		"v1.2.0-rc1":                    "1.2.0~rc1",
		"v1.2.0-rc.2":                   "1.2.0~rc.2",
		"v1.2.0-beta-2":                 "1.2.0~beta.2",
		"v1.2.0-3-g" + older:            "1.2.0+git20261206000000." + older,
		"v1.2.0-rc1-1-g" + older:        "1.2.0~rc1+git20261206000000." + older,
		"v1.2.0-3-g" + newer + "-dirty": "1.2.0+git20261206040000." + newer + ".dirty",
		"v1.2.0-dirty":                  "1.2.0+dirty",
	} {
		got, stderr, ok := pkgVersion(t, root, in, tz)
		if !ok || got != want {
			t.Errorf("pkg_version %s = %q (ok %v, stderr %q); want %q", in, got, ok, stderr, want)
		}
	}

	// Each sorts after the one before it.
	order := []string{
		older, newer,
		"v0.9.0",
		"v1.2.0-alpha", "v1.2.0-beta-2", "v1.2.0-rc1", "v1.2.0-rc1-1-g" + older, "v1.2.0-rc2", "v1.2.0-rc10",
		"v1.2.0", "v1.2.0-3-g" + older, "v1.2.0-1-g" + newer,
		"v1.2.1-rc1", "v1.2.1", "v1.10.0",
	}
	var versions []string
	for _, in := range order {
		v, stderr, ok := pkgVersion(t, root, in, tz)
		if !ok {
			t.Fatalf("pkg_version %s failed: %s", in, stderr)
		}
		versions = append(versions, v)
	}
	_, rpmErr := exec.LookPath("rpm")
	if rpmErr != nil {
		t.Logf("SKIPPED the rpm half: rpm is not installed (apt-get install rpm): %v", rpmErr)
	}
	for i := range versions {
		for j := i + 1; j < len(versions); j++ {
			a, b := versions[i], versions[j]
			if !dpkgLess(t, a, b) {
				t.Errorf("dpkg does not sort %s (%s) before %s (%s)", a, order[i], b, order[j])
			}
			if rpmErr == nil {
				if got := rpmCompare(t, a, b); got != "-1" {
					t.Errorf("rpm.vercmp(%s, %s) = %s; want -1 (%s before %s)", a, b, got, order[i], order[j])
				}
			}
		}
	}

	for _, bad := range []string{"garbage", "v1.2.0-", "v1..2", "main"} {
		if got, stderr, ok := pkgVersion(t, root, bad); ok || !strings.Contains(stderr, "version "+bad+" ") {
			t.Errorf("pkg_version %s = %q, stderr %q; want a failure naming it", bad, got, stderr)
		}
	}
}

// Without a git history that holds the commit (a source tarball) the
// version is dated by SOURCE_DATE_EPOCH, else by the build's time, and
// says so.
func TestPackageVersionWithoutGit(t *testing.T) {
	needTools(t, "bash", "git")
	root, _ := gitTree(t)
	got, stderr, ok := pkgVersion(t, root, "abc1234", "SOURCE_DATE_EPOCH=1796536800")
	if want := "0.0.0+git20261206060000.abc1234"; !ok || got != want {
		t.Errorf("pkg_version abc1234, SOURCE_DATE_EPOCH=1796536800 = %q (ok %v, stderr %q); want %q", got, ok, stderr, want)
	}
	if !strings.Contains(stderr, "no git history") || !strings.Contains(stderr, "SOURCE_DATE_EPOCH") {
		t.Errorf("stderr %q does not say that the date is SOURCE_DATE_EPOCH's, not the commit's", stderr)
	}
	got, stderr, ok = pkgVersion(t, root, "dev", "SOURCE_DATE_EPOCH=")
	if !ok || !regexp.MustCompile(`^0\.0\.0\+git20[0-9]{12}\.dev$`).MatchString(got) {
		t.Errorf("pkg_version dev without git = %q (ok %v, stderr %q); want 0.0.0+git<now>.dev", got, ok, stderr)
	}
	if !strings.Contains(stderr, "build's time") {
		t.Errorf("stderr %q does not say that the date is the build's", stderr)
	}
	if got, stderr, ok := pkgVersion(t, root, "abc1234", "SOURCE_DATE_EPOCH=yesterday"); ok || !strings.Contains(stderr, "SOURCE_DATE_EPOCH=yesterday") {
		t.Errorf("pkg_version with SOURCE_DATE_EPOCH=yesterday = %q, stderr %q; want a failure naming it", got, stderr)
	}
}

// buildPackage runs deploy/KIND/build.sh on stand-in binaries (a shell
// script each: nothing is compiled) and returns the package's path.
func buildPackage(t *testing.T, kind string) string {
	t.Helper()
	dist := t.TempDir()
	for _, b := range []string{"needled", "needle"} {
		if err := os.WriteFile(filepath.Join(dist, b+"-linux-amd64"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", filepath.Join(kind, "build.sh"), "v0.0.0-test", "amd64", dist)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s/build.sh: %v\n%s", kind, err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// membersBind returns the source directory of the unit's members bind,
// its "-" (optional) prefix cut.
func membersBind(t *testing.T, u unit) string {
	t.Helper()
	for _, v := range u["Service"]["BindReadOnlyPaths"] {
		for _, b := range strings.Fields(v) {
			if src, dst, _ := strings.Cut(b, ":"); strings.Contains(dst, "members") {
				return strings.TrimPrefix(src, "-")
			}
		}
	}
	t.Fatalf("the unit binds no members directory: %v", u["Service"]["BindReadOnlyPaths"])
	return ""
}

// The packages make the directory the unit binds for a members file,
// empty, root's, 0755 (the service's user lists it through the bind; the
// 0700 /etc/needle above it stays closed): a packaged host needs only the
// file. The bind is optional all the same ("-"), for the manual install.
// The packaged unit keeps the operator's steps of a members file and
// drops only the manual install's (they dropped every "#   install"
// line, the members file's too, and its comment read "...who joins): and
// NEEDLE_MEMBERS=...").
func TestPackagesMakeMembersDir(t *testing.T) {
	needTools(t, "bash", "dpkg-deb")
	deb := buildPackage(t, "deb")
	list, err := exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v", err)
	}
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	u := parseUnit(t, filepath.Join(root, "lib/systemd/system/needled.service"))
	dir := membersBind(t, u)
	if !strings.HasPrefix(u["Service"]["BindReadOnlyPaths"][0], "-") {
		t.Errorf("BindReadOnlyPaths=%s: want it optional (-), for a manual install without the directory", u["Service"]["BindReadOnlyPaths"][0])
	}
	want := "drwxr-xr-x root/root ." + dir + "/"
	found := false
	for _, line := range strings.Split(string(list), "\n") {
		if f := strings.Fields(line); len(f) == 6 && f[0]+" "+f[1]+" "+f[5] == want {
			found = true
		}
	}
	if !found {
		t.Errorf("the deb lacks %q (the unit's members bind); it holds:\n%s", want, list)
	}
	if entries, err := os.ReadDir(filepath.Join(root, dir)); err != nil || len(entries) != 0 {
		t.Errorf("the deb's %s = %v, %v; want it empty (the operator's file goes there)", dir, entries, err)
	}
	unitText, err := os.ReadFile(filepath.Join(root, "lib/systemd/system/needled.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{"#   install -m 0644 members " + dir + "/members", "#   and NEEDLE_MEMBERS="} {
		if !strings.Contains(string(unitText), keep) {
			t.Errorf("the packaged unit lost %q, a step of the members file", keep)
		}
	}
	for _, drop := range []string{"needle keygen", "dist/", "/usr/local", "install -m 0644 deploy/systemd"} {
		if strings.Contains(string(unitText), drop) {
			t.Errorf("the packaged unit keeps %q, a step of the manual install", drop)
		}
	}

	if _, err := exec.LookPath("rpmbuild"); err != nil {
		t.Logf("SKIPPED the rpm half: rpmbuild is not installed (apt-get install rpm): %v", err)
		return
	}
	rpm := buildPackage(t, "rpm")
	files, err := exec.Command("rpm", "-qp", "--qf", "[%{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME} %{FILENAMES}\n]", rpm).Output()
	if err != nil {
		t.Fatalf("rpm -qp: %v", err)
	}
	if want := "drwxr-xr-x root root " + dir; !slices.Contains(strings.Split(string(files), "\n"), want) {
		t.Errorf("the rpm lacks %q (the unit's members bind); it holds:\n%s", want, files)
	}
}

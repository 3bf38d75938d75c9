// Package deptest checks that a package keeps to its dependency and purity
// rules. It is imported only from tests.
//
// needle's core packages (shard, ring, steal, and the Node) are pure: they do
// no IO, start no goroutines, read no wall clock and use no global
// randomness; time and randomness are inputs. Each of them has one small
// test:
//
//	func TestPure(t *testing.T) { deptest.Pure(t, ".") }
//
// Pure runs two checks over the listed packages (patterns as for go list,
// relative to the test's directory, which is the package's own):
//
//  1. Dependencies. It runs `go list -deps -json` and fails for every
//     package in the transitive dependencies that PureDeps forbids (network,
//     processes, Badger, libp2p, metrics or trace export), naming the import
//     chain that brings it in, shortest first:
//     "…/simulate -> …/peer -> github.com/dgraph-io/badger/v4: disk storage".
//  2. Source. It parses the non-test .go files in each listed package's
//     directory (all of them, whatever their build constraints) and fails
//     for every go statement, every use of the wall clock (time.Now, Sleep,
//     After, Tick, NewTimer, NewTicker, AfterFunc, Since, Until) and every
//     use of math/rand's or math/rand/v2's global generator (anything but
//     the constructors New, NewSource, NewPCG, NewChaCha8, NewZipf and the
//     types), naming file:line. Imports are resolved by their local name
//     (aliases included); a local variable that shadows the package name is
//     not a use; a dot import of time or math/rand is itself a violation.
//
// A Checker states other rules: BadDeps for the whole dependency graph,
// BadImports for the listed packages' direct imports only, GOOS and GOARCH
// to list for another platform. Its Violations method returns what it
// finds, for a caller (or deptest's own tests) to inspect; Check fails a
// test with them.
//
// Rule keys are import paths: "net" forbids exactly net; "net/http/..."
// forbids net/http and every package below it, like a go list pattern.
// When several keys match, the longest gives the reason.
//
// Limits: the source check works on syntax, without type information, so
// it sees a call through a function value (f := time.Now; f()) only where
// time.Now is named, and a method value of a *rand.Rand is not confused
// with the package's functions only when the variable is declared in the
// same file (parameters, locals, package-level vars).
package deptest

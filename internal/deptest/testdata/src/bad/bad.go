// Package bad breaks the source rules; each violation's line ends with a
// "want:" comment naming it, which deptest's tests compare with Source.
package bad

import (
	"math/rand"
	r2 "math/rand/v2"
	clock "time"
)

// Spawn starts a goroutine.
func Spawn(f func()) {
	go f() // want: go statement
}

// Stamp reads the clock through an alias.
func Stamp() clock.Time { return clock.Now() } // want: clock.Now

// nowFunc names the clock without calling it.
var nowFunc = clock.Now // want: clock.Now

// Wait waits on the clock.
func Wait(d clock.Duration) <-chan clock.Time { return clock.After(d) } // want: clock.After

// Roll uses the global v2 generator through an alias.
func Roll() int { return r2.IntN(6) } // want: r2.IntN

// Old uses the global v1 generator.
func Old() int { return rand.Intn(6) } // want: rand.Intn

// Deal shuffles with the global generator.
func Deal(s []int) {
	rand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] }) // want: rand.Shuffle
}

// Own builds its own generator: allowed.
func Own(seed uint64) *r2.Rand { return r2.New(r2.NewPCG(seed, 1)) }

// Shadow uses a parameter that shadows the package name: allowed.
func Shadow(rand *r2.Rand) int { return rand.IntN(6) }

// Later does arithmetic on times it is given: allowed.
func Later(t clock.Time, d clock.Duration) clock.Time { return t.Add(d) }

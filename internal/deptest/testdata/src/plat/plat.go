// Package plat links os/exec on windows only.
package plat

// Name is the package's name.
const Name = "plat"

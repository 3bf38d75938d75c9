package bad

import . "time" // want: dot import of time

// Dot reads the clock through a dot import.
func Dot() Time { return Now() }

package bad

import "time"

// Nap is only built on windows; the source check reads it anyway.
func Nap() { time.Sleep(time.Millisecond) } // want: time.Sleep

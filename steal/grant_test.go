package steal

import "testing"

func TestGrantSize(t *testing.T) {
	tests := []struct {
		name                  string
		ready, ownFree, asked int
		want                  int
	}{
		{"nothing ready", 0, 0, 4, 0},
		{"all taken by own slots", 3, 3, 4, 0},
		{"fewer ready than own slots", 2, 5, 4, 0},
		{"one in excess goes", 1, 0, 4, 1},
		{"half of excess", 10, 2, 64, 4},
		{"odd excess rounds up", 11, 2, 64, 5},
		{"capped by asked", 300, 0, 4, 4},
		{"asked zero", 300, 0, 0, 0},
		{"asked negative", 300, 0, -1, 0},
		{"negative own free (overcommitted)", 6, -2, 64, 3},
		{"no own slots", 2, 0, 64, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GrantSize(tt.ready, tt.ownFree, tt.asked); got != tt.want {
				t.Fatalf("GrantSize(%d, %d, %d) = %d; want %d", tt.ready, tt.ownFree, tt.asked, got, tt.want)
			}
		})
	}
}

// TestGrantSizeProperties checks, over a grid, that a grant is within
// [0, asked], is 0 without excess, is not 0 with excess and a request, and
// gives the thief at most one task more than the victim keeps beyond its own
// free slots.
func TestGrantSizeProperties(t *testing.T) {
	for ready := range 40 {
		for free := -3; free < 10; free++ {
			for asked := -1; asked < 30; asked++ {
				g := GrantSize(ready, free, asked)
				excess := ready - max(free, 0)
				switch {
				case g < 0 || g > max(asked, 0):
					t.Fatalf("GrantSize(%d, %d, %d) = %d outside [0, asked]", ready, free, asked, g)
				case excess <= 0 && g != 0:
					t.Fatalf("GrantSize(%d, %d, %d) = %d; want 0 without excess", ready, free, asked, g)
				case g > 0 && excess-g < g-1:
					t.Fatalf("GrantSize(%d, %d, %d) = %d gives more than half the excess %d", ready, free, asked, g, excess)
				case excess > 0 && asked > 0 && g == 0:
					t.Fatalf("GrantSize(%d, %d, %d) = 0 with excess %d", ready, free, asked, excess)
				}
			}
		}
	}
}

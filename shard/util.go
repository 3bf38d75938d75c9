package shard

import (
	"maps"
	"slices"
)

func sortedGroupIDs(m map[GroupID]*group) []GroupID {
	return slices.Sorted(maps.Keys(m))
}

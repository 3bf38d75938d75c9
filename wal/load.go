package wal

import "fmt"

// LoadAll loads the stored state of every partition of log: what a node
// restarts from.
func LoadAll(log Log) (map[uint32]PartitionState, error) {
	parts, err := log.Partitions()
	if err != nil {
		return nil, fmt.Errorf("wal: list partitions: %w", err)
	}
	states := make(map[uint32]PartitionState, len(parts))
	for _, pt := range parts {
		st, err := log.Load(pt)
		if err != nil {
			return nil, fmt.Errorf("wal: load partition %d: %w", pt, err)
		}
		states[pt] = st
	}
	return states, nil
}

package shard

import (
	"crypto/sha256"
	"encoding/hex"
)

// Keyed ids: a request that carries an idempotency key gets an id derived
// from it, so a repeat lands on the same group (in the same partition)
// without a key index. A request without a key gets a random id from the
// runtime, which owns the randomness.

// KeyedGroupID returns the group id of a submission with idempotency key.
func KeyedGroupID(key string) GroupID {
	sum := sha256.Sum256([]byte(key))
	return GroupID("k" + hex.EncodeToString(sum[:12]))
}

// KeyedScheduleID returns the id of a schedule created with idempotency
// key.
func KeyedScheduleID(key string) ScheduleID {
	sum := sha256.Sum256([]byte("schedule\x00" + key))
	return ScheduleID("s" + hex.EncodeToString(sum[:12]))
}

// KeyedTriggerTag returns the tag of a manual firing with idempotency key.
func KeyedTriggerTag(key string) string {
	sum := sha256.Sum256([]byte("trigger\x00" + key))
	return "k" + hex.EncodeToString(sum[:8])
}

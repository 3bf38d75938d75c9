package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// labelFlag is the repeatable --label key=value flag: the peer's
// placement labels. A malformed label, or a key given two values, is an
// error naming it.
type labelFlag map[string]string

func (l labelFlag) String() string { return strings.Join(node.LabelList(l), ",") }

// Set adds one label, or several separated by commas.
func (l labelFlag) Set(list string) error {
	for kv := range strings.SplitSeq(list, ",") {
		kv = strings.TrimSpace(kv)
		if err := shard.ValidateLabel(kv); err != nil {
			return err
		}
		k, v, _ := strings.Cut(kv, "=")
		if old, ok := l[k]; ok && old != v {
			return fmt.Errorf("label %q given twice (%s=%s and %s)", k, k, old, kv)
		}
		l[k] = v
	}
	return nil
}

// labelsEnv reads NEEDLE_LABELS ("zone=a,gpu=true") when no --label was
// given on the command line or as NEEDLE_LABEL.
func labelsEnv(fs *flag.FlagSet, set map[string]bool, getenv func(string) string) error {
	v := getenv("NEEDLE_LABELS")
	if v == "" || set["label"] {
		return nil
	}
	set["label"] = true
	if err := fs.Set("label", v); err != nil {
		return fmt.Errorf("NEEDLE_LABELS=%q: %v", v, err)
	}
	return nil
}

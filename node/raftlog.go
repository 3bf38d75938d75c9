package node

import (
	"fmt"
	"log/slog"
	"strings"
)

// raftLogger adapts slog to raft.Logger, one per partition (its lines
// name it). Raft's info and debug lines are dropped (they describe every
// election and conf change of 256 groups); warnings and errors are kept,
// but for the one every partition logs at each restart (benign: the
// replica campaigns once its configuration applied), logged at debug.
type raftLogger struct{ log *slog.Logger }

func (l raftLogger) Debug(...any)          {}
func (l raftLogger) Debugf(string, ...any) {}
func (l raftLogger) Info(...any)           {}
func (l raftLogger) Infof(string, ...any)  {}
func (l raftLogger) Warning(v ...any)      { l.log.Warn("raft: " + fmt.Sprint(v...)) }
func (l raftLogger) Warningf(f string, v ...any) {
	if strings.Contains(f, "pending configuration changes") {
		l.log.Debug("raft: " + fmt.Sprintf(f, v...))
		return
	}
	l.log.Warn("raft: " + fmt.Sprintf(f, v...))
}
func (l raftLogger) Error(v ...any)            { l.log.Error("raft: " + fmt.Sprint(v...)) }
func (l raftLogger) Errorf(f string, v ...any) { l.log.Error("raft: " + fmt.Sprintf(f, v...)) }
func (l raftLogger) Fatal(v ...any)            { l.fatal(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(f string, v ...any) { l.fatal(fmt.Sprintf(f, v...)) }
func (l raftLogger) Panic(v ...any)            { panic("raft: " + fmt.Sprint(v...)) }
func (l raftLogger) Panicf(f string, v ...any) { panic("raft: " + fmt.Sprintf(f, v...)) }
func (l raftLogger) fatal(msg string)          { l.log.Error("raft: " + msg); panic("raft: " + msg) }

// Log keys, one const block for the whole package.
const (
	keyNode  = "node"
	keyPart  = "partition"
	keyTask  = "task"
	keyGroup = "group"
	keyRound = "round"
	keyPeer  = "peer"
	keyErr   = "err"
)

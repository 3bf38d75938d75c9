package peer

import (
	"github.com/needle-mesh/needle/peer/handler"
	"github.com/needle-mesh/needle/peer/webhook"
)

// adapters returns the handler registry and the webhook sender the
// runtime uses: Handlers and Webhooks as given (needled builds them), else
// built from Builtins and Notify (embedding programs, tests).
func (c *Config) adapters() (reg *handler.Registry, sender *webhook.Sender, err error) {
	if reg = c.Handlers; reg == nil {
		if reg, err = handler.NewBuiltins(c.Builtins); err != nil {
			return nil, nil, err
		}
	}
	if sender = c.Webhooks; sender == nil {
		if sender, err = webhook.New(c.Notify); err != nil {
			return nil, nil, err
		}
	}
	return reg, sender, nil
}

// The handler contract and the built-ins live in package handler; these
// aliases keep programs that embed a peer and were written against
// package peer compiling unchanged.
type (
	// Call is handler.Call.
	Call = handler.Call
	// HandlerFunc is handler.Func.
	HandlerFunc = handler.Func
	// Registry is handler.Registry.
	Registry = handler.Registry
	// BuiltinConfig is handler.BuiltinConfig.
	BuiltinConfig = handler.BuiltinConfig
	// ExecExitError is handler.ExecExitError.
	ExecExitError = handler.ExecExitError
)

// Permanent is handler.Permanent.
func Permanent(err error) error { return handler.Permanent(err) }

// IsPermanent is handler.IsPermanent.
func IsPermanent(err error) bool { return handler.IsPermanent(err) }

// NewRegistry is handler.NewRegistry.
func NewRegistry() *Registry { return handler.NewRegistry() }

// RegisterBuiltins is handler.RegisterBuiltins.
func RegisterBuiltins(r *Registry, cfg BuiltinConfig) error { return handler.RegisterBuiltins(r, cfg) }

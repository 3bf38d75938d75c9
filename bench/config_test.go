package bench

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Needled = "/bin/needled"
	tests := []struct {
		name string
		edit func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"zero numbers take defaults", func(c *Config) { c.Peers, c.W1Batch = 0, 0 }, ""},
		{"no binary", func(c *Config) { c.Needled = "" }, "--needled"},
		{"negative peers", func(c *Config) { c.Peers = -1 }, "--peers"},
		{"too many peers", func(c *Config) { c.Peers = 65 }, "--peers"},
		{"negative slots", func(c *Config) { c.Slots = -2 }, "--slots"},
		{"negative batch", func(c *Config) { c.W1Batch = -1 }, "--w1-batch"},
		{"negative w4", func(c *Config) { c.W4Tasks = -1 }, "--w4-tasks"},
		{"unknown workload", func(c *Config) { c.Workloads = []string{"w1", "w9"} }, `--workloads: unknown workload "w9"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			err := cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v; want an error naming %q", err, tt.want)
			}
		})
	}
}

func TestConfigSelectedOrder(t *testing.T) {
	cfg := Config{Workloads: []string{W4, W1, W4}}
	if got, want := strings.Join(cfg.selected(), ","), "w1,w4"; got != want {
		t.Errorf("selected() = %q; want %q", got, want)
	}
}

package bench

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"
)

// TestConfigDefaults fills in the defaults and rejects bad values, with
// ErrInvalidConfig, before anything connects.
func TestConfigDefaults(t *testing.T) {
	open := func(context.Context, ...option.ClientOption) (*spanner.Client, error) {
		return nil, errors.New("must not be called")
	}
	c, err := Config{NewClient: open}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Contenders, []int{1, 10, 100, 1000}) || c.Clients != DefaultClients ||
		c.Duration != DefaultDuration || c.Drain != DefaultDrain || c.Table != "Mutexes" || c.Progress == nil {
		t.Errorf("defaults: %+v", c)
	}
	for name, bad := range map[string]Config{
		"no database":       {},
		"two databases":     {NewClient: open, PerRun: func(context.Context) (Opener, func(), error) { return open, func() {}, nil }},
		"zero contenders":   {NewClient: open, Contenders: []int{1, 0}},
		"too many":          {NewClient: open, Contenders: []int{MaxContenders + 1}},
		"negative clients":  {NewClient: open, Clients: -1},
		"negative duration": {NewClient: open, Duration: -time.Second},
		"negative drain":    {NewClient: open, Drain: -time.Second},
		"bad table":         {NewClient: open, Table: "no-such table"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Run(context.Background(), bad); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Run = %v, want ErrInvalidConfig", err)
			}
		})
	}
	//lint:ignore SA1012 checking that a nil context is refused
	if _, err := Run(nil, Config{NewClient: open}); err == nil { //nolint:staticcheck
		t.Error("Run accepted a nil context")
	}
}

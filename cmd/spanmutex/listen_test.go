package main

import (
	"strings"
	"testing"
)

// --listen: unset listens on demand (no option: the library's default
// Scope), "off" gives a Scope that never listens, an address a Scope that
// listens there; --advertise needs an address to listen on.
func TestListenFlags(t *testing.T) {
	for _, tc := range []struct {
		name, listen, advertise string
		opts                    int
		wantErr                 string
	}{
		{"default", "", "", 0, ""},
		{"off", "off", "", 1, ""},
		{"address", "127.0.0.1:0", "", 1, ""},
		{"advertise alone", "", "10.0.0.7:7946", 0, "--advertise goes with --listen ADDR"},
		{"advertise with off", "off", "10.0.0.7:7946", 0, "--advertise goes with --listen ADDR"},
		{"bad address", "no-port", "", 0, "--listen no-port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := listenFlags{listen: tc.listen, advertise: tc.advertise}
			opts, closeScope, err := l.scope()
			defer closeScope()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(opts) != tc.opts {
				t.Errorf("%d options; want %d", len(opts), tc.opts)
			}
		})
	}
}

package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// productionLatency is the latency model's default: what one RPC of each
// method costs a client in the same region as a production Spanner
// instance, by doc/benchmarks.md's sources (a key read or a statement
// about 2 ms, a BeginTransaction the same, a read-write Commit about 8 ms:
// it waits for its Paxos write and commit wait). Methods it does not name
// (session management) cost nothing more.
var productionLatency = map[string]time.Duration{
	"Read":                2 * time.Millisecond,
	"StreamingRead":       2 * time.Millisecond,
	"ExecuteSql":          2 * time.Millisecond,
	"ExecuteStreamingSql": 2 * time.Millisecond,
	"BeginTransaction":    2 * time.Millisecond,
	"Commit":              8 * time.Millisecond,
	"Rollback":            2 * time.Millisecond,
}

// ParseLatency parses a latency model: "" (none), "production" (the
// defaults above), or comma-separated METHOD=DURATION pairs that override
// the defaults ("Commit=10ms,Read=1ms"). Method names are gRPC's short
// names, as the RPC counts print them.
func ParseLatency(s string) (map[string]time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	m := maps.Clone(productionLatency)
	if s == "production" {
		return m, nil
	}
	for _, kv := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		d, err := time.ParseDuration(v)
		if !ok || name == "" || err != nil || d < 0 {
			return nil, fmt.Errorf("rpc latency %q: want production or METHOD=DURATION pairs such as Commit=8ms,Read=2ms", kv)
		}
		m[name] = d
	}
	return m, nil
}

// FormatLatency prints a latency model as ParseLatency reads it, methods
// in order; "none" for no model.
func FormatLatency(m map[string]time.Duration) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k].String())
	}
	return strings.Join(parts, ",")
}

package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLatency(t *testing.T) {
	m, err := ParseLatency("")
	require.NoError(t, err)
	assert.Nil(t, m, "no model: no delays")

	m, err = ParseLatency("production")
	require.NoError(t, err)
	assert.Equal(t, 8*time.Millisecond, m["Commit"])
	assert.Equal(t, 2*time.Millisecond, m["Read"])

	m, err = ParseLatency("Commit=10ms, Read=1ms")
	require.NoError(t, err)
	assert.Equal(t, 10*time.Millisecond, m["Commit"], "an override")
	assert.Equal(t, time.Millisecond, m["Read"])
	assert.Equal(t, 2*time.Millisecond, m["ExecuteStreamingSql"], "the defaults stay for methods not named")
	assert.Equal(t, "BeginTransaction=2ms,Commit=10ms,ExecuteSql=2ms,ExecuteStreamingSql=2ms,Read=1ms,Rollback=2ms,StreamingRead=2ms", FormatLatency(m))
	assert.Equal(t, "none", FormatLatency(nil))

	for _, bad := range []string{"Commit", "Commit=fast", "=2ms", "Commit=-1ms"} {
		_, err := ParseLatency(bad)
		assert.ErrorContains(t, err, "METHOD=DURATION", bad)
	}
}

// TestLatencyPadsTheNamedMethod checks the interceptor's padding: a call
// of a method the model names is held back until it has taken the
// modelled latency, a longer call or another method's not at all, and a
// ctx that ends stops the wait.
func TestLatencyPadsTheNamedMethod(t *testing.T) {
	c := newRPCCounter()
	c.latency = map[string]time.Duration{"Commit": 20 * time.Millisecond, "Rollback": time.Hour}
	ctx := context.Background()
	assert.Zero(t, c.pad(ctx, "/google.spanner.v1.Spanner/Read", time.Now()), "a method the model does not name")
	assert.Zero(t, c.pad(ctx, "/google.spanner.v1.Spanner/Commit", time.Now().Add(-time.Second)), "a call that took longer")
	start := time.Now()
	waited := c.pad(ctx, "/google.spanner.v1.Spanner/Commit", start.Add(-5*time.Millisecond))
	assert.Greater(t, waited, 10*time.Millisecond, "a call that took 5ms is held back to 20ms")
	assert.GreaterOrEqual(t, time.Since(start), 14*time.Millisecond)
	done, cancel := context.WithCancel(ctx)
	cancel()
	start = time.Now()
	c.pad(done, "/google.spanner.v1.Spanner/Rollback", start)
	assert.Less(t, time.Since(start), time.Minute, "an ended ctx stops the wait")
}

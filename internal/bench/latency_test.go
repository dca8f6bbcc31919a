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

// TestLatencyDelaysTheNamedMethod checks the interceptor's delay against
// a ctx that ends first: it returns the ctx's error rather than wait.
func TestLatencyDelaysTheNamedMethod(t *testing.T) {
	c := newRPCCounter()
	c.latency = map[string]time.Duration{"Commit": time.Hour}
	require.NoError(t, c.delay(context.Background(), "/google.spanner.v1.Spanner/Read"), "a method the model does not name is not delayed")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.delay(ctx, "/google.spanner.v1.Spanner/Commit"), context.Canceled)
}

package spanmutex

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// recorded is an SDK with in-memory exporters: spans as they end, metrics
// when collected.
type recorded struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	opts   []LockOption
}

func newRecorded(t *testing.T) *recorded {
	t.Helper()
	r := &recorded{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	r.opts = []LockOption{WithTracerProvider(tp), WithMeterProvider(mp)}
	return r
}

// mutexOpts are r's options, for a Mutex.
func (r *recorded) mutexOpts() []MutexOption {
	out := make([]MutexOption, len(r.opts))
	for i, o := range r.opts {
		out[i] = o
	}
	return out
}

// spansNamed returns the attributes of the ended spans called name, as strings.
func (r *recorded) spansNamed(name string) []map[string]string {
	var out []map[string]string
	for _, s := range r.spans.Ended() {
		if s.Name() != name {
			continue
		}
		m := map[string]string{"status": s.Status().Code.String()}
		for _, a := range s.Attributes() {
			m[string(a.Key)] = a.Value.Emit()
		}
		for _, e := range s.Events() {
			m["event:"+e.Name] = "yes"
		}
		out = append(out, m)
	}
	return out
}

// sums collects the metrics and returns, per instrument, the counters' sums
// and the histograms' counts by their attributes ("kind=lock,outcome=acquired").
func (r *recorded) sums(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(context.Background(), &rm))
	out := map[string]map[string]int64{}
	key := func(s attribute.Set) string {
		k := ""
		for _, kv := range s.ToSlice() {
			k += fmt.Sprintf("%s=%s,", kv.Key, kv.Value.Emit())
		}
		return k
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name][key(p.Attributes)] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name][key(p.Attributes)] += int64(p.Count)
				}
			}
		}
	}
	return out
}

func TestTelemetryLock(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	r := newRecorded(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := NewLock(c, "tel/lock", append(r.opts, WithOwner("a"))...)
	require.NoError(t, err)
	b, err := NewLock(c, "tel/lock", append(r.opts, WithOwner("b"))...)
	require.NoError(t, err)

	lease, err := a.Lock(ctx)
	require.NoError(t, err)
	_, err = b.TryLock(ctx)
	require.ErrorIs(t, err, ErrHeld)
	got := make(chan error, 1)
	go func() {
		_, err := b.Lock(ctx)
		got <- err
	}()
	probe, err := NewLock(c, "tel/lock") // not recorded
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "b queued", func() bool {
		_, err := probe.TryLock(ctx)
		var held *HeldError
		return errors.As(err, &held) && held.Waiters == 1
	})
	require.NoError(t, a.Unlock(ctx))
	require.NoError(t, <-got)
	require.NoError(t, b.Unlock(ctx))

	acq := r.spansNamed("spanmutex.acquire")
	require.Len(t, acq, 3)
	require.Equal(t, "acquired", acq[0]["spanmutex.outcome"])
	require.Equal(t, fmt.Sprint(lease.Token()), acq[0]["spanmutex.token"])
	require.Equal(t, "a", acq[0]["spanmutex.owner"])
	require.Equal(t, "tel/lock", acq[0]["spanmutex.name"])
	require.Equal(t, "held", acq[1]["spanmutex.outcome"])
	require.Equal(t, "trylock", acq[1]["spanmutex.kind"])
	require.Equal(t, "acquired", acq[2]["spanmutex.outcome"])
	require.Equal(t, "yes", acq[2]["event:hand-off"], "b was handed the lock by a's Unlock")
	require.Len(t, r.spansNamed("spanmutex.hold"), 2)
	un := r.spansNamed("spanmutex.Unlock")
	require.Len(t, un, 2)
	require.Equal(t, "released", un[0]["spanmutex.outcome"])

	m := r.sums(t)
	t.Logf("metrics: %v", m)
	require.Equal(t, int64(2), m["spanmutex.acquisitions"]["spanmutex.kind=lock,spanmutex.outcome=acquired,"])
	require.Equal(t, int64(1), m["spanmutex.acquisitions"]["spanmutex.kind=trylock,spanmutex.outcome=held,"])
	require.Equal(t, int64(3), sum(m["spanmutex.wait"]))
	require.Equal(t, int64(2), m["spanmutex.hold"]["spanmutex.kind=lock,spanmutex.outcome=released,"])
	require.Equal(t, int64(1), sum(m["spanmutex.handoffs"]))
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

func TestTelemetryRun(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	r := newRecorded(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := New(c, "tel/run", r.mutexOpts()...)
	require.NoError(t, err)
	out, err := m.Run(ctx, func(context.Context, *Lease) error { return nil })
	require.NoError(t, err)
	require.Equal(t, Executed, out)
	out, err = m.Run(ctx, func(context.Context, *Lease) error { t.Error("ran twice"); return nil })
	require.NoError(t, err)
	require.Equal(t, AlreadyDone, out)

	runs := r.spansNamed("spanmutex.Run")
	require.Len(t, runs, 2)
	require.Equal(t, "done", runs[0]["spanmutex.outcome"])
	require.Equal(t, "already_done", runs[1]["spanmutex.outcome"])
	sec := r.spansNamed("spanmutex.section")
	require.Len(t, sec, 1)
	require.Equal(t, "1", sec[0]["spanmutex.token"])
	ms := r.sums(t)
	require.Equal(t, int64(1), ms["spanmutex.acquisitions"]["spanmutex.kind=run,spanmutex.outcome=acquired,"])
	require.Equal(t, int64(1), ms["spanmutex.acquisitions"]["spanmutex.kind=run,spanmutex.outcome=already_done,"])
	require.Equal(t, int64(1), ms["spanmutex.section.attempts"]["spanmutex.kind=run,spanmutex.outcome=done,"])
	require.Equal(t, int64(1), sum(ms["spanmutex.hold"]))
}

// TestTelemetryLeaseLostAndTakeover cuts a holder off from Spanner: its
// failed renewals and lost lease, and the other contender's takeover, are
// counted and marked on the spans.
func TestTelemetryLeaseLostAndTakeover(t *testing.T) {
	t.Parallel() // waits out leases beside the other tests that do (own database)
	db := freshDatabase(t)
	silenced, cut := silenceableClient(t, db)
	c := newClient(t, db)
	r := newRecorded(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A lease long enough for renewals to be tried (and fail) before it
	// runs out, even on a loaded machine: with a short one, the lease can
	// expire before the renewal loop first wakes, and nothing fails.
	opts := append(r.opts, WithLease(1500*time.Millisecond), WithJitter(0))
	a, err := NewLock(silenced, "tel/takeover", opts...)
	require.NoError(t, err)
	b, err := NewLock(c, "tel/takeover", opts...)
	require.NoError(t, err)
	lease, err := a.Lock(ctx)
	require.NoError(t, err)
	cut.Store(true)
	select {
	case <-lease.Done():
	case <-ctx.Done():
		t.Fatal("the silenced holder did not learn it lost its lease")
	}
	_, err = b.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Unlock(ctx))
	cut.Store(false)
	require.ErrorIs(t, a.Unlock(ctx), ErrLeaseLost)

	m := r.sums(t)
	t.Logf("metrics: %v", m)
	require.Equal(t, int64(1), sum(m["spanmutex.leases_lost"]))
	require.Equal(t, int64(1), sum(m["spanmutex.takeovers"]))
	require.Positive(t, sum(m["spanmutex.renewals_failed"]))
	acq := r.spansNamed("spanmutex.acquire")
	require.Equal(t, "yes", acq[len(acq)-1]["event:takeover"])
	holds := r.spansNamed("spanmutex.hold")
	require.Equal(t, "yes", holds[len(holds)-1]["event:lease lost"])
	require.Equal(t, "lease_lost", holds[len(holds)-1]["spanmutex.outcome"])
}

// BenchmarkTelemetryOff measures what the instrumentation costs with the
// default, global no-op providers: the helpers alone (Off), the same with
// an SDK recording (On, for scale), and an uncontended Lock → Unlock cycle
// on the emulator, whose time they are a part of.
func BenchmarkTelemetryOff(b *testing.B) {
	ctx := context.Background()
	lease := newLease("bench", "owner", "id", 1, false, defaultTable)
	helpers := func(b *testing.B, opts ...LeaseOption) {
		cfg := defaultConfig()
		for _, o := range opts {
			o.applyMutex(&cfg)
		}
		tel, err := newTelemetry(&cfg, "bench")
		require.NoError(b, err)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			_, acq := tel.start(ctx, "spanmutex.acquire", "lock")
			acq.granted(lease, nil)
			_, hold := tel.start(ctx, "spanmutex.hold", "lock")
			_, un := tel.start(ctx, "spanmutex.Unlock", "unlock")
			hold.held(lease, "released", nil)
			un.unlocked(nil)
		}
	}
	b.Run("helpers/off", func(b *testing.B) { helpers(b) })
	b.Run("helpers/on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		helpers(b, WithTracerProvider(tp), WithMeterProvider(mp))
	})
	b.Run("lock-unlock/off", func(b *testing.B) {
		if emu == nil {
			b.Skip("needs the emulator")
		}
		db, err := emu.NewDatabase(ctx)
		require.NoError(b, err)
		c, err := emu.NewClient(ctx, db)
		require.NoError(b, err)
		defer c.Close()
		l, err := NewLock(c, "bench/telemetry")
		require.NoError(b, err)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := l.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A section that panics ends its span with the outcome "panic", not "done".
func TestTelemetrySectionPanic(t *testing.T) {
	r := newRecorded(t)
	st := &memStore{now: time.Unix(1000, 0)}
	m := newTestMutex(t, st, r.mutexOpts()...)
	assert.PanicsWithValue(t, "boom", func() {
		_, _ = m.Run(context.Background(), func(ctx context.Context, l *Lease) error { panic("boom") })
	})
	sections := r.spansNamed("spanmutex.section")
	require.Len(t, sections, 1)
	assert.Equal(t, "panic", sections[0]["spanmutex.outcome"])
}

// A Semaphore reports as a Lock does: an acquire span per Acquire or
// TryAcquire (kinds acquire, tryacquire), a hold span per lease, an Unlock
// span per Release, and the same metrics, hand-offs included.
func TestTelemetrySemaphore(t *testing.T) {
	db := freshDatabase(t)
	c := newClient(t, db)
	r := newRecorded(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := NewSemaphore(c, "tel/sem", 1, append(r.opts, WithOwner("a"))...)
	require.NoError(t, err)
	b, err := NewSemaphore(c, "tel/sem", 1, append(r.opts, WithOwner("b"))...)
	require.NoError(t, err)
	lease, err := a.Acquire(ctx, 1)
	require.NoError(t, err)
	_, err = b.TryAcquire(ctx, 1)
	require.ErrorIs(t, err, ErrHeld)
	got := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, 1)
		got <- err
	}()
	waitQueued(t, c, "tel/sem", 2)
	require.NoError(t, a.Release(ctx))
	require.NoError(t, <-got)
	require.NoError(t, b.Release(ctx))

	acq := r.spansNamed("spanmutex.acquire")
	require.Len(t, acq, 3)
	assert.Equal(t, "acquired", acq[0]["spanmutex.outcome"])
	assert.Equal(t, fmt.Sprint(lease.Token()), acq[0]["spanmutex.token"])
	assert.Equal(t, "tryacquire", acq[1]["spanmutex.kind"])
	assert.Equal(t, "held", acq[1]["spanmutex.outcome"])
	assert.Equal(t, "yes", acq[2]["event:hand-off"], "b was granted by a's Release")
	assert.Len(t, r.spansNamed("spanmutex.hold"), 2)
	assert.Len(t, r.spansNamed("spanmutex.Unlock"), 2)
	m := r.sums(t)
	assert.Equal(t, int64(2), m["spanmutex.acquisitions"]["spanmutex.kind=acquire,spanmutex.outcome=acquired,"])
	assert.Equal(t, int64(1), sum(m["spanmutex.handoffs"]))
}

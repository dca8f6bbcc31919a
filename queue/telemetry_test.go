package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/spanmutex/spanmutex"
)

// With providers of the OpenTelemetry SDK, a worker's claims and jobs are
// spans with the resource, token, kind and status, jobs are counted by kind
// and status with their duration, and a pass records how many pending
// requests it scanned; the resource locks' spans go to the same provider.
func TestQueueTelemetry(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	c := newClient(t, freshDatabase(t))
	q, err := New(c, WithLockOptions(spanmutex.WithLease(testLease)), WithTracerProvider(tp), WithMeterProvider(mp))
	require.NoError(t, err)
	failing := errors.New("the sheet service said no")
	w, err := q.NewWorker(func(_ context.Context, j *Job) error {
		if j.Kind == KindUpdate {
			return failing
		}
		return nil
	})
	require.NoError(t, err)
	runWorker(t, w)
	ids := enqueue(t, q, Request{Kind: KindCreate, Resource: "sheet-1"})
	waitFinished(t, q, 30*time.Second, ids...)
	ids = enqueue(t, q, Request{Kind: KindUpdate, Resource: "sheet-1"})
	waitFinished(t, q, 30*time.Second, ids...)

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	require.Len(t, byName["queue.job"], 2, "a create and an update")
	statuses := map[string]string{}
	for _, s := range byName["queue.job"] {
		attrs := attributes(s.Attributes())
		assert.Equal(t, "sheet-1", attrs["queue.resource"])
		assert.NotEmpty(t, attrs["queue.token"])
		statuses[attrs["queue.kind"]] = attrs["queue.status"]
	}
	assert.Equal(t, map[string]string{"create": "complete", "update": "error"}, statuses)
	assert.NotEmpty(t, byName["queue.claim"])
	assert.NotEmpty(t, byName["spanmutex.acquire"], "the resource locks' spans go to the queue's provider")

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
			if m.Name == "queue.jobs" {
				var total int64
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					total += p.Value
				}
				assert.Equal(t, int64(2), total)
			}
		}
	}
	for _, name := range []string{"queue.jobs", "queue.job.duration", "queue.claim.age", "queue.pending", "spanmutex.acquisitions"} {
		assert.True(t, seen[name], "metric %s", name)
	}
}

// attributes returns attrs as strings by key.
func attributes(attrs []attribute.KeyValue) map[string]string {
	out := map[string]string{}
	for _, a := range attrs {
		out[string(a.Key)] = a.Value.Emit()
	}
	return out
}

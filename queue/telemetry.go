package queue

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/spanmutex/spanmutex"
)

// instrumentationName names the tracer and meter of package queue.
const instrumentationName = "github.com/spanmutex/spanmutex/queue"

const (
	attrResource = attribute.Key("queue.resource")
	attrKind     = attribute.Key("queue.kind")
	attrRequests = attribute.Key("queue.requests")
	attrToken    = attribute.Key("queue.token")
	attrStatus   = attribute.Key("queue.status")
)

// WithTracerProvider sets where the queue's spans go (default: the global
// provider, which drops them unless the application installs an SDK):
// queue.claim (a worker's claim of a resource's requests, with
// queue.resource, queue.token and queue.requests) and queue.job (a handler
// run, with queue.kind and queue.status). The resource locks' spans
// (spanmutex.acquire, spanmutex.Unlock) go there too.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		c.tracerProvider = tp
		c.lockOpts = append(c.lockOpts, spanmutex.WithTracerProvider(tp))
	}
}

// WithMeterProvider sets where the queue's metrics go (default: the global
// provider): queue.jobs (counter, by kind and status), queue.job.duration
// (histogram, seconds: a handler run), queue.claim.age (histogram, seconds:
// how long a claimed request had been pending) and queue.pending (gauge:
// the pending requests a worker's last pass scanned). The resource locks'
// metrics go there too.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		c.meterProvider = mp
		c.lockOpts = append(c.lockOpts, spanmutex.WithMeterProvider(mp))
	}
}

// telemetry holds a Queue's tracer and instruments; those of a no-op
// provider do nothing.
type telemetry struct {
	tracer   trace.Tracer
	jobs     metric.Int64Counter
	duration metric.Float64Histogram
	age      metric.Float64Histogram
	pending  metric.Int64Gauge
}

// newTelemetry makes the instruments of a Queue.
func newTelemetry(c *config) (*telemetry, error) {
	tp, mp := c.tracerProvider, c.meterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	t := &telemetry{tracer: tp.Tracer(instrumentationName)}
	var errs [4]error
	t.jobs, errs[0] = m.Int64Counter("queue.jobs", metric.WithDescription("jobs handled, by kind and status"))
	t.duration, errs[1] = m.Float64Histogram("queue.job.duration", metric.WithDescription("handler run"), metric.WithUnit("s"))
	t.age, errs[2] = m.Float64Histogram("queue.claim.age", metric.WithDescription("how long a claimed request had been pending"), metric.WithUnit("s"))
	t.pending, errs[3] = m.Int64Gauge("queue.pending", metric.WithDescription("pending requests a worker's last pass scanned"))
	return t, errors.Join(errs[:]...)
}

// startClaim starts the span of a claim step on resource.
func (t *telemetry) startClaim(ctx context.Context, resource string, token int64) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, "queue.claim", trace.WithAttributes(attrResource.String(resource), attrToken.Int64(token)))
}

// claimed ends a claim span, recording what was claimed and how long each
// claimed request had been pending (the local clock against the commit
// timestamp: a measure, never a decision).
func (t *telemetry) claimed(ctx context.Context, span trace.Span, reqs []Request, err error) {
	span.SetAttributes(attrRequests.Int(len(reqs)))
	now := time.Now()
	for _, r := range reqs {
		if !r.CreatedAt.IsZero() {
			t.age.Record(ctx, now.Sub(r.CreatedAt).Seconds())
		}
	}
	endSpan(span, err)
}

// startJob starts the span of a handler run of job.
func (t *telemetry) startJob(ctx context.Context, job *Job) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, "queue.job", trace.WithAttributes(attrResource.String(job.Resource),
		attrKind.String(string(job.Kind)), attrToken.Int64(job.Token()), attrRequests.Int(len(job.Requests))))
}

// jobEnded records a handler run that took took and ended in status.
func (t *telemetry) jobEnded(ctx context.Context, span trace.Span, job *Job, took time.Duration, status Status, err error) {
	attrs := metric.WithAttributes(attrKind.String(string(job.Kind)), attrStatus.String(string(status)))
	t.jobs.Add(ctx, 1, attrs)
	t.duration.Record(ctx, took.Seconds(), attrs)
	span.SetAttributes(attrStatus.String(string(status)))
	endSpan(span, err)
}

// endSpan ends span, marking it failed with err if err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

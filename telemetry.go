package spanmutex

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names the tracer and meter of this package.
const instrumentationName = "github.com/spanmutex/spanmutex"

// The attribute keys of spans and metrics.
const (
	attrName    = attribute.Key("spanmutex.name")
	attrToken   = attribute.Key("spanmutex.token")
	attrOwner   = attribute.Key("spanmutex.owner")
	attrOutcome = attribute.Key("spanmutex.outcome")
	attrKind    = attribute.Key("spanmutex.kind") // run, lock, trylock
)

// WithTracerProvider sets where spans go (default: otel.GetTracerProvider(),
// the global provider, which drops them unless the application installs an
// SDK). Spans: spanmutex.Run, spanmutex.acquire (the wait, for Run, Lock
// and TryLock), spanmutex.section (the held section of Run),
// spanmutex.Unlock, with the attributes spanmutex.name, spanmutex.token,
// spanmutex.owner and spanmutex.outcome; events on them mark takeovers,
// hand-offs, failed renewals and a lost lease.
func WithTracerProvider(tp trace.TracerProvider) LeaseOption {
	return leaseOption(func(c *config) { c.tracerProvider = tp; c.tracerSet = true })
}

// WithMeterProvider sets where metrics go (default: otel.GetMeterProvider(),
// the global provider, which drops them unless the application installs an
// SDK). Instruments: spanmutex.acquisitions (counter, by kind and outcome),
// spanmutex.wait and spanmutex.hold (histograms, seconds),
// spanmutex.leases_lost, spanmutex.takeovers, spanmutex.handoffs,
// spanmutex.renewals_failed and spanmutex.section.attempts (counters).
func WithMeterProvider(mp metric.MeterProvider) LeaseOption {
	return leaseOption(func(c *config) { c.meterProvider = mp; c.meterSet = true })
}

// telemetry holds a Mutex's or Lock's tracer and instruments. The
// instruments of a no-op provider do nothing, so nothing is checked on the
// hot path.
type telemetry struct {
	tracer                                                  trace.Tracer
	acquisitions, leasesLost, takeovers, handoffs, renewals metric.Int64Counter
	attempts                                                metric.Int64Counter
	wait, hold                                              metric.Float64Histogram
	name, owner                                             attribute.KeyValue
}

// newTelemetry makes the instruments of one Mutex or Lock.
func newTelemetry(c *config, name string) (*telemetry, error) {
	tp, mp := c.tracerProvider, c.meterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(instrumentationName)
	t := &telemetry{tracer: tp.Tracer(instrumentationName), name: attrName.String(name), owner: attrOwner.String(c.owner)}
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		ctr, err := meter.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return ctr
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"))
		errs = append(errs, err)
		return h
	}
	t.acquisitions = counter("spanmutex.acquisitions", "Run, Lock and TryLock calls, by kind and outcome")
	t.leasesLost = counter("spanmutex.leases_lost", "leases lost while held")
	t.takeovers = counter("spanmutex.takeovers", "acquisitions that took over a holder silent past its lease")
	t.handoffs = counter("spanmutex.handoffs", "Lock acquisitions handed over by an Unlock")
	t.renewals = counter("spanmutex.renewals_failed", "lease renewals that failed and were retried")
	t.attempts = counter("spanmutex.section.attempts", "starts of a run-once section, by outcome")
	t.wait = histogram("spanmutex.wait", "time from a Run, Lock or TryLock call to its lease, or to its giving up")
	t.hold = histogram("spanmutex.hold", "time a lease was held: the section of Run, or Lock to Unlock")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// op is one timed operation: a span and when it began.
type op struct {
	t     *telemetry
	ctx   context.Context
	span  trace.Span
	began time.Time
	kind  attribute.KeyValue
}

// start begins the span called spanName for an operation of kind (run,
// lock, trylock, unlock, section).
//
// A nil *telemetry (a config not made by New or NewLock, in unit tests)
// records nothing.
func (t *telemetry) start(ctx context.Context, spanName, kind string, attrs ...attribute.KeyValue) (context.Context, op) {
	if t == nil {
		return ctx, op{}
	}
	k := attrKind.String(kind)
	ctx, span := t.tracer.Start(ctx, spanName, trace.WithAttributes(append(attrs, t.name, t.owner, k)...))
	return ctx, op{t: t, ctx: ctx, span: span, began: time.Now(), kind: k}
}

// errOutcome names how an acquisition that returned err ended, for the
// outcome attribute (Run's own outcomes: runOutcome, mutex_telemetry.go).
func errOutcome(err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, ErrHeld):
		return "held"
	case errors.Is(err, ErrUnreachable):
		return "unreachable"
	case errors.Is(err, ErrNotObtained):
		return "not_obtained"
	case errors.Is(err, ErrOutage):
		return "outage"
	case errors.Is(err, ErrAttemptsExhausted):
		return "exhausted"
	case errors.Is(err, ErrSchema), errors.Is(err, ErrNotFound):
		return "schema"
	}
	return "error"
}

// acquired ends an acquisition (the wait of Run, Lock or TryLock) that
// ended as outcome names: lease is nil unless it was obtained.
func (o op) acquired(lease *Lease, outcome string, err error) {
	if o.t == nil {
		return
	}
	set := attribute.NewSet(o.kind, attrOutcome.String(outcome))
	o.t.acquisitions.Add(o.ctx, 1, metric.WithAttributeSet(set))
	o.t.wait.Record(o.ctx, time.Since(o.began).Seconds(), metric.WithAttributeSet(set))
	o.span.SetAttributes(attrOutcome.String(outcome))
	if lease != nil {
		o.span.SetAttributes(attrToken.Int64(lease.token))
		if lease.takeover {
			o.t.takeovers.Add(o.ctx, 1, metric.WithAttributeSet(attribute.NewSet(o.kind)))
			o.span.AddEvent("takeover")
		}
		if lease.handedOff {
			o.t.handoffs.Add(o.ctx, 1)
			o.span.AddEvent("hand-off")
		}
	}
	o.endSpan(err)
}

// granted ends a Lock or TryLock call's acquisition (or a Semaphore's):
// lease is nil unless it was obtained.
func (o op) granted(lease *Lease, err error) { o.acquired(lease, errOutcome(err), err) }

// held ends the hold of lease, which began when lease was acquired (for
// Run's section, when the section started), with err, how it ended.
func (o op) held(lease *Lease, outcome string, err error) {
	if o.t == nil {
		return // no hold was started
	}
	set := attribute.NewSet(o.kind, attrOutcome.String(outcome))
	o.t.hold.Record(o.ctx, time.Since(o.began).Seconds(), metric.WithAttributeSet(set))
	if o.kind == attrKind.String("run") {
		o.t.attempts.Add(o.ctx, 1, metric.WithAttributeSet(set))
	}
	o.span.SetAttributes(attrToken.Int64(lease.token), attrOutcome.String(outcome))
	o.endSpan(err)
}

// unlocked ends the span of an Unlock call.
func (o op) unlocked(err error) {
	if o.t == nil {
		return
	}
	o.span.SetAttributes(attrOutcome.String(unlockOutcome(err)))
	o.endSpan(err)
}

// unlockOutcome names how an Unlock ended.
func unlockOutcome(err error) string {
	switch {
	case err == nil:
		return "released"
	case errors.Is(err, ErrLeaseLost):
		return "lease_lost"
	}
	return "error"
}

// lockKind is the kind attribute of a Lock (wait) or TryLock call.
func lockKind(wait bool) string {
	if wait {
		return "lock"
	}
	return "trylock"
}

// endSpan ends the span, marking it an error if err is one.
func (o op) endSpan(err error) {
	if err != nil {
		o.span.RecordError(err)
		o.span.SetStatus(codes.Error, err.Error())
	}
	o.span.End()
}

// lost wraps onLost, the reaction to a lost lease, to count it and mark it
// on the span of ctx's operation.
func (t *telemetry) lost(lease *Lease, onLost func(error)) func(error) {
	if t == nil {
		return onLost
	}
	return func(err error) {
		t.leasesLost.Add(context.Background(), 1)
		if s := lease.holdOp().span; s != nil {
			s.AddEvent("lease lost", trace.WithAttributes(attribute.String("error", err.Error())))
		}
		onLost(err)
	}
}

// renewFailed counts a failed renewal of lease and marks it on its span.
func (t *telemetry) renewFailed(lease *Lease, err error) {
	if t == nil {
		return
	}
	t.renewals.Add(context.Background(), 1)
	if s := lease.holdOp().span; s != nil {
		s.AddEvent("renewal failed", trace.WithAttributes(attribute.String("error", err.Error())))
	}
}

// Package defaults holds the defaults of spanmutex's options, once for the
// library and the commands built on it. The library's godoc states each.
package defaults

import "time"

const (
	// Lease is the lease a holder declares: how long it may go without
	// renewing before another contender may take over. Holders renew
	// every third of it, so it bounds how long a crashed holder blocks
	// others, not how long a section may take.
	Lease = 30 * time.Second
	// MaxAttempts is how many times a section may be started (across all
	// processes) before it is given up as FAILED.
	MaxAttempts = 3
	// MaxFailures is how many Spanner calls of one kind may fail in a row,
	// each retried after a backoff, before a call gives up.
	MaxFailures = 3
	// Jitter is the fraction of the lease, drawn at random per call, that
	// a contender waits past the lease before a takeover.
	Jitter = 0.2
	// InitialBackOff and MaxBackOff bound the waits between retries of a
	// failed Spanner call, and a Mutex's waits between reads.
	InitialBackOff = 100 * time.Millisecond
	MaxBackOff     = 2 * time.Second
	// FinishTimeout bounds how long a write that must not be lost keeps
	// trying after its ctx was cancelled.
	FinishTimeout = 30 * time.Second
	// MinLease is the shortest lease accepted: a lease is renewed every
	// third of it, and a renewal is a Spanner commit, which takes
	// milliseconds to tens of milliseconds; a shorter lease would lapse
	// between renewals.
	MinLease = 100 * time.Millisecond
	// MinRenewInterval is the shortest renewal interval accepted: a lease
	// found ours is granted only if its last renewal was sent less than
	// an interval ago, so an interval shorter than a commit's round trip
	// could never grant one.
	MinRenewInterval = 10 * time.Millisecond
	// MaxLease is the longest lease accepted. A holder that dies holding a
	// section or lock blocks it for as long as the lease it declared, so
	// the lease bounds that harm; renewals keep a long section alive, so
	// the lease need only cover the longest pause a live holder should
	// survive (GC, a stalled network, an overloaded Spanner). An hour is
	// far above any such pause; an operator breaks a dead holder's lease
	// sooner with Mutex.ForceReset ("spanmutex reset --force NAME").
	MaxLease = time.Hour
)

// Package lockbench is the benchmark of issue 10: spanmutex's Lock,
// etcd's concurrency.Mutex (client v3.5 on the etcd 3.4 server Debian
// installs) and internal/bench's naive Spanner lock, with their contenders
// in separate OS processes, side by side in one run.
//
// A run is one lock at one shape PxG: P processes, each of G goroutines
// that loop Lock → hold → Unlock for the window. Every run gets a fresh
// backend: a fresh emulator process (and so a fresh database) for the
// Spanner locks, a fresh etcd server with a fresh data directory for etcd.
// Within a process the G spanmutex Locks share one Scope; processes are
// separate Scopes by construction. The contender processes are this same
// binary started again with ChildEnv set (MaybeChild runs their part); the
// parent talks to them in lines on stdin/stdout (protocol.go) and each
// writes its Lock calls, timed with CLOCK_MONOTONIC (clock.go), to a JSON
// file that the parent merges (analyse.go).
//
// The package also times queue workers (package queue) as separate
// processes, one Worker each, draining requests enqueued beforehand.
package lockbench

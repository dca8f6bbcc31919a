//go:build go1.25

package spanmutex

import "sync"

// simLife is a simulated process's life, the same in every simulation
// (the Lock's, the Mutex's, the Semaphore's): it runs, is paused (SIGSTOP:
// its timers do not fire, its Spanner calls and datagrams wait) or has
// crashed (its calls fail and write nothing). Its mu also guards what the
// process that embeds it keeps beside it.
type simLife struct {
	mu       sync.Mutex
	paused   bool
	crashed  bool
	resume   chan struct{} // closed when a pause ends
	dead     chan struct{} // closed at the crash
	deferred []func()      // what waits for the pause to end
}

// newSimLife returns the life of a process that runs.
func newSimLife() simLife { return simLife{dead: make(chan struct{})} }

func (l *simLife) isCrashed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.crashed
}

// gate waits while the process is paused; it fails once it has crashed.
func (l *simLife) gate() error {
	_, err := l.gateWaited()
	return err
}

// gateWaited is gate, reporting also whether it waited.
func (l *simLife) gateWaited() (waited bool, err error) {
	for {
		l.mu.Lock()
		if l.crashed {
			l.mu.Unlock()
			return waited, errSimCrashed
		}
		if !l.paused {
			l.mu.Unlock()
			return waited, nil
		}
		ch := l.resume
		l.mu.Unlock()
		waited = true
		select {
		case <-ch:
		case <-l.dead:
		}
	}
}

// whenRunning runs fn now, or when the process resumes if it is paused.
func (l *simLife) whenRunning(fn func()) {
	l.mu.Lock()
	if l.paused && !l.crashed {
		l.deferred = append(l.deferred, fn)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	fn()
}

// stop pauses the process, unless it is paused or has crashed; it
// reports whether it did.
func (l *simLife) stop() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.paused || l.crashed {
		return false
	}
	l.paused, l.resume = true, make(chan struct{})
	return true
}

// cont ends a pause, and returns what waited for it (ok false if the
// process was not paused); the caller runs it.
func (l *simLife) cont() (fns []func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.paused {
		return nil, false
	}
	l.paused = false
	close(l.resume)
	fns, l.deferred = l.deferred, nil
	return fns, true
}

// end crashes the process, and returns what waited for a pause to end (ok
// false if it had crashed already); the caller runs it.
func (l *simLife) end() (fns []func(), ok bool) {
	l.mu.Lock()
	if l.crashed {
		l.mu.Unlock()
		return nil, false
	}
	l.crashed = true
	close(l.dead)
	wasPaused := l.paused
	l.paused = false
	fns, l.deferred = l.deferred, nil
	l.mu.Unlock()
	if wasPaused {
		close(l.resume)
	}
	return fns, true
}

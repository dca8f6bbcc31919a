//go:build go1.25

package spanmutex

// The simulations' scheduler: exact replay (doc/simulation.md, Replay).
// Goroutines made runnable at one virtual instant run in no fixed order,
// so every point where a goroutine of the harness wakes up (a timer of a
// process's clock fires, a Spanner request or answer lands, a datagram
// arrives, a pause ends, a ctx is cancelled, the chaos goroutines tick)
// takes a turn first: it registers under a stable key and waits. The
// scheduler waits until every other goroutine of the bubble is durably
// blocked (synctest.Wait), then lets the pending turns go one at a time,
// in an order drawn from the seed over their keys (never their arrival),
// waiting again after each. So at every instant the goroutines of the
// bubble act one after the other, in the seed's order.

import (
	"hash/fnv"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"
)

// simSched orders the turns of one schedule's goroutines; nil lets every
// turn go at once (the scripted schedules).
type simSched struct {
	seed    uint64
	mu      sync.Mutex
	pending []*simTurn
	off     bool          // stopped: turns go at once
	kick    chan struct{} // a turn is pending (buffered)
	done    chan struct{} // closed by stop
	turns   int           // turns let go, under mu
	ties    int           // turns whose key another pending turn had, under mu
	current atomic.Int64  // the number of the turn let go last
}

// simTurn is one goroutine waiting for its turn.
type simTurn struct {
	rank uint64
	go_  chan struct{}
}

// newSimSched starts the scheduler of a schedule of seed; call it in the
// bubble, and stop it before the bubble ends.
func newSimSched(seed uint64) *simSched {
	s := &simSched{seed: seed, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// simKey is a turn's key: who waits (a process, "chaos", "sim"), for
// what (a Spanner call's op, "timer", ...), and numbers the goroutine
// knew before it blocked (the virtual time it blocked at, a duration, a
// counter), so that no two goroutines that may wait at one instant have
// one key.
type simKey struct {
	who, what string
	a, b      int64
}

// rank is k's place, drawn from the seed.
func (s *simSched) rank(k simKey) uint64 {
	f := fnv.New64a()
	var b [8]byte
	put := func(x uint64) {
		for i := range b {
			b[i] = byte(x >> (8 * i))
		}
		f.Write(b[:])
	}
	put(s.seed)
	f.Write([]byte(k.who))
	f.Write([]byte{0})
	f.Write([]byte(k.what))
	f.Write([]byte{0})
	put(uint64(k.a))
	put(uint64(k.b))
	return mix64(f.Sum64())
}

// mix64 is splitmix64's finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// turn waits for the goroutine's turn under key k.
func (s *simSched) turn(k simKey) {
	if s == nil {
		return
	}
	t := &simTurn{rank: s.rank(k), go_: make(chan struct{})}
	s.mu.Lock()
	if s.off {
		s.mu.Unlock()
		return
	}
	s.pending = append(s.pending, t)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	<-t.go_
}

// run lets the turns go, one at a time, once every other goroutine of the
// bubble is blocked.
func (s *simSched) run() {
	for {
		select {
		case <-s.kick:
		case <-s.done:
			return
		}
		for {
			synctest.Wait()
			s.mu.Lock()
			if len(s.pending) == 0 || s.off {
				s.mu.Unlock()
				break
			}
			best := 0
			for i, t := range s.pending[1:] {
				if t.rank < s.pending[best].rank {
					best = i + 1
				}
			}
			t := s.pending[best]
			for i, u := range s.pending {
				if i != best && u.rank == t.rank {
					s.ties++
					break
				}
			}
			s.pending = append(s.pending[:best], s.pending[best+1:]...)
			s.turns++
			s.current.Store(int64(s.turns))
			s.mu.Unlock()
			close(t.go_)
		}
	}
}

// stop lets every pending and later turn go at once, and ends the
// scheduler.
func (s *simSched) stop() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.off {
		s.mu.Unlock()
		return
	}
	s.off = true
	for _, t := range s.pending {
		close(t.go_)
	}
	s.pending = nil
	s.mu.Unlock()
	close(s.done)
}

// counts returns how many turns went, and how many tied.
func (s *simSched) counts() (turns, ties int) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns, s.ties
}

// turnNow is the number of the turn under way (0 before the first and
// without a scheduler): what a traced event is stamped with.
func (s *simSched) turnNow() int64 {
	if s == nil {
		return 0
	}
	return s.current.Load()
}

// simNow is the virtual time as a key's number.
func simNow() int64 { return time.Now().UnixNano() }

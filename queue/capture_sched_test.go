//go:build go1.25

package queue

// The capture simulation's scheduler: exact replay, as the root package's
// simSched (sim_sched_test.go, doc/simulation.md, Replay), which this
// package cannot import. Every point where a goroutine of the simulation
// wakes (a store call begins, a pause ends, a query's record commits, the
// driver's steps) takes a turn: it registers under a stable key and
// waits; the scheduler waits until every other goroutine of the bubble is
// durably blocked (synctest.Wait), then lets the pending turn whose key
// ranks first for the seed go, and waits again.

import (
	"hash/fnv"
	"sync"
	"testing/synctest"
)

// capKey is a turn's key: who waits, for what, and the instant (ns).
type capKey struct {
	who, what string
	at        int64
}

// capSched orders the turns of one schedule; nil lets every turn go at
// once.
type capSched struct {
	seed    uint64
	mu      sync.Mutex
	pending []capTurn
	off     bool
	kick    chan struct{}
	done    chan struct{}
	turns   int
	ties    int
}

type capTurn struct {
	rank uint64
	go_  chan struct{}
}

// newCapSched starts the scheduler of seed's schedule; call it in the
// bubble and stop it before the bubble ends.
func newCapSched(seed uint64) *capSched {
	s := &capSched{seed: seed, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *capSched) rank(k capKey) uint64 {
	f := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(s.seed >> (8 * i))
	}
	f.Write(b[:])
	f.Write([]byte(k.who))
	f.Write([]byte{0})
	f.Write([]byte(k.what))
	f.Write([]byte{0})
	for i := range b {
		b[i] = byte(uint64(k.at) >> (8 * i))
	}
	f.Write(b[:])
	x := f.Sum64() // splitmix64's finaliser
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// turn waits for the calling goroutine's turn under k.
func (s *capSched) turn(k capKey) {
	if s == nil {
		return
	}
	t := capTurn{rank: s.rank(k), go_: make(chan struct{})}
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

func (s *capSched) run() {
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
			for i, t := range s.pending {
				if t.rank < s.pending[best].rank {
					best = i
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
			s.mu.Unlock()
			close(t.go_)
		}
	}
}

// stop lets every pending and later turn go at once, and ends the
// scheduler.
func (s *capSched) stop() {
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

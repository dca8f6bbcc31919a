package spanmutex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Wake-ups across processes. A Scope made with ListenScope listens for UDP
// datagrams, and its waiters write its address into their queue entries
// (WakeAddr). An Unlock (or a leave) that hands the lock to such a waiter
// sends it, after its commit was acknowledged, one datagram that names the
// waiter's id and the commit's timestamp. The datagram only wakes the waiter
// early: the waiter then reads the row as of that timestamp (an
// exact-timestamp read, which waits for no transaction in flight) and, if
// that does not show the lock its own, reads it again as after a timed poll;
// it decides only on what a read shows. A lost, late, duplicated or forged
// datagram costs at most two reads; it can never grant the lock. Polling
// stays as the fallback.

// wakeMagic starts every wake-up datagram; the waiter's id follows, then
// optionally a space and the hand-off's commit timestamp in Unix
// nanoseconds.
const wakeMagic = "spanmutex-wake/1 "

// maxWakeDatagram bounds a wake-up datagram: the magic, a 36-character id, a
// space and a timestamp of up to 20 digits.
const maxWakeDatagram = len(wakeMagic) + 36 + 1 + 20

// wakeDatagram is the datagram that wakes waiter id; at, if not zero, is the
// commit timestamp of the transaction that handed it the lock.
func wakeDatagram(id string, at time.Time) []byte {
	msg := wakeMagic + id
	if !at.IsZero() {
		msg += " " + strconv.FormatInt(at.UnixNano(), 10)
	}
	return []byte(msg)
}

// parseWake reads a wake-up datagram: the waiter's id and the commit
// timestamp it names (zero if none). ok is false for anything else.
func parseWake(b []byte) (id string, at time.Time, ok bool) {
	if len(b) > maxWakeDatagram || !bytes.HasPrefix(b, []byte(wakeMagic)) {
		return "", time.Time{}, false
	}
	id, ts, hasTS := strings.Cut(string(b[len(wakeMagic):]), " ")
	if id == "" {
		return "", time.Time{}, false
	}
	if hasTS {
		ns, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ns <= 0 {
			return "", time.Time{}, false
		}
		at = time.Unix(0, ns).UTC()
	}
	return id, at, true
}

// wakeRate bounds how many datagrams a Scope's listener acts on per second;
// the rest are dropped (their waiters poll).
const wakeRate = 2000

// listener is a Scope's UDP listener for wake-ups.
type listener struct {
	conn      *net.UDPConn
	advertise string
	done      chan struct{}
	closeOnce sync.Once
	// simSend, set only by the simulation (sim_*_test.go) instead of conn,
	// takes the Scope's outgoing datagrams; the simulation delivers
	// incoming ones with receive.
	simSend func(addr string, msg []byte)
}

// ListenScope returns a Scope (see Scope) that also listens on the UDP
// address addr (for example "127.0.0.1:0", or ":7946" with advertise set)
// for wake-ups from Unlocks in other processes, so that its waiters learn of
// a hand-off at once instead of at their next poll. Its waiters advertise
// advertise in their queue entries, or, if advertise is "", the address the
// listener got (which must then not be an unspecified address such as
// 0.0.0.0). The address is readable by everyone who can read the queue
// table; a datagram can only make a waiter read the lock early. Close stops
// the listener.
func ListenScope(addr, advertise string) (*Scope, error) {
	udp, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: ListenScope(%q): %v; give host:port, for example 127.0.0.1:0", ErrInvalidConfig, addr, err)
	}
	conn, err := net.ListenUDP("udp", udp)
	if err != nil {
		return nil, fmt.Errorf("spanmutex: ListenScope: cannot listen on %s: %w; pick another address or port", addr, err)
	}
	if advertise == "" {
		local := conn.LocalAddr().(*net.UDPAddr)
		if local.IP.IsUnspecified() {
			conn.Close()
			return nil, fmt.Errorf("%w: ListenScope(%q): listening on every interface, so give the address others reach this process at as advertise", ErrInvalidConfig, addr)
		}
		advertise = local.String()
	}
	if len(advertise) > maxWakeAddr {
		conn.Close()
		return nil, fmt.Errorf("%w: ListenScope: advertised address %q is longer than %d characters", ErrInvalidConfig, advertise, maxWakeAddr)
	}
	s := NewScope()
	s.listener = &listener{conn: conn, advertise: advertise, done: make(chan struct{})}
	go s.serve()
	return s, nil
}

// maxWakeAddr is the width of the WakeAddr column.
const maxWakeAddr = 64

// Addr returns the address this Scope's waiters advertise for wake-ups, or
// "" if it does not listen.
func (s *Scope) Addr() string {
	if s.listener == nil {
		return ""
	}
	return s.listener.advertise
}

// Close stops the Scope's listener, if it has one, and waits for it to
// stop. The Scope's Locks go on working; their waiters poll.
func (s *Scope) Close() error {
	if s.listener == nil {
		return nil
	}
	var err error
	s.listener.closeOnce.Do(func() {
		if s.listener.conn == nil { // the simulation's
			return
		}
		err = s.listener.conn.Close()
		<-s.listener.done
	})
	return err
}

// serve reads wake-up datagrams until the listener is closed, and wakes the
// waiters they name, at most wakeRate a second.
func (s *Scope) serve() {
	defer close(s.listener.done)
	buf := make([]byte, maxWakeDatagram+1)
	window, acted := time.Now(), 0
	for {
		n, _, err := s.listener.conn.ReadFromUDP(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		s.receive(buf[:n], func() bool {
			if now := time.Now(); now.Sub(window) >= time.Second {
				window, acted = now, 0
			}
			acted++
			return acted <= wakeRate
		})
	}
}

// receive acts on one wake-up datagram b: if it is well formed and admit
// (the rate limit) lets it through, it wakes the waiter it names. The
// simulation (sim_*_test.go) delivers its datagrams here.
func (s *Scope) receive(b []byte, admit func() bool) {
	id, at, ok := parseWake(b)
	if !ok || !admit() {
		return
	}
	// No local send time: this process cannot know when the remote
	// Unlock's transaction was sent, so the wake-up anchors nothing; and no
	// token: only a read grants the lock.
	if s.wakes.wake(id, wakeUp{remoteAt: at}) {
		s.received.Add(1)
	}
}

// sendWake tells the waiter id, whose Scope listens at addr, that it was
// handed the lock by a transaction committed at at (zero: a run-once
// section ended). It never blocks for long and reports nothing: the waiter
// polls if the datagram is lost.
func (s *Scope) sendWake(ctx context.Context, addr, id string, at time.Time) {
	msg := wakeDatagram(id, at)
	if len(msg) > maxWakeDatagram {
		return
	}
	if s.listener != nil && s.listener.simSend != nil {
		s.listener.simSend(addr, msg)
		s.sent.Add(1)
		return
	}
	if s.listener != nil {
		if udp, err := net.ResolveUDPAddr("udp", addr); err == nil {
			if _, err := s.listener.conn.WriteToUDP(msg, udp); err == nil {
				s.sent.Add(1)
			}
		}
		return
	}
	d := net.Dialer{Timeout: 100 * time.Millisecond}
	conn, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := conn.Write(msg); err == nil {
		s.sent.Add(1)
	}
}

package spanmutex

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"time"
)

// Wake-ups across processes. A Scope listens for UDP datagrams (see
// scope_listen.go), and its waiters write its address into their queue
// entries (WakeAddr). An Unlock (or a leave) that hands the lock to such a
// waiter sends it, after its commit was acknowledged, one datagram that
// names the waiter's id and the commit's timestamp. The datagram only wakes
// the waiter early: the waiter then reads the row strongly (confirmRemote)
// and decides only on what that read shows. A lost, late, duplicated or
// forged datagram costs at most one read; it can never grant the lock.
// Polling stays as the fallback.

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
	if l := s.listening.Load(); l != nil && l.simSend != nil {
		l.simSend(addr, msg)
		s.sent.Add(1)
		return
	} else if l != nil {
		if udp, err := net.ResolveUDPAddr("udp", addr); err == nil {
			if _, err := l.conn.WriteToUDP(msg, udp); err == nil {
				s.sent.Add(1)
				return
			}
		}
		// The listener may have just closed (idle): send from a socket of
		// our own instead.
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

package spanmutex

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// How a Scope listens for wake-ups from other processes. A Scope made by
// NewScope listens on demand: the first time one of its waiters queues, it
// opens a UDP socket on the host's own address (hostIP) and an ephemeral
// port, and it closes it once no waiter has needed it for idleListen. Where
// it cannot listen it says so once, in the log of the Lock or Mutex that
// asked, and its waiters poll. ListenScope listens at once, on an address
// the caller gives, until Close; NewScope(WithoutWakeUps()) never listens.

// idleListen is how long an on-demand listener stays open with no waiter of
// its Scope registered and no address handed out.
const idleListen = time.Minute

// retryListen is how long an on-demand Scope that could not listen waits
// before it tries again.
const retryListen = time.Minute

// listener is a Scope's UDP listener for wake-ups.
type listener struct {
	conn      *net.UDPConn
	advertise string
	done      chan struct{}
	closeOnce sync.Once
	// lastUsed is when (Unix nanoseconds) a waiter last took its address.
	lastUsed atomic.Int64
	// simSend, set only by the simulation (sim_*_test.go) instead of conn,
	// takes the Scope's outgoing datagrams; the simulation delivers
	// incoming ones with receive.
	simSend func(addr string, msg []byte)
}

// close closes the socket once and waits for serve to stop.
func (l *listener) close() error {
	var err error
	l.closeOnce.Do(func() {
		if l.conn == nil { // the simulation's
			return
		}
		err = l.conn.Close()
		<-l.done
	})
	return err
}

// A ScopeOption configures NewScope.
type ScopeOption func(*Scope)

// WithoutWakeUps makes a Scope that never listens for wake-ups: its
// waiters behind other processes poll. Use it where the processes cannot
// reach one another over UDP and the Spanner reads of polling are cheaper
// than a socket that nothing reaches.
func WithoutWakeUps() ScopeOption {
	return func(s *Scope) { s.onDemand = false }
}

// WithHeadPoll sets the longest a waiting call of the Scope sleeps between
// reads of a lock or semaphore held by another process, while it is next
// in line and its Scope does not listen for wake-ups (WithoutWakeUps, or
// a listener that could not start): it learns of the hand-off or grant at
// most about d after it. By default a Lock's waiter reads a quarter of the
// hold so far apart, up to 300ms (about 4 reads a second behind a long
// hold), and a Semaphore's doubles its interval up to a second. A shorter
// d trades reads for promptness (20ms, the least, costs up to 50 reads a
// second per waiting call), a longer one the other way; a quarter of the
// waiter's lease bounds it whatever d is. A Scope that listens is woken
// by the Unlock or Release and polls only as insurance: d does not apply.
func WithHeadPoll(d time.Duration) ScopeOption {
	return func(s *Scope) { s.headPoll = max(d, lockPollInterval) }
}

// headPollOr returns the Scope's WithHeadPoll, or def if it has none.
func (s *Scope) headPollOr(def time.Duration) time.Duration {
	if s == nil || s.headPoll == 0 {
		return def
	}
	return s.headPoll
}

// ListenScope returns a Scope (see Scope) that listens at once on the UDP
// address addr (for example "127.0.0.1:0", or ":7946" with advertise set)
// for wake-ups from Unlocks in other processes, instead of on the host's
// own address on demand as NewScope's does. Its waiters advertise advertise
// in their queue entries, or, if advertise is "", the address the listener
// got (which must then not be an unspecified address such as 0.0.0.0). The
// address is readable by everyone who can read the queue table; a datagram
// can only make a waiter read the lock early. Close stops the listener.
func ListenScope(addr, advertise string) (*Scope, error) {
	l, err := listenUDP(addr, advertise)
	if err != nil {
		return nil, err
	}
	s := NewScope(WithoutWakeUps())
	s.start(l)
	return s, nil
}

// listenUDP opens a listener on addr that advertises advertise (or the
// address it got, if advertise is "").
func listenUDP(addr, advertise string) (*listener, error) {
	udp, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: ListenScope(%q): %v; give host:port, for example 127.0.0.1:0", ErrInvalidConfig, addr, err)
	}
	conn, err := net.ListenUDP("udp", udp)
	if err != nil {
		return nil, fmt.Errorf("spanmutex: listen for wake-ups on %s: %w; pick another address or port", addr, err)
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
	return &listener{conn: conn, advertise: advertise, done: make(chan struct{})}, nil
}

// maxWakeAddr is the width of the WakeAddr column.
const maxWakeAddr = 64

// start makes l the Scope's listener and serves it.
func (s *Scope) start(l *listener) {
	l.lastUsed.Store(time.Now().UnixNano())
	s.listening.Store(l)
	go s.serve(l)
}

// Addr returns the address this Scope's waiters advertise for wake-ups, or
// "" if it does not listen (a NewScope Scope listens only while its waiters
// need it).
func (s *Scope) Addr() string {
	if l := s.listening.Load(); l != nil {
		return l.advertise
	}
	return ""
}

// wakeAddr returns the address a waiter of the Scope advertises in its
// queue entry, first starting an on-demand listener if the Scope has none;
// "" if the Scope does not listen. A Scope that cannot listen logs why in
// log, once, and its waiters poll.
func (s *Scope) wakeAddr(log *slog.Logger) string {
	if addr, ok := s.inUse(); ok || !s.onDemand {
		return addr
	}
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if addr, ok := s.inUse(); ok { // started meanwhile
		return addr
	}
	if s.closed || time.Now().Before(s.retryAt) {
		return ""
	}
	l, err := listenOnHost()
	if err != nil {
		s.retryAt = time.Now().Add(retryListen)
		if !s.warned {
			s.warned = true
			log.Warn("spanmutex: cannot listen for wake-ups from other processes; waiters poll (NewScope(WithoutWakeUps()) silences this, ListenScope sets the address)", "err", err)
		}
		return ""
	}
	s.start(l)
	return l.advertise
}

// inUse returns the current listener's address, marking it used now, and
// reports whether the Scope has a listener.
func (s *Scope) inUse() (string, bool) {
	l := s.listening.Load()
	if l == nil {
		return "", false
	}
	l.lastUsed.Store(time.Now().UnixNano())
	return l.advertise, true
}

// listenOnHost opens a listener on an ephemeral port of the host's own
// address.
func listenOnHost() (*listener, error) {
	ip, err := hostIP()
	if err != nil {
		return nil, err
	}
	return listenUDP(net.JoinHostPort(ip.String(), "0"), "")
}

// hostIP returns the address other hosts reach this one at, as
// memberlist-style libraries find it: the first private IPv4 address of an
// interface that is up and not loopback; else its first other global
// unicast address (IPv4 first); else, on a host whose only interface up is
// loopback (all its peers are then local), 127.0.0.1.
func hostIP() (net.IP, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	var private, global4, global6 net.IP
	onlyLoopback := true
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		onlyLoopback = false
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || !ipn.IP.IsGlobalUnicast() {
				continue
			}
			switch ip := ipn.IP; {
			case ip.To4() != nil && ip.IsPrivate() && private == nil:
				private = ip
			case ip.To4() != nil && global4 == nil:
				global4 = ip
			case ip.To4() == nil && global6 == nil:
				global6 = ip
			}
		}
	}
	for _, ip := range []net.IP{private, global4, global6} {
		if ip != nil {
			return ip, nil
		}
	}
	if onlyLoopback {
		return net.IPv4(127, 0, 0, 1), nil
	}
	return nil, errors.New("no interface that is up has a unicast address others could send to")
}

// Close stops the Scope's listener, if it has one, and waits for it to
// stop; the Scope listens no more. Its Locks go on working; their waiters
// poll.
func (s *Scope) Close() error {
	s.lmu.Lock()
	s.closed = true
	l := s.listening.Swap(nil)
	s.lmu.Unlock()
	if l == nil {
		return nil
	}
	return l.close()
}

// serve reads wake-up datagrams on l until l is closed, and wakes the
// waiters they name, at most wakeRate a second. An on-demand listener
// closes itself once idle (closeIdle).
func (s *Scope) serve(l *listener) {
	defer close(l.done)
	buf := make([]byte, maxWakeDatagram+1)
	window, acted := time.Now(), 0
	for {
		if s.onDemand {
			_ = l.conn.SetReadDeadline(time.Now().Add(s.idle))
		}
		n, _, err := l.conn.ReadFromUDP(buf)
		switch {
		case errors.Is(err, net.ErrClosed):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			if s.closeIdle(l) {
				return
			}
			continue
		case err != nil:
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

// closeIdle closes on-demand listener l, from its serve loop, if no waiter
// took its address for idleListen and none of the Scope's waiters is
// registered for a wake-up, and reports whether it did. The next waiter
// starts a new one.
func (s *Scope) closeIdle(l *listener) bool {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if time.Since(time.Unix(0, l.lastUsed.Load())) < s.idle || s.wakes.registered() > 0 {
		return false
	}
	s.listening.CompareAndSwap(l, nil)
	l.closeOnce.Do(func() { _ = l.conn.Close() }) // done closes as serve returns
	return true
}

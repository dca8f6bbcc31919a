package spanmutex

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ListenScope refuses addresses it cannot listen on or advertise, with
// errors that say what to give instead.
func TestListenScopeRejectsBadAddresses(t *testing.T) {
	for _, tc := range []struct{ addr, advertise, want string }{
		{"no-port", "", "give host:port"},
		{"0.0.0.0:0", "", "give the address others reach this process at"},
		{"127.0.0.1:0", strings.Repeat("h", 65), "longer than 64"},
	} {
		_, err := ListenScope(tc.addr, tc.advertise)
		require.Error(t, err, tc.addr)
		assert.ErrorContains(t, err, tc.want)
	}
	s, err := ListenScope("0.0.0.0:0", "10.0.0.7:7946")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.7:7946", s.Addr())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "closing twice is harmless")
	assert.Empty(t, NewScope().Addr(), "a NewScope Scope listens only once a waiter needs it")
	assert.NoError(t, NewScope().Close())
}

// A listening Scope wakes the waiter a datagram names, without a send time
// (it anchors nothing), and ignores datagrams of another form or for
// nobody it knows.
func TestListenScopeWakesTheNamedWaiter(t *testing.T) {
	s, err := ListenScope("127.0.0.1:0", "")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	id := NewScope().newWaiterID()
	ch, unregister := s.wakes.register(id)
	defer unregister()

	conn, err := net.Dial("udp", s.Addr())
	require.NoError(t, err)
	defer conn.Close()
	for _, junk := range []string{"hello", wakeMagic + "someone-else", wakeMagic + id + "-and-more-than-fits"} {
		_, err := conn.Write([]byte(junk))
		require.NoError(t, err)
	}
	sender := NewScope()
	handedAt := time.Date(2026, 11, 24, 5, 6, 7, 89, time.UTC)
	sender.sendWake(t.Context(), s.Addr(), id, handedAt)
	select {
	case at := <-ch:
		assert.Equal(t, wakeUp{remoteAt: handedAt}, at, "a wake-up from another process carries only the commit timestamp it names: no send time, no token")
	case <-time.After(10 * time.Second):
		t.Fatal("the wake-up did not arrive")
	}
	waitFor(t, 10*time.Second, "the receipt to be counted", func() bool { return s.wakeUps().received >= 1 })
	assert.Equal(t, int64(1), sender.wakeUps().sent)
	assert.Equal(t, int64(1), s.wakeUps().received, "junk and strangers are not counted")
}

// Wake-up datagrams round-trip with and without a commit timestamp, and
// anything else is refused.
func TestParseWake(t *testing.T) {
	id := NewScope().newWaiterID()
	at := time.Date(2026, 11, 24, 5, 6, 7, 89, time.UTC)
	for _, c := range []struct {
		msg    string
		id     string
		at     time.Time
		wantOK bool
	}{
		{string(wakeDatagram(id, at)), id, at, true},
		{string(wakeDatagram(id, time.Time{})), id, time.Time{}, true},
		{wakeMagic, "", time.Time{}, false},
		{wakeMagic + id + " soon", "", time.Time{}, false},
		{wakeMagic + id + " -5", "", time.Time{}, false},
		{wakeMagic + id + " 1" + strings.Repeat("0", 30), "", time.Time{}, false},
		{"spanmutex-wake/2 " + id, "", time.Time{}, false},
	} {
		gotID, gotAt, ok := parseWake([]byte(c.msg))
		assert.Equal(t, c.wantOK, ok, "%q", c.msg)
		assert.Equal(t, c.id, gotID, "%q", c.msg)
		assert.True(t, c.at.Equal(gotAt), "%q: at %v, want %v", c.msg, gotAt, c.at)
	}
}

// A NewScope Scope listens on demand: on the host's own address from the
// first time a waiter asks for it, until it has been idle with no waiter
// registered, and again when the next waiter asks; never after Close, nor
// when made WithoutWakeUps.
func TestNewScopeListensOnDemand(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	s := NewScope()
	s.idle = 100 * time.Millisecond
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	assert.Empty(t, s.Addr(), "no listener before a waiter needs one")

	id := s.newWaiterID()
	ch, unregister := s.wakes.register(id)
	addr := s.wakeAddr(log)
	require.NotEmpty(t, addr)
	ip, err := hostIP()
	require.NoError(t, err)
	host, _, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	assert.Equal(t, ip.String(), host, "it listens on the host's own address")
	assert.Equal(t, addr, s.Addr())

	NewScope(WithoutWakeUps()).sendWake(t.Context(), addr, id, time.Time{})
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the wake-up did not arrive")
	}
	assert.Equal(t, addr, s.Addr(), "a registered waiter keeps the listener open past its idle time")
	unregister()
	waitFor(t, 10*time.Second, "the idle listener to close", func() bool { return s.Addr() == "" })
	again := s.wakeAddr(log)
	assert.NotEmpty(t, again, "the next waiter starts a new listener")

	require.NoError(t, s.Close())
	assert.Empty(t, s.Addr())
	assert.Empty(t, s.wakeAddr(log), "a closed Scope listens no more")
	assert.Empty(t, NewScope(WithoutWakeUps()).wakeAddr(log))
}

// hostIP finds an address of an interface that is up, as others would
// reach this host at.
func TestHostIP(t *testing.T) {
	ip, err := hostIP()
	require.NoError(t, err)
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	var found bool
	for _, iface := range ifaces {
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(ip) && iface.Flags&net.FlagUp != 0 {
				found = true
			}
		}
	}
	assert.True(t, found, "hostIP %s is an address of an interface that is up", ip)
	assert.False(t, ip.IsUnspecified())
}

package spanmutex

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type tsHandler struct{ who string }

func (h tsHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h tsHandler) Handle(_ context.Context, r slog.Record) error {
	fmt.Fprintf(os.Stderr, "%s %s %s\n", r.Time.Format("15:04:05.000000"), h.who, r.Message)
	return nil
}
func (h tsHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h tsHandler) WithGroup(string) slog.Handler      { return h }

func TestZZProbeHandOff(t *testing.T) {
	needEmulator(t)
	db := freshDatabase(t)
	ctx := context.Background()
	var locks []*Lock
	for i := range 2 {
		l, err := NewLock(newClient(t, db), "probe", WithOwner(fmt.Sprint("p", i)), WithScope(NewScope()), WithLogger(slog.New(tsHandler{fmt.Sprint("p", i)})))
		require.NoError(t, err)
		locks = append(locks, l)
	}
	var unlockedAt [2]time.Time
	var hand []time.Duration
	done := make(chan struct{})
	for i, l := range locks {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 30 {
				_, err := l.Lock(ctx)
				require.NoError(t, err)
				got := time.Now()
				if !unlockedAt[1-i].IsZero() {
					hand = append(hand, got.Sub(unlockedAt[1-i]))
					fmt.Fprintf(os.Stderr, "%s p%d LOCK RETURNED after other's unlock returned %v\n", got.Format("15:04:05.000000"), i, got.Sub(unlockedAt[1-i]))
				}
				time.Sleep(10 * time.Millisecond)
				require.NoError(t, l.Unlock(ctx))
				unlockedAt[i] = time.Now()
				fmt.Fprintf(os.Stderr, "%s p%d UNLOCK RETURNED\n", unlockedAt[i].Format("15:04:05.000000"), i)
			}
		}()
	}
	<-done
	<-done
	sort.Slice(hand, func(a, b int) bool { return hand[a] < hand[b] })
	t.Logf("after unlock returned: p50 %v", hand[len(hand)/2])
}

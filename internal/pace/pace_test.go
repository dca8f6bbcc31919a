//go:build go1.25

package pace

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(context.Background(), time.Second); err != nil || time.Since(start) != time.Second {
			t.Fatalf("Sleep(1s) = %v after %v, want nil after 1s", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := Sleep(ctx, time.Hour); err != context.DeadlineExceeded || time.Since(start) != 2*time.Second {
			t.Fatalf("Sleep(1h) under a 1s deadline = %v after %v, want DeadlineExceeded after 1s", err, time.Since(start)-time.Second)
		}
	})
}

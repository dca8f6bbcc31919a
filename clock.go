package spanmutex

import "time"

// clock is the local clock. spanmutex uses it only to pace its waits between
// reads; no ownership decision ever reads it (those use Spanner's clock inside
// the deciding transaction). Tests inject a skewed or fast clock to show that.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

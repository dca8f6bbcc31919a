package spanmutex

import "time"

// clock is the local clock. spanmutex uses it only to pace its waits between
// reads; no ownership decision ever reads it (those use Spanner's clock inside
// the deciding transaction). Tests inject a skewed or fast clock to show that.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

// forkingClock is a clock that makes a copy of itself for another
// goroutine of the same process: the simulation's, whose timers are keyed
// by the goroutine they wake, so that two loops of one contender (its
// lease's renewals and its Scope's session) never tie.
type forkingClock interface {
	clock
	fork(who string) clock
}

// forClock returns c's copy for the goroutine who, or c.
func forClock(c clock, who string) clock {
	if f, ok := c.(forkingClock); ok {
		return f.fork(who)
	}
	return c
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

package leaserule

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDeclaredLeaseJudgesNotTheContendersOwn(t *testing.T) {
	assert.Equal(t, 10*time.Second, Declared(10*time.Second, time.Second), "a shorter own lease does not shorten the holder's")
	assert.Equal(t, 10*time.Second, Declared(10*time.Second, time.Minute), "a longer own lease does not lengthen it")
	assert.Equal(t, time.Minute, Declared(0, time.Minute), "a holder that declared none is judged by the contender's own")
}

func TestTakeoverAfterSaturates(t *testing.T) {
	assert.Equal(t, 3*time.Second, After(time.Second, 2*time.Second))
	huge := time.Duration(math.MaxInt64 - 10)
	assert.Equal(t, time.Duration(math.MaxInt64), After(huge, time.Hour), "no overflow into the past")
}

func TestLapsed(t *testing.T) {
	last := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.False(t, Lapsed(last.Add(9*time.Second), last, 10*time.Second, time.Second, 0), "within the declared lease")
	assert.True(t, Lapsed(last.Add(10*time.Second), last, 10*time.Second, time.Second, 0), "at the declared lease")
	assert.False(t, Lapsed(last.Add(11*time.Second), last, 10*time.Second, time.Second, 2*time.Second), "jitter waits longer")
	assert.True(t, Lapsed(last.Add(time.Second), last, 0, time.Second, 0), "no declaration: the own lease")
	assert.Equal(t, time.Duration(0), Silent(last.Add(-time.Hour), last))
}

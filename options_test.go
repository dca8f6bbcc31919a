package spanmutex

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every bad input to New is an error wrapping ErrInvalidConfig that names
// the problem; none panics.
func TestNewRejectsBadInput(t *testing.T) {
	client := &spanner.Client{} // never used: New does no I/O
	tests := []struct {
		name    string
		section string
		opts    []Option
		want    string
	}{
		{"empty name", "", nil, "name is empty"},
		{"oversized name", strings.Repeat("x", 257), nil, "257 characters long"},
		{"non-UTF-8 name", "bad\xffname", nil, "not valid UTF-8"},
		{"control character in name", "a\x00b", nil, "control character"},
		{"newline in name", "a\nb", nil, "control character"},
		{"name of spaces only", "   ", nil, "starts or ends with white space"},
		{"name with a leading space", " lead", nil, "starts or ends with white space"},
		{"name with a trailing space", "lead ", nil, "starts or ends with white space"},
		{"name with an inner space", "lead er", nil, ""},
		{"empty table", "s", []Option{WithTable("")}, "invalid table name"},
		{"table with a dash", "s", []Option{WithTable("my-table")}, "invalid table name"},
		{"table with SQL", "s", []Option{WithTable("T; DROP TABLE X")}, "invalid table name"},
		{"empty owner", "s", []Option{WithOwner("")}, ""}, // empty means default: valid
		{"oversized owner", "s", []Option{WithOwner(strings.Repeat("o", 300))}, "owner is 300 characters"},
		{"oversized version", "s", []Option{WithVersion(strings.Repeat("v", 300))}, "WithVersion: version is 300 characters"},
		{"version with a control character", "s", []Option{WithVersion("v1\n")}, "WithVersion: version"},
		{"non-UTF-8 owner", "s", []Option{WithOwner("\xfe")}, "owner"},
		{"zero watermark", "s", []Option{WithWatermark(0)}, "watermark must be at least 100ms"},
		{"negative watermark", "s", []Option{WithWatermark(-time.Second)}, "watermark must be at least 100ms"},
		{"a watermark too short to renew in", "s", []Option{WithWatermark(time.Nanosecond)}, "watermark must be at least 100ms"},
		{"the shortest watermark", "s", []Option{WithWatermark(MinWatermark)}, ""},
		{"renewals less often than twice a lease", "s", []Option{WithWatermark(time.Second), WithRenewInterval(600 * time.Millisecond)}, "at most half the watermark"},
		{"renewals twice a lease", "s", []Option{WithWatermark(time.Second), WithRenewInterval(500 * time.Millisecond)}, ""},
		{"a scope on a run-once Mutex (its wake-ups)", "s", []Option{WithScope(NewScope())}, ""},
		{"staleness equal to watermark", "s", []Option{WithWatermark(time.Minute), WithStaleness(time.Minute)}, "above the watermark"},
		{"staleness below watermark", "s", []Option{WithWatermark(time.Minute), WithStaleness(time.Second)}, "above the watermark"},
		{"negative staleness", "s", []Option{WithStaleness(-time.Hour)}, "above the watermark"},
		{"zero attempts", "s", []Option{WithMaxAttempts(0)}, "at least 1 attempt"},
		{"negative attempts", "s", []Option{WithMaxAttempts(-3)}, "at least 1 attempt"},
		{"jitter 1", "s", []Option{WithJitter(1)}, "[0, 1)"},
		{"negative jitter", "s", []Option{WithJitter(-0.1)}, "[0, 1)"},
		{"NaN jitter", "s", []Option{WithJitter(math.NaN())}, "[0, 1)"},
		{"nil backoff", "s", []Option{WithBackOff(nil)}, "WithBackOff(nil)"},
		{"nil logger", "s", []Option{WithLogger(nil)}, "WithLogger(nil)"},
		{"zero finish timeout", "s", []Option{WithFinishTimeout(0)}, "WithFinishTimeout"},
		{"nil option", "s", []Option{nil}, "option 0 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(client, tt.section, tt.opts...)
			if tt.want == "" {
				require.NoError(t, err)
				assert.NotEmpty(t, m.Owner())
				return
			}
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestNewRejectsNilClient(t *testing.T) {
	m, err := New(nil, "s")
	assert.Nil(t, m)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "nil *spanner.Client")
}

func TestNewAcceptsGoodInput(t *testing.T) {
	m, err := New(&spanner.Client{}, "migrations/2030-01-01 add index ✓",
		WithTable("My_Locks2"), WithOwner("svc-a"), WithWatermark(time.Second),
		WithStaleness(2*time.Second), WithMaxAttempts(1), WithJitter(0.99),
		WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} }))
	require.NoError(t, err)
	assert.Equal(t, "svc-a", m.Owner())
	assert.Equal(t, "migrations/2030-01-01 add index ✓", m.Name())
	longest := strings.Repeat("é", MaxNameLength) // 256 characters, 512 bytes
	_, err = New(&spanner.Client{}, longest)
	assert.NoError(t, err)
}

func TestDefaultOwnersDiffer(t *testing.T) {
	a, err := New(&spanner.Client{}, "s")
	require.NoError(t, err)
	b, err := New(&spanner.Client{}, "s")
	require.NoError(t, err)
	assert.NotEqual(t, a.Owner(), b.Owner())
}

func TestRunRejectsNilArguments(t *testing.T) {
	m, err := New(&spanner.Client{}, "s")
	require.NoError(t, err)
	//lint:ignore SA1012 checking that a nil context is refused, not panicked on
	out, err := m.Run(nil, func(context.Context, *Lease) error { return nil }) //nolint:staticcheck
	assert.Equal(t, NoOutcome, out)
	assert.ErrorContains(t, err, "nil context")
	out, err = m.Run(context.Background(), nil)
	assert.Equal(t, NoOutcome, out)
	assert.ErrorContains(t, err, "nil section function")
}

func TestErrorsMatchTheirSentinels(t *testing.T) {
	cause := errors.New("disk full")
	assert.ErrorIs(t, &ExhaustedError{Name: "n", Err: cause}, ErrAttemptsExhausted)
	assert.ErrorIs(t, &ExhaustedError{Name: "n", Err: cause}, cause)
	assert.ErrorIs(t, &LeaseLostError{Name: "n"}, ErrLeaseLost)
	assert.ErrorIs(t, &SchemaError{Table: "T"}, ErrSchema)
	assert.ErrorIs(t, &SectionError{Name: "n", Err: cause}, cause)
	assert.Contains(t, (&SchemaError{Table: "T", Problem: "does not exist"}).Error(), "spanmutex ddl --table T")
	assert.Contains(t, (&ExhaustedError{Name: "n", Attempts: 3, MaxAttempts: 3, LastError: "boom"}).Error(), "gave up after 3 of 3 attempts: last error: boom")
}

func TestOutcomeStrings(t *testing.T) {
	assert.Equal(t, "Executed", Executed.String())
	assert.Equal(t, "AlreadyDone", AlreadyDone.String())
	assert.Equal(t, "NotNeeded", NotNeeded.String())
	assert.Equal(t, "NoOutcome", NoOutcome.String())
}

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	got := truncate(s, 5)
	assert.Equal(t, "éé…", got)
	assert.Equal(t, "short", truncate("short", 10))
}

// Every constructor refuses an option that does not apply to what it makes,
// with an error wrapping ErrInvalidConfig that names the option; none
// ignores one silently.
func TestConstructorsRejectOptionsThatDoNotApply(t *testing.T) {
	client := &spanner.Client{} // never used: the options are refused first
	needed := WithNeeded(func(context.Context) (bool, error) { return true, nil })
	makers := map[string]func(opts ...Option) error{
		"NewLock":          func(opts ...Option) error { _, err := NewLock(client, "l", opts...); return err },
		"CheckLockOptions": func(opts ...Option) error { return CheckLockOptions(opts...) },
		"Inspect": func(opts ...Option) error {
			_, err := Inspect(context.Background(), client, "", opts...)
			return err
		},
		"NewFence": func(opts ...Option) error { _, err := NewFence(client, opts...); return err },
	}
	tests := []struct {
		maker  string
		opt    Option
		option string // the option's name, in the error
		want   string // what the error says to do
	}{
		{"NewLock", WithStaleness(time.Hour), "WithStaleness", "nothing goes stale"},
		{"NewLock", needed, "WithNeeded", "decide before calling it"},
		{"NewLock", WithVersion("v2"), "WithVersion", "use a Mutex"},
		{"CheckLockOptions", WithStaleness(time.Hour), "WithStaleness", "nothing goes stale"},
		{"CheckLockOptions", needed, "WithNeeded", "decide before calling it"},
		{"CheckLockOptions", WithVersion("v2"), "WithVersion", "use a Mutex"},
		{"Inspect", WithWatermark(time.Minute), "WithWatermark", "only WithTable and WithDialect apply"},
		{"Inspect", WithScope(NewScope()), "WithScope", "only WithTable and WithDialect apply"},
		{"NewFence", WithOwner("o"), "WithOwner", "only WithTable and WithDialect apply"},
		{"NewFence", WithLogger(slog.Default()), "WithLogger", "only WithTable and WithDialect apply"},
	}
	for _, tt := range tests {
		t.Run(tt.maker+" "+tt.option, func(t *testing.T) {
			err := makers[tt.maker](WithTable("Locks"), tt.opt)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.option+" does not apply")
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

// The options that do apply are accepted, and validated as New validates them.
func TestLockAndTableOptionsAccepted(t *testing.T) {
	client := &spanner.Client{}
	lockOpts := []Option{WithTable("Locks"), WithOwner("o"), WithWatermark(time.Second), WithMaxAttempts(2),
		WithJitter(0.1), WithBackOff(defaultBackOff), WithLogger(slog.Default()), WithRenewInterval(100 * time.Millisecond),
		WithFinishTimeout(time.Second), WithScope(NewScope())}
	assert.NoError(t, CheckLockOptions(lockOpts...)) // NewLock's check, without a client
	assert.NoError(t, CheckLockOptions())
	assert.ErrorContains(t, CheckLockOptions(WithWatermark(time.Millisecond)), "WithWatermark(1ms)")
	assert.ErrorContains(t, CheckLockOptions(nil), "option 0 is nil")
	f, err := NewFence(client)
	require.NoError(t, err)
	assert.Equal(t, DefaultFenceTable, f.table)
	f, err = NewFence(client, WithTable("MyFences"))
	require.NoError(t, err)
	assert.Equal(t, "MyFences", f.table)
	_, err = Inspect(context.Background(), client, "", WithTable("bad-name"))
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

func TestOptionName(t *testing.T) {
	assert.Equal(t, "WithOwner", WithOwner("o").Name())
	assert.Equal(t, "WithScope", WithScope(nil).Name())
	assert.Equal(t, "WithMeterProvider", WithMeterProvider(nil).Name())
	assert.Equal(t, "", Option(nil).Name())
}

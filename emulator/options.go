package emulator

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spanmutex/spanmutex/ddl"
)

// Option configures Start.
type Option func(*config)

type config struct {
	project        string
	instance       string
	binary         string
	faultInjection bool
	ddl            []string
	log            io.Writer
	startTimeout   time.Duration
	dialect        ddl.Dialect
}

func defaultConfig() config {
	return config{
		project:      DefaultProject,
		instance:     DefaultInstance,
		startTimeout: DefaultStartTimeout,
	}
}

func (c config) validate() error {
	if len(c.project) < 6 || len(c.project) > 30 {
		return errors.New("emulator: project id must be 6-30 characters")
	}
	if len(c.instance) < 2 || len(c.instance) > 64 {
		return errors.New("emulator: instance id must be 2-64 characters")
	}
	if !c.dialect.Valid() {
		return fmt.Errorf("emulator: invalid dialect %v: use ddl.GoogleSQL or ddl.PostgreSQL", c.dialect)
	}
	if c.startTimeout <= 0 {
		return errors.New("emulator: start timeout must be positive")
	}
	return nil
}

// WithFaultInjection starts the emulator with --enable_fault_injection, so
// that it aborts commits at random and abort/retry paths are exercised. It
// always starts an emulator of its own, even when SPANNER_EMULATOR_HOST is set.
func WithFaultInjection() Option { return func(c *config) { c.faultInjection = true } }

// WithBinary starts the emulator binary at path instead of searching for one.
// It always starts an emulator of its own, even when SPANNER_EMULATOR_HOST is set.
func WithBinary(path string) Option { return func(c *config) { c.binary = path } }

// WithDialect makes the default database, and those NewDatabase and
// CreateDatabase create, PostgreSQL-dialect databases (ddl.PostgreSQL) or
// GoogleSQL ones (ddl.GoogleSQL, the default), with the spanmutex schema in
// that dialect. Statements given with WithDDL must be in it too.
func WithDialect(d ddl.Dialect) Option { return func(c *config) { c.dialect = d } }

// WithDDL adds statements (tables of your own) to the default database,
// after the spanmutex schema.
func WithDDL(statements ...string) Option {
	return func(c *config) { c.ddl = append(c.ddl, statements...) }
}

// WithProject sets the project id (default DefaultProject).
func WithProject(id string) Option { return func(c *config) { c.project = id } }

// WithInstance sets the instance id (default DefaultInstance).
func WithInstance(id string) Option { return func(c *config) { c.instance = id } }

// WithLog copies the emulator's own log to w (default: kept only to explain
// a failed start).
func WithLog(w io.Writer) Option { return func(c *config) { c.log = w } }

// WithStartTimeout bounds how long Start waits for the emulator to accept
// connections (default DefaultStartTimeout).
func WithStartTimeout(d time.Duration) Option { return func(c *config) { c.startTimeout = d } }

package spanmutex

import (
	"fmt"
	"os"

	"github.com/google/uuid"
)

// configure is the construction every primitive shares: it validates name
// and opts and returns the configuration of a primitive named name, with
// its owner identity (defaultOwner if not given), a logger that names it, a
// Scope (one of its own if WithScope gave none) and its telemetry. New and
// NewLock call it; every error it returns wraps ErrInvalidConfig.
func configure[O MutexOption](name string, opts []O) (config, error) {
	if err := validateName(name); err != nil {
		return config{}, err
	}
	cfg, err := newConfig(opts) // options.go
	if err != nil {
		return config{}, err
	}
	cfg.logger = cfg.logger.With("mutex", name, "owner", cfg.owner)
	if cfg.scope == nil {
		cfg.scope = NewScope() // a Scope of its own (see WithScope)
	}
	tel, err := newTelemetry(&cfg, name) // telemetry.go
	if err != nil {
		return config{}, fmt.Errorf("%w: telemetry: %v", ErrInvalidConfig, err)
	}
	cfg.tel = tel
	return cfg, nil
}

// defaultOwner is host:pid:random, unique per Mutex.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return truncate(fmt.Sprintf("%s:%d:%s", host, os.Getpid(), uuid.NewString()[:8]), maxNameLength-1)
}

package lockbench

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/api/option"
	"google.golang.org/api/option/internaloption"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spanmutex/spanmutex"
	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/bench"
)

// openSpanner opens the one Spanner client of a child process, on the
// emulator at host, with opts appended. Its session pool opens as many
// sessions as the process has goroutines (plus a few for renewals and
// polls), not the default 100.
func openSpanner(ctx context.Context, host, db string, goroutines int, opts ...option.ClientOption) (*spanner.Client, error) {
	cfg := spanner.ClientConfig{SessionPoolConfig: spanner.DefaultSessionPoolConfig, DisableNativeMetrics: true}
	cfg.SessionPoolConfig.MinOpened = uint64(goroutines + 4)
	base := []option.ClientOption{
		option.WithEndpoint("passthrough:///" + host),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithoutAuthentication(),
		internaloption.SkipDialSettingsValidation(),
	}
	c, err := spanner.NewClientWithConfig(ctx, db, cfg, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("open a Spanner client of %s at %s: %w", db, host, err)
	}
	return c, nil
}

// spannerFleet makes a process's G Spanner contenders on one client: for
// spanmutex, G Locks of one Scope (one process); for the naive lock, G naive
// contenders.
func spannerFleet(ctx context.Context, sp spec) (*fleet, error) {
	rpcs := bench.NewRPCCounterWithLatency(sp.RPCLatency)
	client, err := openSpanner(ctx, sp.Emulator, sp.Database, sp.Goroutines, rpcs.ClientOptions()...)
	if err != nil {
		return nil, err
	}
	f := &fleet{rpcs: rpcs.Counts, ops: opsAndOwed(rpcs), lead: rpcs.LastCommitLead, close: client.Close}
	switch sp.Kind {
	case Spanmutex, SpanmutexPoll:
		// The README's configuration: one NewScope per process, which
		// listens for wake-ups on demand; spanmutex-poll turns that off.
		scope := spanmutex.NewScope()
		if sp.Kind == SpanmutexPoll {
			scope = spanmutex.NewScope(spanmutex.WithoutWakeUps())
		}
		closeClient := f.close
		f.close = func() { scope.Close(); closeClient() }
		for g := range sp.Goroutines {
			l, err := spanmutex.NewLock(client, sp.Name, spanmutex.WithOwner(fmt.Sprintf("p%d-g%d", sp.Proc, g)), spanmutex.WithScope(scope))
			if err != nil {
				client.Close()
				return nil, err
			}
			f.lockers = append(f.lockers, lockOf{l})
		}
	case Naive:
		for g := range sp.Goroutines {
			l := bench.NewNaiveLock(client, ddl.DefaultMutexTable, sp.Name, fmt.Sprintf("p%d-g%d", sp.Proc, g))
			f.lockers = append(f.lockers, naiveOf{l})
		}
	}
	return f, nil
}

type lockOf struct{ l *spanmutex.Lock }

func (c lockOf) lock(ctx context.Context) (grant, error) {
	lease, err := c.l.Lock(ctx)
	if err != nil {
		return grant{}, err
	}
	entry := lease.QueuedAt()
	if entry.IsZero() {
		entry = lease.AcquiredAt()
	}
	return grant{token: lease.Token(), handedOff: lease.HandedOff(), entry: entry.UnixNano()}, nil
}

func (c lockOf) unlock(ctx context.Context) error { return c.l.Unlock(ctx) }

type naiveOf struct{ l *bench.NaiveLock }

func (c naiveOf) lock(ctx context.Context) (grant, error) {
	tok, err := c.l.Lock(ctx)
	return grant{token: tok}, err
}

func (c naiveOf) unlock(ctx context.Context) error { return c.l.Unlock(ctx) }

// etcdSessionTTL is each etcd session's lease, in seconds: like
// spanmutex's default lease, it bounds how long a dead holder blocks
// others.
const etcdSessionTTL = 30

// etcdFleet makes a process's G etcd contenders: one client per process and
// one session (lease) per goroutine, since a concurrency.Mutex's key is its
// session's lease id and two Mutexes of one prefix must not share it.
func etcdFleet(ctx context.Context, sp spec) (*fleet, error) {
	rpcs := bench.NewRPCCounter()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{sp.Etcd},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: rpcs.DialOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %s: %w", sp.Etcd, err)
	}
	var sessions []*concurrency.Session
	f := &fleet{rpcs: rpcs.Counts, ops: opsAndOwed(rpcs), lead: func() (time.Duration, bool) { return 0, false }}
	f.close = func() {
		for _, s := range sessions {
			_ = s.Close()
		}
		cli.Close()
	}
	for range sp.Goroutines {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(etcdSessionTTL), concurrency.WithContext(ctx))
		if err != nil {
			f.close()
			return nil, fmt.Errorf("etcd session: %w", err)
		}
		sessions = append(sessions, s)
		f.lockers = append(f.lockers, etcdOf{concurrency.NewMutex(s, "/lockbench/"+sp.Name)})
	}
	return f, nil
}

type etcdOf struct{ m *concurrency.Mutex }

// lock returns the revision of the response that granted the lock as the
// token: etcd's Mutex has no token of its own (the benchmark orders
// acquisitions by the shared clock, not by tokens).
func (c etcdOf) lock(ctx context.Context) (grant, error) {
	if err := c.m.Lock(ctx); err != nil {
		return grant{}, err
	}
	return grant{token: c.m.Header().GetRevision()}, nil
}

func (c etcdOf) unlock(ctx context.Context) error { return c.m.Unlock(ctx) }

package main

import (
	"context"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"

	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// connect opens one client per instance, on the embedded emulator or on
// --database, and returns a function that closes everything it opened.
func (d *demo) connect(ctx context.Context) (func(), error) {
	var (
		db        string
		newClient func(context.Context, ...option.ClientOption) (*spanner.Client, error)
		closeAll  = func() {}
	)
	if d.opts.database != "" {
		db = d.opts.database
		d.out.Printf("Using database %s (%s).\n", db, cmdline.ConnectionHint())
		newClient = func(ctx context.Context, opts ...option.ClientOption) (*spanner.Client, error) {
			return cmdline.OpenClient(ctx, db, opts...)
		}
	} else {
		emu, err := emulator.Start(ctx)
		if err != nil {
			return nil, err
		}
		closeAll = func() { _ = emu.Close() }
		d.emu = emu
		db = emu.Database()
		if emu.Started() {
			d.out.Printf("Started the Cloud Spanner emulator at %s (pid %d).\n", emu.Host(), emu.PID())
		} else {
			d.out.Printf("Using the Cloud Spanner emulator at %s=%s.\n", cmdline.EmulatorHostEnv, emu.Host())
		}
		d.out.Printf("Created database %s with the mutex table.\n", db)
		newClient = func(ctx context.Context, opts ...option.ClientOption) (*spanner.Client, error) {
			return emu.NewClient(ctx, db, opts...)
		}
	}
	for range d.opts.instances {
		p := &partition{}
		c, err := newClient(ctx, p.clientOption()...)
		if err != nil {
			d.closeClients()
			closeAll()
			return nil, err
		}
		d.clients = append(d.clients, c)
		d.partitions = append(d.partitions, p)
	}
	d.out.Printf("Opened %d Spanner clients, one per simulated service instance.\n", len(d.clients))
	return func() {
		d.closeClients()
		closeAll()
	}, nil
}

// closeClients closes the instances' clients.
func (d *demo) closeClients() {
	for _, c := range d.clients {
		c.Close()
	}
}

// newClient opens a client of db, another database of the demo's emulator
// or instance.
func (d *demo) newClient(ctx context.Context, db string) (*spanner.Client, error) {
	if d.emu != nil {
		return d.emu.NewClient(ctx, db)
	}
	return cmdline.OpenClient(ctx, db)
}

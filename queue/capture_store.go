package queue

import (
	"context"
	"time"
)

// captureStore is where a Capture keeps its checkpoints and reads its
// stream. spannerCapture is the only implementation outside tests; the
// capture simulation (capture_sim_test.go) runs Run, readPartition and the
// ownership rules (mayClaim, owns) against a simulated one.
type captureStore interface {
	// ensureRoot checks the checkpoint table and records the stream's
	// first partitions if it has none yet.
	ensureRoot(ctx context.Context) error
	// spannerNow reads Spanner's clock for who, the loop of a Run that
	// asks ("run", or the token of the partition it reads): only the
	// simulation tells them apart (each loop draws its faults from its
	// own source there).
	spannerNow(ctx context.Context, who string) (time.Time, error)
	// runnable lists the partitions this instance may claim now.
	runnable(ctx context.Context) ([]capturePartition, error)
	// claim makes this instance a partition's owner if mayClaim allows.
	claim(ctx context.Context, token string) (capturePartition, bool, error)
	// commit writes a checkpoint and its requests if this instance still
	// owns the partition, and returns how many requests were new.
	commit(ctx context.Context, cp captureCheckpoint) (int, error)
	// release gives up the partitions this instance owns.
	release(ctx context.Context)
	// query reads a partition from start to end (nil: until it ends).
	query(ctx context.Context, start time.Time, end *time.Time, token *string, fn func(csRecord) error) error
}

// spannerCapture is a Capture's store on Spanner: the checkpoint table and
// the change stream's query.
type spannerCapture struct{ *Capture }

package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/require"
)

// expiresFrom reads the ExpiresFrom column of each id, the column the
// retention policy deletes by.
func expiresFrom(t *testing.T, c *spanner.Client, ids ...string) map[string]spanner.NullTime {
	t.Helper()
	keys := make([]spanner.KeySet, len(ids))
	for i, id := range ids {
		keys[i] = spanner.Key{id}
	}
	out := map[string]spanner.NullTime{}
	err := c.Single().Read(context.Background(), "Requests", spanner.KeySets(keys...), []string{"RequestID", "ExpiresFrom"}).Do(func(row *spanner.Row) error {
		var id string
		var at spanner.NullTime
		if err := row.Columns(&id, &at); err != nil {
			return err
		}
		out[id] = at
		return nil
	})
	require.NoError(t, err)
	return out
}

// A retention policy must never delete a completed create: the queue reads
// it to know that its resource exists. Everything else that finished may
// expire.
func TestRetentionNeverExpiresACompletedCreate(t *testing.T) {
	q, c := newTestQueue(t)
	w, err := q.NewWorker(func(ctx context.Context, job *Job) error {
		if job.Resource == "doomed" && job.Kind == KindCreate {
			return errors.New("no quota left")
		}
		return nil
	})
	require.NoError(t, err)
	ids := enqueue(t, q,
		Request{Kind: KindCreate, Resource: "kept"}, Request{Kind: KindUpdate, Resource: "kept"},
		Request{Kind: KindCreate, Resource: "doomed"}, Request{Kind: KindUpdate, Resource: "doomed"})
	runWorker(t, w)
	got := waitFinished(t, q, 30*time.Second, ids...)
	require.Equal(t, []Status{StatusComplete, StatusComplete, StatusError, StatusError},
		[]Status{got[0].Status, got[1].Status, got[2].Status, got[3].Status})

	exp := expiresFrom(t, c, ids...)
	require.False(t, exp[ids[0]].Valid, "a completed create never expires")
	for _, id := range ids[1:] {
		require.True(t, exp[id].Valid, "request %s finished: it may expire", id)
	}
	require.Equal(t, got[1].FinishedAt, exp[ids[1]].Time, "it expires from when it finished")
}

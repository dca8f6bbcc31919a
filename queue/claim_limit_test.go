package queue

import (
	"fmt"
	"reflect"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spannerMaxMutations is Spanner's limit on mutations per commit.
const spannerMaxMutations = 80_000

// mutationColumns returns how many columns m sets (Spanner counts each).
func mutationColumns(m *spanner.Mutation) int {
	return reflect.ValueOf(m).Elem().FieldByName("columns").Len()
}

// A claim takes at most maxClaimRequests requests, the oldest, whatever the
// backlog: with the outcome of the job before it, which the same step
// commits, it stays within Spanner's 80,000 mutations per commit, counting
// each column set and each column of the index entries it changes. Before,
// a claim took every pending update of the resource: 20,000 of them made
// one commit of 20,000 x 16 mutations, which Spanner refuses, and the
// create's outcome, committed with it, was never recorded.
func TestClaimStaysWithinSpannersCommitLimits(t *testing.T) {
	w := &Worker{q: &Queue{cfg: config{table: "Requests"}}}
	const backlog = 20_000
	pending := make([]Request, backlog)
	for i := range pending {
		pending[i] = Request{ID: fmt.Sprintf("u%05d", i), Kind: KindUpdate, Resource: "r", Status: StatusNew}
	}
	for _, tc := range []struct {
		name   string
		create *Request
	}{
		{"create complete: updates claimed", &Request{ID: "c", Kind: KindCreate, Resource: "r", Status: StatusComplete}},
		{"create failed: updates end in error", &Request{ID: "c", Kind: KindCreate, Resource: "r", Status: StatusError, LastError: "boom"}},
		{"no create: updates end in error", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planClaim("r", pending, tc.create, DefaultMaxAttempts)
			taken := len(plan.claim) + len(plan.fail)
			require.LessOrEqual(t, taken, maxClaimRequests, "requests one claim takes out of %d", backlog)
			require.Equal(t, maxClaimRequests, taken, "a full claim")
			first := pending[0].ID
			if len(plan.claim) > 0 {
				assert.Equal(t, first, plan.claim[0].ID, "the oldest first")
			} else {
				assert.Equal(t, first, plan.fail[0].req.ID, "the oldest first")
			}
			// The step that claims them records the outcome of the job
			// before, at most as large, in the same commit: an error, the
			// outcome that writes the most columns.
			ms := w.claimMutations(plan, "pid", 7)
			for i := range maxClaimRequests {
				ms = append(ms, finishMutation("Requests", fmt.Sprintf("p%05d", i), KindUpdate, outcome{status: StatusError, lastError: "x"}))
			}
			total := 0
			for _, m := range ms {
				cols := mutationColumns(m)
				require.LessOrEqual(t, cols+5+4, maxMutationsPerRequest, "a write's columns and its index entries")
				total += maxMutationsPerRequest
			}
			t.Logf("%d writes, at most %d mutations in one step's commit", len(ms), total)
			assert.LessOrEqual(t, total, spannerMaxMutations/2, "a step's commit, with room to spare")
		})
	}
}

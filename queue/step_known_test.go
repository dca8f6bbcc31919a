package queue

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKnownRequestsFollowTheSteps walks a tenure of a resource with a create
// and two updates on the requests as each step leaves them (leftBy), as a
// step that reads nothing but Guard's row takes them: the first claims the
// create; the second, once the create completed, claims both updates, and
// its known requests decide it (knownClaims); the third records them and
// finds nothing to claim, so it reads the statement. A create that failed
// fails its updates without a handler.
func TestKnownRequestsFollowTheSteps(t *testing.T) {
	w := &Worker{q: &Queue{cfg: config{table: "Requests"}}, cfg: workerConfig{maxAttempts: 3}}
	create := Request{ID: "c", Kind: KindCreate, Status: StatusNew, Resource: "sheet"}
	u1 := Request{ID: "u1", Kind: KindUpdate, Status: StatusNew, Resource: "sheet"}
	u2 := Request{ID: "u2", Kind: KindUpdate, Status: StatusNew, Resource: "sheet"}
	pending := []Request{create, u1, u2}

	// Step 1, on the statement's read: claims the create alone.
	live, c := asWritten(append([]Request(nil), pending...), &create, nil, "p1")
	plan := planClaim("sheet", live, c, 3)
	require.Equal(t, []string{"c"}, ids(plan.claim))
	known := leftBy(live, c, plan, "p1", 7)
	assert.Equal(t, StatusInProgress, known.create.Status)
	assert.Equal(t, "p1", known.pending[0].ProcessID)
	assert.Equal(t, int64(1), known.pending[0].Attempts)

	// Step 2: records the create complete and claims both updates.
	done := &finishing{pid: "p1", ids: []string{"c"}, out: outcome{status: StatusComplete}}
	in := stepInput{prev: done, claimNext: true, pid: "p2", known: known}
	require.True(t, w.knownClaims("sheet", in), "the known updates decide the step")
	read := known.copyFor(in.finishes())
	require.Contains(t, read.also, "c", "the job it finishes, in-progress under p1")
	fin, recorded := w.finishMutations(read.also, done)
	assert.Len(t, fin, 1)
	assert.Zero(t, recorded)
	live, c = asWritten(read.pending, read.create, done, "p2")
	plan = planClaim("sheet", live, c, 3)
	require.Equal(t, []string{"u1", "u2"}, ids(plan.claim))
	assert.Equal(t, StatusInProgress, known.create.Status, "the step changed a copy of the known requests")
	known = leftBy(live, c, plan, "p2", 7)

	// Step 3: records the updates; nothing is left to claim, so it reads.
	in = stepInput{prev: &finishing{pid: "p2", ids: []string{"u1", "u2"}, out: outcome{status: StatusComplete}}, claimNext: true, pid: "p3", known: known}
	assert.False(t, w.knownClaims("sheet", in), "the statement finds what was enqueued meanwhile")

	// A create that failed: its updates end in error, and leave the known requests.
	failed := &finishing{pid: "p1", ids: []string{"c"}, out: outcome{status: StatusError, lastError: "no quota"}}
	first := leftBy(asWrittenLive(pending, &create), &create, planClaim("sheet", pending, &create, 3), "p1", 7)
	in = stepInput{prev: failed, claimNext: true, pid: "p2", known: first}
	require.True(t, w.knownClaims("sheet", in))
	read = first.copyFor(in.finishes())
	live, c = asWritten(read.pending, read.create, failed, "p2")
	plan = planClaim("sheet", live, c, 3)
	require.Len(t, plan.fail, 2)
	assert.Equal(t, "create failed: no quota", plan.fail[0].reason)
	assert.Empty(t, leftBy(live, c, plan, "p2", 7).pending)
}

// asWrittenLive is asWritten's live requests of a first step.
func asWrittenLive(pending []Request, create *Request) []Request {
	live, _ := asWritten(append([]Request(nil), pending...), create, nil, "p1")
	return live
}

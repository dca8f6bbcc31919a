package sheets_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spanmutex/spanmutex/examples/spreadsheets/sheets"
)

// TestServerEnqueues creates a sheet and clicks its link through the API,
// with no worker running: the requests are accepted, listed as pending, and
// every accepted request wakes the workers once.
func TestServerEnqueues(t *testing.T) {
	q, _ := freshQueue(t)
	store := newStore(t)
	var notified atomic.Int32
	c, _ := serve(t, q, store, sheets.WithNotify(func() { notified.Add(1) }))
	ctx := context.Background()

	created, err := c.Create(ctx, "sheet-1")
	require.NoError(t, err)
	require.Equal(t, sheets.Accepted{Sheet: "sheet-1", Request: created.Request, Kind: "create", Status: "new"}, created)
	require.NotEmpty(t, created.Request)
	var updates []string
	for _, p := range []string{`{"cells":{"A1":1}}`, `"plain"`} {
		a, err := c.Update(ctx, "sheet-1", json.RawMessage(p))
		require.NoError(t, err)
		require.Equal(t, "update", a.Kind)
		updates = append(updates, a.Request)
	}
	require.Equal(t, int32(3), notified.Load())

	st, err := c.Status(ctx, "sheet-1")
	require.NoError(t, err)
	require.Equal(t, "sheet-1", st.Sheet)
	require.Equal(t, 3, st.Pending)
	require.Nil(t, st.Stored, "no worker ran: the sheet is not stored")
	var ids []string
	for _, r := range st.Requests {
		ids = append(ids, r.ID)
		require.Equal(t, "new", r.Status)
		require.Nil(t, r.FinishedAt)
	}
	require.ElementsMatch(t, append([]string{created.Request}, updates...), ids)
	require.Equal(t, "create", st.Requests[0].Kind, "oldest first: the create")

	got, err := q.Get(ctx, updates[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"cells":{"A1":1}}`, string(got.Payload), "the payload is enqueued as sent")
}

// TestServerRejects checks every refusal of the API: its status and that
// its message names what is wrong.
func TestServerRejects(t *testing.T) {
	q, _ := freshQueue(t)
	c, ts := serve(t, q, newStore(t))
	ctx := context.Background()
	_, err := c.Create(ctx, "taken")
	require.NoError(t, err)

	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string // in the error message
	}{
		{"duplicate create", "POST", "/sheets", `{"id":"taken"}`, 409, `resource "taken" already has a create request`},
		{"update of an unknown sheet", "POST", "/sheets/nosuch/updates", `{"payload":1}`, 404, `sheet "nosuch" has no create request`},
		{"empty id", "POST", "/sheets", `{"id":""}`, 400, "empty sheet id"},
		{"missing id", "POST", "/sheets", `{}`, 400, "empty sheet id"},
		{"bad character in id", "POST", "/sheets", `{"id":"a/b"}`, 400, `sheet id "a/b" has '/' at byte 1`},
		{"overlong id", "POST", "/sheets", `{"id":"` + strings.Repeat("x", 101) + `"}`, 400, "at most 100"},
		{"unknown field", "POST", "/sheets", `{"id":"a","colour":"red"}`, 400, `unknown field "colour"`},
		{"malformed JSON", "POST", "/sheets", `{"id":`, 400, "malformed JSON body"},
		{"empty body", "POST", "/sheets", ``, 400, "empty body"},
		{"two objects", "POST", "/sheets", `{"id":"a"}{"id":"b"}`, 400, "more than one JSON value"},
		{"missing payload", "POST", "/sheets/taken/updates", `{}`, 400, `missing "payload"`},
		{"null payload", "POST", "/sheets/taken/updates", `{"payload":null}`, 400, `missing "payload"`},
		{"bad id in path", "POST", "/sheets/a.b/updates", `{"payload":1}`, 400, `sheet id "a.b" has '.'`},
		{"status of an unknown sheet", "GET", "/sheets/nosuch", ``, 404, `no sheet "nosuch"`},
		{"wrong method", "DELETE", "/sheets/taken", ``, 405, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := ts.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, "body: %s", raw)
			if tc.want == "" {
				return
			}
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var eb sheets.ErrorBody
			require.NoError(t, json.Unmarshal(raw, &eb), "body: %s", raw)
			require.Contains(t, eb.Error, tc.want)
		})
	}

	// The client reports refusals as *APIError.
	_, err = c.Create(ctx, "taken")
	require.True(t, sheets.IsStatus(err, http.StatusConflict), "got %v", err)
	_, err = c.Update(ctx, "nosuch", json.RawMessage(`1`))
	require.True(t, sheets.IsStatus(err, http.StatusNotFound), "got %v", err)

	// Nothing refused was enqueued: "taken" still has one request.
	st, err := c.Status(ctx, "taken")
	require.NoError(t, err)
	require.Len(t, st.Requests, 1)
}

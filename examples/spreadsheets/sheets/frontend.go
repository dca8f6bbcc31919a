package sheets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/spanmutex/spanmutex/queue"
)

// maxBodyBytes bounds a request body: the queue's default payload limit and
// room for the JSON around it.
const maxBodyBytes = queue.DefaultMaxPayload + 4096

// Server is the HTTP front end. It records requests in the queue and leaves
// the work to the back end's workers:
//
//	POST /sheets               {"id": "..."}      202 Accepted; 409 if the sheet already has a create
//	POST /sheets/{id}/updates  {"payload": ...}   202 Accepted; 404 if the sheet has no create
//	GET  /sheets/{id}                             200 with SheetStatus; 404 if unknown
//
// Malformed input gets 400 with what is wrong; a failure to reach Spanner
// gets 503. Every error body is an ErrorBody. Requests that arrive together
// are enqueued together, in one transaction (see WithMaxBatch), and each is
// answered once its batch committed. It is safe for concurrent use.
type Server struct {
	q      *queue.Queue
	store  *Store
	notify func()
	batch  batcher
	mux    *http.ServeMux
}

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithNotify calls notify after every request the server enqueues: the
// seed's NOTIFY. Use it to wake workers whose Queue is not the server's (the
// server's own Queue wakes its workers by itself).
func WithNotify(notify func()) ServerOption { return func(s *Server) { s.notify = notify } }

// WithMaxBatch sets how many requests the server enqueues in one
// transaction at most (default DefaultMaxBatch; 1 enqueues each request on
// its own, as the seed's front end does).
func WithMaxBatch(n int) ServerOption { return func(s *Server) { s.batch.max = n } }

// NewServer returns the front end of q. store, if not nil, is shown in
// GET /sheets/{id} answers as the sheet's stored state.
func NewServer(q *queue.Queue, store *Store, opts ...ServerOption) (*Server, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: nil *queue.Queue", ErrInvalidConfig)
	}
	s := &Server{q: q, store: store, notify: func() {}, batch: batcher{q: q, max: DefaultMaxBatch}, mux: http.NewServeMux()}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil ServerOption", ErrInvalidConfig)
		}
		o(s)
	}
	if s.notify == nil {
		return nil, fmt.Errorf("%w: WithNotify(nil)", ErrInvalidConfig)
	}
	if s.batch.max < 1 || s.batch.max > 1000 {
		return nil, fmt.Errorf("%w: WithMaxBatch(%d): want 1 to 1000", ErrInvalidConfig, s.batch.max)
	}
	s.mux.HandleFunc("POST /sheets", s.create)
	s.mux.HandleFunc("POST /sheets/{id}/updates", s.update)
	s.mux.HandleFunc("GET /sheets/{id}", s.status)
	return s, nil
}

// ServeHTTP routes r to the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// create is POST /sheets.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var body CreateRequest
	if !decode(w, r, &body) {
		return
	}
	if err := ValidateSheetID(body.ID); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.enqueue(r.Context(), w, queue.Request{Kind: queue.KindCreate, Resource: body.ID})
}

// update is POST /sheets/{id}/updates.
func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := ValidateSheetID(id); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var body UpdateRequest
	if !decode(w, r, &body) {
		return
	}
	if len(body.Payload) == 0 || bytes.Equal(body.Payload, []byte("null")) {
		writeError(w, http.StatusBadRequest, `missing "payload": give the click's data, any JSON value but null`)
		return
	}
	s.enqueue(r.Context(), w, queue.Request{Kind: queue.KindUpdate, Resource: id, Payload: body.Payload})
}

// enqueue records req and answers 202, or the error's status.
func (s *Server) enqueue(ctx context.Context, w http.ResponseWriter, req queue.Request) {
	id, err := s.batch.enqueue(ctx, req)
	switch {
	case err == nil:
		s.notify()
		writeJSON(w, http.StatusAccepted, Accepted{Sheet: req.Resource, Request: id, Kind: string(req.Kind), Status: string(queue.StatusNew)})
	case errors.Is(err, queue.ErrDuplicateCreate):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, queue.ErrNoCreate):
		writeError(w, http.StatusNotFound, fmt.Sprintf("sheet %q has no create request; POST /sheets first: %v", req.Resource, err))
	case errors.Is(err, queue.ErrInvalidRequest):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, unavailableOr500(err), fmt.Sprintf("could not enqueue the %s of sheet %q: %v", req.Kind, req.Resource, err))
	}
}

// status is GET /sheets/{id}.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := ValidateSheetID(id); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	reqs, err := s.q.List(r.Context(), id)
	if err != nil {
		writeError(w, unavailableOr500(err), fmt.Sprintf("could not read the requests of sheet %q: %v", id, err))
		return
	}
	out := SheetStatus{Sheet: id, Requests: []RequestStatus{}}
	for _, q := range reqs {
		rs := RequestStatus{ID: q.ID, Kind: string(q.Kind), Status: string(q.Status), Token: q.Token,
			Attempts: q.Attempts, LastError: q.LastError, CreatedAt: q.CreatedAt}
		if !q.FinishedAt.IsZero() {
			at := q.FinishedAt
			rs.FinishedAt = &at
		}
		out.Requests = append(out.Requests, rs)
		switch q.Status {
		case queue.StatusComplete:
			out.Complete++
		case queue.StatusError:
			out.Error++
		default:
			out.Pending++
		}
	}
	if s.store != nil {
		if sh, ok := s.store.Sheet(id); ok {
			out.Stored = &StoredSheet{CreatedToken: sh.CreatedToken, LastToken: sh.LastToken, Updates: sh.Updates, Clicks: len(sh.Payloads)}
		}
	}
	if len(out.Requests) == 0 && out.Stored == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no sheet %q: it has no requests; POST /sheets to create it", id))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// decode reads r's body as one JSON object into v, rejecting unknown fields
// and trailing data; on failure it answers 400 (413 if too large) and
// returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data after the JSON object")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", tooLarge.Limit))
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "empty body: send a JSON object")
	default:
		writeError(w, http.StatusBadRequest, "malformed JSON body: "+err.Error())
	}
	return false
}

// unavailableOr500 is 503 for errors that say Spanner could not be reached
// in time (the client may retry), 500 for others.
func unavailableOr500(err error) int {
	switch spanner.ErrCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return http.StatusServiceUnavailable
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeError answers code with an ErrorBody.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg})
}

// writeJSON answers code with v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do then
}

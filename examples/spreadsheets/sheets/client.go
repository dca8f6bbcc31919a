package sheets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// APIError is an answer of the HTTP API other than the one expected: its
// status and the error text the server gave.
type APIError struct {
	StatusCode int
	Message    string
}

// Error returns the status and the server's message.
func (e *APIError) Error() string {
	return fmt.Sprintf("sheets API: %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Client calls a Server's HTTP API. It is safe for concurrent use.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient returns a client of the API at baseURL (such as
// "http://127.0.0.1:8080"), using hc (http.DefaultClient if nil).
func NewClient(baseURL string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL %q: want http://host:port", ErrInvalidConfig, baseURL)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), hc: hc}, nil
}

// Create asks for sheet id to be created. A sheet that already has a create
// returns an *APIError with status 409.
func (c *Client) Create(ctx context.Context, id string) (Accepted, error) {
	var out Accepted
	err := c.do(ctx, http.MethodPost, "/sheets", CreateRequest{ID: id}, http.StatusAccepted, &out)
	return out, err
}

// Update sends one click of sheet id with payload (JSON). A sheet with no
// create returns an *APIError with status 404.
func (c *Client) Update(ctx context.Context, id string, payload json.RawMessage) (Accepted, error) {
	var out Accepted
	err := c.do(ctx, http.MethodPost, "/sheets/"+url.PathEscape(id)+"/updates", UpdateRequest{Payload: payload}, http.StatusAccepted, &out)
	return out, err
}

// Status returns sheet id's requests and stored state.
func (c *Client) Status(ctx context.Context, id string) (SheetStatus, error) {
	var out SheetStatus
	err := c.do(ctx, http.MethodGet, "/sheets/"+url.PathEscape(id), nil, http.StatusOK, &out)
	return out, err
}

// do sends body (JSON, if not nil) and decodes the answer into out when its
// status is want; any other status is an *APIError.
func (c *Client) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("sheets: encode the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("sheets: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("sheets: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return fmt.Errorf("sheets: %s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode != want {
		var eb ErrorBody
		if json.Unmarshal(raw, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(raw))
		}
		return &APIError{StatusCode: resp.StatusCode, Message: eb.Error}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("sheets: %s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// IsStatus reports whether err is an *APIError with the given status.
func IsStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == status
}

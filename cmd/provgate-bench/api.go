package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// newClient is an HTTP/1.1 keep-alive client with room for conns idle
// connections, so closed-loop workers each keep theirs. Certificates are
// not verified: the server uses the self-signed one it generated.
func newClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback server with a generated certificate
			MaxIdleConns:        2 * conns,
			MaxIdleConnsPerHost: 2 * conns,
			IdleConnTimeout:     5 * time.Minute,
			DisableCompression:  true,
			// Fiber serves HTTP/1.1 only; an empty map keeps the client
			// from offering h2 at all.
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
		},
	}
}

func basicAuth(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// api sends setup requests to one server as one principal.
type api struct {
	base string // https://host:port
	c    *http.Client
	auth string
}

func (a api) as(auth string) api { a.auth = auth; return a }

// do sends one request; body nil, []byte (sent as is) or a value sent as
// JSON. It fails unless the status is want; out (if not nil) receives the
// decoded JSON reply.
func (a api) do(ctx context.Context, method, path string, body any, want int, out any) (http.Header, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.auth != "" {
		req.Header.Set("Authorization", a.auth)
	}
	res, err := a.c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if res.StatusCode != want {
		return nil, fmt.Errorf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, want, truncate(b, 300))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: decode reply: %w", method, path, err)
		}
	}
	return res.Header, nil
}

// token gets a token for user, authenticated as a.
func (a api) token(ctx context.Context, user string, ttl time.Duration) (string, error) {
	var out struct{ Token string }
	if _, err := a.do(ctx, "GET", "/api/v3/users/"+user+"/token?ttl="+ttl.String(), nil, 200, &out); err != nil {
		return "", err
	}
	if out.Token == "" {
		return "", fmt.Errorf("empty token for %s", user)
	}
	return "Bearer " + out.Token, nil
}

// count is the X-DRP-LIST-FILTER-COUNT of a HEAD list request.
func (a api) count(ctx context.Context, pathAndQuery string) (int, error) {
	h, err := a.do(ctx, "HEAD", pathAndQuery, nil, 200, nil)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(h.Get("X-DRP-LIST-FILTER-COUNT"))
}

// createMachines creates n machines named prefix-00000... with workers
// concurrent requests and returns their UUIDs in name order.
func (a api) createMachines(ctx context.Context, prefix string, n, workers int) ([]string, error) {
	uuids := make([]string, n)
	next := make(chan int)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var m struct{ Uuid string }
				if _, err := a.do(ctx, "POST", "/api/v3/machines", map[string]any{"Name": fmt.Sprintf("%s-%05d", prefix, i)}, 201, &m); err != nil {
					errc <- err
					return
				}
				uuids[i] = m.Uuid
			}
		}()
	}
	var err error
feed:
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case err = <-errc:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return uuids, err
}

// request describes a fixed request sent by a load op.
type request struct {
	Method, URL, Auth, ContentType string
	Body                           []byte
	Want                           int
}

// httpOp sends r (with c) and checks only the status; the body is read to
// the end so the connection is reused.
func httpOp(c *http.Client, r request) op {
	return func(ctx context.Context, _, _ int) error {
		return send(ctx, c, r, nil)
	}
}

// jsonWriteOp is an op that sends, each time, the JSON body build makes for
// the next number of seq: a POST to base with auth, wanting 201, unless build
// changes r (it adds the path to r.URL).
func jsonWriteOp(base, auth string, seq *atomic.Int64, build func(n int64, r *request) any) op {
	c := newClient(1)
	return func(ctx context.Context, _, _ int) error {
		r := request{Method: "POST", URL: base, Auth: auth, ContentType: "application/json", Want: 201}
		body := build(seq.Add(1), &r)
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r.Body = b
		return send(ctx, c, r, nil)
	}
}

func send(ctx context.Context, c *http.Client, r request, out *[]byte) error {
	var rd io.Reader
	if r.Body != nil {
		rd = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, rd)
	if err != nil {
		return err
	}
	if r.Auth != "" {
		req.Header.Set("Authorization", r.Auth)
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out != nil {
		*out, err = io.ReadAll(res.Body)
	} else {
		_, err = io.Copy(io.Discard, res.Body)
	}
	if err != nil {
		return err
	}
	if res.StatusCode != r.Want {
		return fmt.Errorf("%s %s: status %d, want %d", r.Method, r.URL, res.StatusCode, r.Want)
	}
	return nil
}

func truncate(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

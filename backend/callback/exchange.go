package callback

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
)

// newRequest builds one request of the callback service, a callback's or
// an auth's token request: header's values (copied) and body, none when
// nil.
func newRequest(ctx context.Context, method, url string, header http.Header, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = slices.Clone(v)
	}
	return req, nil
}

// roundTrip sends req and reads at most max bytes of the reply, one more
// to tell a longer one, and closes it. With no reply, resp is nil and err
// is why (refusedDestination tells a destination the policy refuses);
// with one, err is a failure reading its body.
func roundTrip(client *http.Client, req *http.Request, max int64) (resp *http.Response, body []byte, err error) {
	resp, err = client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, max+1))
	return resp, body, err
}

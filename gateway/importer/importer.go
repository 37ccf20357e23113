// Package importer loads a JSON array of users or roles, as `drpcli users
// list` and `drpcli roles list` print them, into a running server through
// its import route (POST /api/v3/<users|roles>/import, docs/design.md
// §4.9): each batch is authorized and validated as that many single
// creates, and is written whole or not at all.
package importer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/provgate/provgate/backend"
)

// DefaultBatch is how many objects one request carries unless told.
const DefaultBatch = 500

// Options say where and how to import.
type Options struct {
	// Endpoint is the server's base URL (https://host:8092).
	Endpoint string
	// Authorization is the Authorization header value (Basic or Bearer).
	Authorization string
	// Kind is "users" or "roles"; empty reads it from the items (Claims
	// make roles; Roles, PasswordHash or Password make users).
	Kind string
	// Batch is the number of objects per request (DefaultBatch when 0); at
	// most the server's limit of 1000.
	Batch  int
	Client *http.Client
	// Progress, when set, receives one line per batch written.
	Progress io.Writer
}

// Result says what was imported.
type Result struct {
	Kind    string
	Created int
}

// Import reads the array from r and sends it in batches. It stops at the
// first refused batch: earlier batches stay created, the refused one and
// later ones are not written, and the error names the batch and the
// server's reasons.
func Import(ctx context.Context, r io.Reader, o Options) (Result, error) {
	var items []json.RawMessage
	if err := json.NewDecoder(r).Decode(&items); err != nil {
		return Result{}, fmt.Errorf("reading the import file: want a JSON array of objects: %w", err)
	}
	if len(items) == 0 {
		return Result{}, errors.New("the import file holds no objects")
	}
	kind, err := kindOf(items, o.Kind)
	if err != nil {
		return Result{}, err
	}
	batch := o.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	if batch > 1000 {
		return Result{}, fmt.Errorf("batch %d: at most 1000 objects per request", batch)
	}
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}
	url := strings.TrimRight(o.Endpoint, "/") + "/api/v3/" + kind + "/import"
	res := Result{Kind: kind}
	for start := 0; start < len(items); start += batch {
		end := min(start+batch, len(items))
		body, err := json.Marshal(items[start:end])
		if err != nil {
			return res, err
		}
		if err := send(ctx, client, url, o.Authorization, body); err != nil {
			return res, fmt.Errorf("%s %d to %d of %d refused, nothing of them written (%d created before): %w",
				kind, start+1, end, len(items), res.Created, err)
		}
		res.Created += end - start
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%s: %d of %d created\n", kind, res.Created, len(items))
		}
	}
	return res, nil
}

func send(ctx context.Context, client *http.Client, url, authz string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusCreated {
		return nil
	}
	var e backend.Error
	if json.Unmarshal(reply, &e) == nil && len(e.Messages) > 0 {
		return fmt.Errorf("%s: %s", resp.Status, strings.Join(e.Messages, "; "))
	}
	return fmt.Errorf("%s: %.200s", resp.Status, reply)
}

// kindOf is the kind given, or the one every item's fields name.
func kindOf(items []json.RawMessage, given string) (string, error) {
	if given != "" {
		if !backend.Importable(given) {
			return "", fmt.Errorf("kind %q cannot be imported (users or roles)", given)
		}
		return given, nil
	}
	kind := ""
	for i, item := range items {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(item, &fields); err != nil {
			return "", fmt.Errorf("item %d is not a JSON object", i)
		}
		k := ""
		switch {
		case has(fields, "Claims"):
			k = backend.PrefixRoles
		case has(fields, "Roles") || has(fields, "PasswordHash") || has(fields, "Password"):
			k = backend.PrefixUsers
		default:
			return "", fmt.Errorf("item %d is neither a user nor a role; name the kind with --kind", i)
		}
		if kind != "" && k != kind {
			return "", fmt.Errorf("item %d is one of %s, earlier items are %s: import one kind at a time", i, k, kind)
		}
		kind = k
	}
	return kind, nil
}

func has(fields map[string]json.RawMessage, name string) bool {
	for k := range fields {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

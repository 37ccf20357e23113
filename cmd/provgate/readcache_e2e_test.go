package main

import (
	"strings"
	"testing"
)

// TestE2EReadCache: object reads are served from the read cache, and a
// write never leaves it answering the old object: not a write through the
// same server, and on PostgreSQL not a write through another server sharing
// the database (a replica), a delete, or a delete and create again of the
// same key with the same body (docs/design.md §14.6).
func TestE2EReadCache(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			reader := startE2E(t, db)
			writer := reader
			if db.DSN != "" {
				writer = startE2E(t, db)
			}
			rauth := bearer(reader.Token("rocketskates", admin(), ""))
			wauth := bearer(writer.Token("rocketskates", admin(), ""))
			const uuid = "3e1f1c5e-7d7a-4c38-9a53-0a4f7d2b6c11"
			path := "/machines/" + uuid
			body := map[string]any{"Uuid": uuid, "Name": "rc1", "Description": "first", "Params": map[string]any{"a": 1}}
			writer.Must(201, "POST", "/machines", body, wauth)

			get := func(want int, hdrs ...string) resp {
				t.Helper()
				return reader.Must(want, "GET", path, nil, rauth, hdrs...)
			}
			first := get(200)
			again := get(200)
			if string(first.Body) != string(again.Body) || first.Header.Get("ETag") != again.Header.Get("ETag") {
				t.Fatalf("two reads of an unchanged object differ:\n%s\n%s", first.Body, again.Body)
			}
			if d := first.Map(t)["Description"]; d != "first" {
				t.Fatalf("Description %v", d)
			}

			writer.Must(200, "PATCH", path, `[{"op":"replace","path":"/Description","value":"second"}]`, wauth)
			r := get(200)
			if d := r.Map(t)["Description"]; d != "second" {
				t.Fatalf("read after a write answered %v", d)
			}
			if r.Header.Get("ETag") == first.Header.Get("ETag") {
				t.Fatal("the ETag did not change with the object")
			}
			// The old ETag is not current: the object, not 304.
			if r := get(200, "If-None-Match", first.Header.Get("ETag")); r.Map(t)["Description"] != "second" {
				t.Fatalf("conditional read: %s", r.Body)
			}
			// View options still shape the object.
			if r := reader.Must(200, "GET", path+"?slim=Params", nil, rauth); len(r.Map(t)["Params"].(map[string]any)) != 0 {
				t.Fatalf("slim read: %s", r.Body)
			}
			if r := get(200); len(r.Map(t)["Params"].(map[string]any)) != 1 {
				t.Fatalf("a shaped read changed the cached object: %s", r.Body)
			}

			writer.Must(200, "DELETE", path, nil, wauth)
			get(404)
			// Created again with the first body: the first object's cache
			// entry, if it were still there, must not answer.
			writer.Must(201, "POST", "/machines", body, wauth)
			r = get(200)
			if d := r.Map(t)["Description"]; d != "first" {
				t.Fatalf("read after create again: %v", d)
			}
			if r.Header.Get("ETag") == first.Header.Get("ETag") {
				t.Fatal("an object created again has its first incarnation's ETag")
			}
			if strings.Contains(string(r.Body), `"Secret":"`) && !strings.Contains(string(r.Body), `"Secret":""`) {
				t.Fatalf("a cached read shows the machine's Secret: %s", r.Body)
			}
		})
	}
}

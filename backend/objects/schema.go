package objects

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaCache keeps compiled param schemas keyed by a hash of their JSON, so
// validating many params values does not recompile.
type schemaCache struct {
	mu sync.Mutex
	m  map[[32]byte]*jsonschema.Schema
}

func newSchemaCache() *schemaCache { return &schemaCache{m: map[[32]byte]*jsonschema.Schema{}} }

// noLoader refuses every external $ref: a param schema must never make the
// server read files or fetch URLs.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external references are not allowed: %s", url)
}

// compile compiles a param Schema (draft 4 unless it names another draft via
// $schema, as DRP's content is written for draft 4).
func (c *schemaCache) compile(schema any) (*jsonschema.Schema, error) {
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	c.mu.Lock()
	if sch, ok := c.m[sum]; ok {
		c.mu.Unlock()
		return sch, nil
	}
	c.mu.Unlock()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft4)
	comp.UseLoader(noLoader{})
	const url = "mem:///param-schema.json"
	if err := comp.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := comp.Compile(url)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) > 4096 { // bound memory; schemas are few in practice
		c.m = map[[32]byte]*jsonschema.Schema{}
	}
	c.m[sum] = sch
	c.mu.Unlock()
	return sch, nil
}

// schemaError shortens a compiler or validator error to one line.
func schemaError(err error) string {
	msg := strings.TrimSpace(err.Error())
	msg = strings.ReplaceAll(msg, "mem:///param-schema.json", "schema")
	return strings.Join(strings.Fields(msg), " ")
}

// validateValue checks v against schema (nil schema accepts anything).
func (c *schemaCache) validateValue(schema any, v any) error {
	if schema == nil {
		return nil
	}
	sch, err := c.compile(schema)
	if err != nil {
		return err
	}
	// The validator wants JSON-decoded values; round-trip to normalise Go
	// types (ints, typed slices) into that form.
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	return sch.Validate(doc)
}

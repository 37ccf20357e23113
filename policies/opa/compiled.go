package opa

import (
	"crypto/sha256"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// compiledMax bounds the policies a Compiled holds; the oldest go first.
const compiledMax = 16

// Compiled shares compiled policies between the engines of one process
// that load the same modules: the engines of a test process, each
// starting a server on the embedded policy. Each engine still prepares
// its own queries on its own store, as OPA's server prepares every query
// on one compiler; a compiled ast.Compiler is only read after Compile.
// What is served is what a fresh compilation gives: the modules are the
// whole input of a compilation. Failed compilations are not kept. A
// Compiled is safe for concurrent use; nil compiles every time.
type Compiled struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*ast.Compiler
	order   [][sha256.Size]byte // oldest first
}

// NewCompiled returns an empty Compiled.
func NewCompiled() *Compiled {
	return &Compiled{entries: map[[sha256.Size]byte]*ast.Compiler{}}
}

// compile returns the compiled modules of sources, from c when it holds
// them. The caller holds compileMu.
func (c *Compiled) compile(sources map[string]string) (*ast.Compiler, error) {
	var key [sha256.Size]byte
	if c != nil {
		key = sourcesKey(sources)
		c.mu.Lock()
		comp := c.entries[key]
		c.mu.Unlock()
		if comp != nil {
			return comp, nil
		}
	}
	mods, err := parse(sources)
	if err != nil {
		return nil, policyError("parse policy", err)
	}
	comp := ast.NewCompiler()
	if comp.Compile(mods); comp.Failed() {
		return nil, policyError("compile policy", comp.Errors)
	}
	if c != nil {
		c.mu.Lock()
		if _, ok := c.entries[key]; !ok {
			c.entries[key] = comp
			c.order = append(c.order, key)
			if len(c.order) > compiledMax {
				delete(c.entries, c.order[0])
				c.order = c.order[1:]
			}
		}
		c.mu.Unlock()
	}
	return comp, nil
}

// sourcesKey names a set of modules by their full names and texts.
func sourcesKey(sources map[string]string) [sha256.Size]byte {
	h := sha256.New()
	writeSources(h, sources, func(n string) string { return n })
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

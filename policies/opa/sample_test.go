package opa

import (
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// seedEnv replays a sampled test: the property tests that check a
// stratified sample of their request space draw it from a seed that is
// random per run and logged, so that runs together cover the whole space
// and a failing run is repeated by setting this variable to its seed.
const seedEnv = "PROVGATE_TEST_SEED"

// runSeed is the seed of this run's samples when seedEnv is not set.
var runSeed = rand.Uint64()

// sampleRand returns the random source a sample named name is drawn
// from, and its seed: the seed of seedEnv, else the run's random one,
// logged either way. The name is mixed in, so that the samples of one
// run are independent draws from one seed.
func sampleRand(t *testing.T, name string) (*rand.Rand, uint64) {
	t.Helper()
	seed := runSeed
	if s := os.Getenv(seedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		seed = v
	}
	t.Logf("sample seed %d (%s=%d replays it)", seed, seedEnv, seed)
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64())), seed
}

// strata calls fn with every stratum index in 0..cells-1 and, for each,
// per indexes in 0..n-1: the cells of one row share a random permutation
// of 0..n-1 and take its indexes in turn, so that every index is drawn
// once before any is drawn twice. Where cells*per >= n, each row of cells
// draws every index at least once.
func strata(rng *rand.Rand, cells, per, n int, fn func(cell, index int)) {
	perm := rng.Perm(n)
	k := 0
	for cell := range cells {
		for range per {
			fn(cell, perm[k%n])
			k++
		}
	}
}

// perCell is the fewest draws per cell for cells draws to reach all of n.
func perCell(cells, n int) int {
	return (n + cells - 1) / cells
}

package main

// limits explains, per figure, what limits it when it misses its target.
// The report includes a note only for figures not met in that run. The
// notes come from reading the request path (guard → authn → claims →
// decision → handler) and the figures; revisit them when the code changes.
var limits = map[string]string{}

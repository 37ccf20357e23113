package backend

import (
	"encoding/json"
	"fmt"
)

// EncodeParams encodes params, by name, as JSON values: the form the object
// service hands params across its boundary.
func EncodeParams(p map[string]any) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(p))
	for name, v := range p {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("param %s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}

// DecodeParams decodes params given as JSON values into Go values (numbers
// become float64), as objects hold them in Params and templates read them.
func DecodeParams(p map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(p))
	for name, raw := range p {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("param %s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

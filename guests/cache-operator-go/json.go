package cacheoperator

import (
	"bytes"
	"encoding/json"
)

func jsonOf(value any) ([]byte, error) {
	var out bytes.Buffer
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	err := encoder.Encode(value)
	return out.Bytes(), err
}

func decode(text []byte, into any) error { return json.Unmarshal(text, into) }

package wasmop

import (
	"fmt"
	"sort"
	"strings"
)

// FNV1a64 is the 64-bit FNV-1a hash of text's bytes as 16 hex digits: a
// cheap hash for change detection (the cache-operator's config hash), not
// for security. Inside wasm there are no SHA instructions, so a
// cryptographic hash costs far more.
func FNV1a64(text string) string {
	hash := uint64(0xcbf29ce484222325)
	for i := 0; i < len(text); i++ {
		hash ^= uint64(text[i])
		hash *= 0x100000001b3
	}
	return fmt.Sprintf("%016x", hash)
}

// CanonicalJSON is m as compact JSON with its keys in byte order and
// strings escaped as serde_json escapes them (only '"', '\\' and control
// characters), so that the Rust, TypeScript, Python and Go guests hash
// the same map to the same text.
func CanonicalJSON(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var out strings.Builder
	out.WriteByte('{')
	for i, key := range keys {
		if i > 0 {
			out.WriteByte(',')
		}
		quote(&out, key)
		out.WriteByte(':')
		quote(&out, m[key])
	}
	out.WriteByte('}')
	return out.String()
}

func quote(out *strings.Builder, text string) {
	const hex = "0123456789abcdef"
	out.WriteByte('"')
	for _, c := range text {
		switch {
		case c == '"':
			out.WriteString(`\"`)
		case c == '\\':
			out.WriteString(`\\`)
		case c == '\b':
			out.WriteString(`\b`)
		case c == '\f':
			out.WriteString(`\f`)
		case c == '\n':
			out.WriteString(`\n`)
		case c == '\r':
			out.WriteString(`\r`)
		case c == '\t':
			out.WriteString(`\t`)
		case c < 0x20:
			out.WriteString(`\u00`)
			out.WriteByte(hex[c>>4])
			out.WriteByte(hex[c&0xf])
		default:
			// Text that is not valid UTF-8 (the host sends none) is
			// written with U+FFFD in its place, as a JSON decoder reads it.
			out.WriteRune(c)
		}
	}
	out.WriteByte('"')
}

package token_test

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/token"
)

// Dead-letter reasons are read by operators: they name JSON types, never the
// Go types a body decodes into.
func TestReasonsNameNoGoTypes(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`[1]`:                                   "the body must be a JSON object, not an array",
		`"x"`:                                   "the body must be a JSON object, not a string",
		`{"v":"1","id":"a"}`:                    `field "v" must be an integer, not a string`,
		`{"v":1,"kind":5}`:                      `field "kind" must be a string, not a number`,
		`{"v":1,"kind":"k","max_attempts":1.5}`: `field "max_attempts" must be an integer, not a number`,
		`{"v":1,"id":["a"]}`:                    `field "id" must be a string, not an array`,
		`{"v":1,"kind":"k","payload":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`: "deeper than 10000 levels, the JSON depth limit",
	} {
		_, err := token.Decode(body)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%s) = %v, want it to say %q", body, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "wire") || strings.Contains(err.Error(), "int64") || strings.Contains(err.Error(), "*int")) {
			t.Errorf("Decode(%s) = %v names a Go type", body, err)
		}
		if _, err := token.DecodeSubmission(body, now); err != nil && (strings.Contains(err.Error(), "Wire") || strings.Contains(err.Error(), "wire")) {
			t.Errorf("DecodeSubmission(%s) = %v names a Go type", body, err)
		}
	}
}

// Encoding a payload nested past the depth limit names the limit.
func TestEncodeNamesTheDepthLimit(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	_, err := token.Token{Kind: "k", Payload: []byte(deep)}.Encode()
	if err == nil || !strings.Contains(err.Error(), "deeper than 10000 levels, the JSON depth limit") {
		t.Fatalf("Encode = %v, want an error naming the depth limit", err)
	}
}

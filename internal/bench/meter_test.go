package bench

import (
	"strings"
	"testing"
)

func TestParseWriteNamesWorkflowWrites(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, op, body, want string
	}{
		{"create", "PutItem", `{"Item":{"id":{"S":"a"},"status":{"S":"WAITING"}}}`, "create (WAITING)"},
		{"watch", "UpdateItem", `{"Key":{"id":{"S":"a"}},"UpdateExpression":"ADD #waiters :waiter"}`, "watch"},
		{"notify", "UpdateItem", `{"Key":{"id":{"S":"a"}},"UpdateExpression":"SET #updated_at = :now ADD #ended :ended"}`, "notify"},
		{"notify that cancels", "UpdateItem", `{"Key":{"id":{"S":"a"}},"UpdateExpression":"SET #status = :cancelled ADD #ended :ended"}`, "notify (cancels)"},
		{"suspend", "UpdateItem", `{"Key":{"id":{"S":"a"}},"UpdateExpression":"SET #status = :status, #wait = :wait REMOVE #lease_owner"}`, "suspend"},
		{"heartbeat", "UpdateItem", `{"Key":{"id":{"S":"a"}},"ConditionExpression":"#status = :waiting AND #callback = :nonce AND #beat_until > :now","UpdateExpression":"SET #beat_until = :now + #beat_timeout, #updated_at = :now"}`, "callback heartbeat"},
		{"end wait", "UpdateItem", `{"Key":{"id":{"S":"a"}},"ConditionExpression":"#status = :waiting AND #callback = :nonce","UpdateExpression":"SET #status = :status"}`, "end wait (callback or timeout)"},
		{"resume", "UpdateItem", `{"Key":{"id":{"S":"a"}},"UpdateExpression":"SET #status = :pending REMOVE #ended, #wait_until"}`, "resume"},
		{"resume and claim", "UpdateItem", `{"Key":{"id":{"S":"a"}},"UpdateExpression":"SET #status = :running, #lease_owner = :owner REMOVE #ended"}`, "resume and claim"},
		{"claim", "UpdateItem", `{"Key":{"id":{"S":"a"}},"UpdateExpression":"SET #status = :running, #lease_owner = :owner"}`, "claim"},
		{"finish", "UpdateItem", `{"Key":{"id":{"S":"a"}},"UpdateExpression":"SET #status = :status, #updated_at = :now"}`, "finish or release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := parseWrite(tc.op, []byte(tc.body), "id"); got.kind != tc.want || got.id != "a" {
				t.Errorf("parseWrite = %+v, want kind %q of a", got, tc.want)
			}
		})
	}
}

func TestReadUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, op, req, resp string
		want                float64
	}{
		{"consistent get", "GetItem", `{"ConsistentRead":true}`, `{"Item":{"id":{"S":"a"}}}`, 1},
		{"eventually consistent get", "GetItem", `{}`, `{"Item":{"id":{"S":"a"}}}`, 0.5},
		{"get of 5 KB", "GetItem", `{"ConsistentRead":true}`, `{"Item":{"id":{"S":"` + strings.Repeat("x", 5000) + `"}}}`, 2},
		{"get of nothing", "GetItem", `{"ConsistentRead":true}`, `{}`, 1},
		{"batch with a key not found", "BatchGetItem",
			`{"RequestItems":{"t":{"Keys":[{"id":{"S":"a"}},{"id":{"S":"b"}}]}}}`,
			`{"Responses":{"t":[{"id":{"S":"a"}}]}}`, 1},
		{"query sums its items", "Query", `{}`, `{"Items":[{"id":{"S":"a"}},{"id":{"S":"b"}}]}`, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := readUnits(tc.op, []byte(tc.req), []byte(tc.resp)); got != tc.want {
				t.Errorf("readUnits = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHappyPathCountsWritesTheDesignDoesNotKnow(t *testing.T) {
	t.Parallel()
	w := shape{name: "w", design: map[string]float64{"create (RUNNING)": 1, "finish or release": 1}, designWU: 3}
	for _, tc := range []struct {
		name    string
		byWrite map[string][]float64
		want    float64
		missing int
	}{
		{"as designed", map[string][]float64{"create (RUNNING)": {2, 2}, "finish or release": {1, 1}}, 3, 0},
		{"a retried write whose condition failed", map[string][]float64{"create (RUNNING)": {2, 2}, "finish or release": {1, 1}, "failed condition: claim": {1}}, 3, 0},
		{"a write the design does not make", map[string][]float64{"create (RUNNING)": {2, 2}, "finish or release": {1, 1}, "renew": {1, 1}}, 4, 0},
		{"a designed write that never happened", map[string][]float64{"create (RUNNING)": {2, 2}}, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := workflowResult{w: w, n: 2, counts: Counts{ByWrite: tc.byWrite}}
			if wu, missing := r.happyPath(); wu != tc.want || len(missing) != tc.missing {
				t.Errorf("happyPath = %v, %v; want %v and %d missing", wu, missing, tc.want, tc.missing)
			}
		})
	}
}

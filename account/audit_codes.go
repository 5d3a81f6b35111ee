package account

import (
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddy-model-gateway/gateway/store"
)

// maxBatchName is the longest name a batch of codes may have, in characters.
const maxBatchName = 64

func checkBatchName(name string) error {
	if utf8.RuneCountInString(name) > maxBatchName {
		return inputErrorf("a batch's name must be at most %d characters", maxBatchName)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return inputErrorf("a batch's name must be printable text, such as spring-promo")
		}
	}
	return nil
}

// BatchTarget names a batch of codes in the audit log: its name, or the
// ids it spans when it has none.
func BatchTarget(codes []*store.RedemptionCode) string {
	if len(codes) == 0 {
		return "codes"
	}
	if n := codes[0].Name; n != "" {
		return "batch:" + n
	}
	first, last := codes[0].ID, codes[len(codes)-1].ID
	if first == last {
		return CodeTarget(first)
	}
	return "codes:" + strconv.FormatInt(first, 10) + "-" + strconv.FormatInt(last, 10)
}

// AuditBatch is what the audit log keeps of a batch of codes: how many,
// worth what, and never their text.
func AuditBatch(codes []*store.RedemptionCode) Fields {
	f := Fields{"count": len(codes)}
	if len(codes) == 0 {
		return f
	}
	c := codes[0]
	f["name"], f["quota"] = c.Name, c.Quota
	f["first_id"], f["last_id"] = c.ID, codes[len(codes)-1].ID
	if !c.ExpiresAt.IsZero() {
		f["expires_at"] = c.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if c.Plan != "" {
		f["plan"], f["plan_days"] = c.Plan, c.PlanDays
	}
	return f
}

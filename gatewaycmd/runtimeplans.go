package gatewaycmd

import (
	"context"

	"github.com/caddy-model-gateway/gateway/store"
)

// RuntimePlanKnown says whether the database of driver and dsn keeps an
// enabled plan of that name made in the console or the admin API; one
// that cannot be opened or read keeps none.
func RuntimePlanKnown(driver, dsn, name string) bool {
	st, err := store.Open(driver, dsn)
	if err != nil {
		return false
	}
	defer st.Close()
	items, err := st.ListRuntime(context.Background(), store.RuntimePlan)
	if err != nil {
		return false
	}
	for _, it := range items {
		if it.Name == name && !it.Disabled {
			return true
		}
	}
	return false
}

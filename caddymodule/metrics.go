package caddymodule

// MetricsConfig sets what the gateway's metrics break down by.
type MetricsConfig struct {
	// PerUser adds a user_id label to gateway_requests_total and
	// gateway_cost_units_total: one series per user, so off by default.
	// With it on, each request pays one label lookup (and its allocation).
	PerUser bool `json:"per_user,omitempty"`
}

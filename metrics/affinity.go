package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-model-gateway/gateway/routing"
)

// AffinityMoves are the series of prompt-cache affinity: conversations
// moved off their channel and key, by why, and the bindings held. Moves
// cost a prompt-cache miss each, so a rising count is money.
type AffinityMoves struct {
	moves map[string]prometheus.Counter
}

// NewAffinity registers affinity's series for table t in reg and has t
// count its moves in them.
func NewAffinity(reg prometheus.Registerer, t *routing.Affinity) error {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gateway_affinity_moves_total",
		Help: "Conversations moved off the channel and key they were bound to (a prompt-cache miss each), by reason.",
	}, []string{"reason"})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_affinity_bindings",
		Help: "Conversations bound to a channel and key, expired ones not yet dropped included.",
	}, func() float64 { return float64(t.Len()) })
	for _, c := range []prometheus.Collector{vec, held} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	m := &AffinityMoves{moves: map[string]prometheus.Counter{}}
	for _, r := range routing.MoveReasons {
		m.moves[r] = vec.WithLabelValues(r)
	}
	t.OnMove(m.Moved)
	return nil
}

// Moved counts one move for reason.
func (m *AffinityMoves) Moved(reason string) {
	if c := m.moves[reason]; c != nil {
		c.Inc()
	}
}

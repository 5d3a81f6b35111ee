package account

import (
	"context"
	"sync"

	"github.com/caddy-model-gateway/gateway/store"
)

// PlaygroundTokenName names the token a user's playground requests are
// billed to, so they appear in usage like any other request.
const PlaygroundTokenName = "playground"

// playgroundMu keeps two first playground requests of one user from each
// creating a playground token.
var playgroundMu sync.Mutex

// PlaygroundToken returns userID's playground token, made on first use.
// Its key is thrown away: only the user's web session bills to it.
func PlaygroundToken(ctx context.Context, st store.Store, userID int64) (*store.Token, error) {
	playgroundMu.Lock()
	defer playgroundMu.Unlock()
	tokens, err := st.ListTokens(ctx, userID)
	if err != nil {
		return nil, err
	}
	for _, t := range tokens {
		if t.Name == PlaygroundTokenName {
			return t, nil
		}
	}
	_, t, err := CreateToken(ctx, st, userID, TokenSpec{Name: PlaygroundTokenName})
	return t, err
}

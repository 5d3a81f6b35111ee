package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// identityChannel carries the announcements of migration 0013's triggers,
// 't' and a key's hash or 'u' and a user's id, and of migration 0017's,
// 'c' and a user's id or 'k' and a key's id: a balance credited; and of
// migration 0018's, 'r': runtime configuration changed.
const identityChannel = "gateway_identity"

const (
	// listenPing is how long the listener waits in silence before it asks
	// the server whether the connection still stands: a cut that sends no
	// reset would otherwise leave it waiting for notifications that never
	// come, with the caches back on their TTL.
	listenPing = time.Minute
	// listenBackoff bounds the wait between two attempts to reconnect.
	minListenBackoff = 500 * time.Millisecond
	maxListenBackoff = 30 * time.Second
)

// WatchIdentities follows, on a connection of its own, the changes any
// process commits to keys and users, until ctx ends: changed(hash, 0) for
// a key, changed("", id) for a user (and so every key of theirs), and
// changed("", 0) when announcements may have been missed (the connection
// was lost and is back), so that the caller drops everything it cached.
// A lost connection is reported to failed and made again, with a backoff
// from half a second doubling up to 30s.
func (s *Store) WatchIdentities(ctx context.Context, changed func(keyHash string, userID int64), failed func(error)) {
	backoff := minListenBackoff
	listened := false
	for {
		err := s.listen(ctx, func() {
			if listened {
				changed("", 0)
				s.credit(false, 0)
				s.runtimeChanged()
			}
			listened = true
			backoff = minListenBackoff
		}, changed)
		if ctx.Err() != nil {
			return
		}
		failed(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxListenBackoff)
	}
}

// listen connects, listens, calls ready, then passes on every
// announcement until the connection fails or ctx ends.
func (s *Store) listen(ctx context.Context, ready func(), changed func(string, int64)) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, err := pgx.ConnectConfig(connectCtx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("connecting to listen for key and user changes: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+identityChannel); err != nil {
		return fmt.Errorf("listening for key and user changes: %w", err)
	}
	ready()
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			// a timeout leaves the connection usable
			pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return fmt.Errorf("the connection listening for key and user changes: %w", err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for key and user changes: %w", err)
		}
		if n.Channel == identityChannel && n.Payload == "r" {
			s.runtimeChanged()
			continue
		}
		if n.Channel != identityChannel || len(n.Payload) < 2 {
			continue
		}
		switch what := n.Payload[1:]; n.Payload[0] {
		case 't':
			changed(what, 0)
		case 'u':
			if id, err := strconv.ParseInt(what, 10, 64); err == nil && id != 0 {
				changed("", id)
			}
		case 'c', 'k':
			if id, err := strconv.ParseInt(what, 10, 64); err == nil && id != 0 {
				s.credit(n.Payload[0] == 'k', id)
			}
		}
	}
}

// OnCredit has credited hear, on the connection WatchIdentities listens
// on, every credit any process commits: credited(false, id) for a user's
// balance, credited(true, id) for a key's own limit, and credited(false,
// 0) when announcements may have been missed (the connection is back).
// It hears nothing while WatchIdentities is not running.
func (s *Store) OnCredit(credited func(token bool, id int64)) {
	s.credited.Store(&credited)
}

func (s *Store) credit(token bool, id int64) {
	if f := s.credited.Load(); f != nil {
		(*f)(token, id)
	}
}

// OnRuntimeChange has changed hear, on the connection WatchIdentities
// listens on, every change any process commits to runtime configuration
// (channels, prices, plans), and the connection coming back, when changes
// may have been missed. It hears nothing while WatchIdentities is not
// running.
func (s *Store) OnRuntimeChange(changed func()) {
	s.runtimeHook.Store(&changed)
}

func (s *Store) runtimeChanged() {
	if f := s.runtimeHook.Load(); f != nil {
		(*f)()
	}
}

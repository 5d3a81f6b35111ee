package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// rawTx hands the driver what database/sql's default converter would.
func TestDriverValue(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		in, want any
	}{
		{nil, nil}, {int64(-3), int64(-3)}, {7, int64(7)}, {int32(8), int64(8)}, {1.5, 1.5}, {true, true},
		{"s", "s"}, {now, now}, {sql.NullString{}, nil}, {sql.NullString{String: "k", Valid: true}, "k"},
	} {
		got, err := driverValue(c.in)
		if err != nil || got != c.want {
			t.Errorf("driverValue(%#v) = %#v, %v; want %#v", c.in, got, err, c.want)
		}
	}
	if _, err := driverValue(uint8(1)); err == nil {
		t.Error("a type the store never passes was taken")
	}
}

// A raw transaction whose function fails leaves nothing behind, and the
// connection takes the next transaction.
func TestRawTxRollsBack(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "raw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*Store)
	ctx := context.Background()
	boom := errors.New("boom")
	err = s.inRawTx(ctx, func(tx execer) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO window_spend (window_id, spent) VALUES (?, ?)`, "w", 5); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if err := s.inRawTx(ctx, func(tx execer) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO window_spend (window_id, spent) VALUES (?, ?)`, "v", 6)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.r.QueryRow(`SELECT COUNT(*) FROM window_spend`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows (%v), want the second transaction's one", n, err)
	}
}

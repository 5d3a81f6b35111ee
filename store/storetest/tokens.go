package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

func testTokenRoundTrip(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "owner", 0)
	expires := time.Now().Add(72 * time.Hour)
	tests := []struct {
		name string
		tok  store.Token
	}{
		{"never expires, every model", store.Token{KeyHash: "h1"}},
		{"expiry, models, limit", store.Token{
			KeyHash:    "h2",
			Name:       "ci",
			KeyPrefix:  "sk-ab",
			ExpiresAt:  expires,
			QuotaLimit: 5_000_000,
			Models:     []string{"gpt-4o", "claude-sonnet-4", "odd,name"},
		}},
		{"disabled", store.Token{KeyHash: "h3", Status: store.TokenDisabled}},
		{"management", store.Token{KeyHash: "h4", Management: true, QuotaLimit: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := tt.tok
			tok.UserID = u.ID
			if err := s.CreateToken(ctx, &tok); err != nil {
				t.Fatal(err)
			}
			if tok.ID == 0 || tok.CreatedAt.IsZero() {
				t.Fatalf("id %d created %v", tok.ID, tok.CreatedAt)
			}
			if tt.tok.Status == "" && tok.Status != store.TokenEnabled {
				t.Fatalf("default status %q", tok.Status)
			}
			want := tok
			want.ExpiresAt = ms(tok.ExpiresAt)
			if tok.ExpiresAt.IsZero() {
				want.ExpiresAt = time.Time{}
			}
			for _, get := range []func() (*store.Token, error){
				func() (*store.Token, error) { return s.TokenByHash(ctx, tok.KeyHash) },
				func() (*store.Token, error) { return s.TokenByID(ctx, tok.ID) },
			} {
				got, err := get()
				if err != nil {
					t.Fatal(err)
				}
				if !tokensEqual(got, &want) {
					t.Fatalf("got  %+v\nwant %+v", *got, want)
				}
			}
		})
	}
	list, err := s.ListTokens(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	var hashes []string
	for _, tok := range list {
		hashes = append(hashes, tok.KeyHash)
	}
	if !slices.Equal(hashes, []string{"h1", "h2", "h3", "h4"}) {
		t.Fatalf("list = %v", hashes)
	}
	if list, err := s.ListTokens(ctx, u.ID+100); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("list of nobody = %v, %v; want empty", list, err)
	}
}

func tokensEqual(a, b *store.Token) bool {
	return a.ID == b.ID && a.UserID == b.UserID && a.Name == b.Name && a.KeyHash == b.KeyHash &&
		a.KeyPrefix == b.KeyPrefix && a.Status == b.Status && a.ExpiresAt.Equal(b.ExpiresAt) &&
		a.ExpiresAt.IsZero() == b.ExpiresAt.IsZero() && a.QuotaLimit == b.QuotaLimit &&
		a.UsedQuota == b.UsedQuota && slices.Equal(a.Models, b.Models) && a.CreatedAt.Equal(b.CreatedAt) &&
		a.Management == b.Management
}

func testTokenErrors(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "owner", 0)
	mustToken(t, s, u.ID, "taken")
	tests := []struct {
		name string
		tok  store.Token
		want error
	}{
		{"duplicate hash", store.Token{UserID: u.ID, KeyHash: "taken"}, store.ErrConflict},
		{"no such user", store.Token{UserID: u.ID + 1, KeyHash: "fresh"}, store.ErrNotFound},
		{"empty hash", store.Token{UserID: u.ID}, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.CreateToken(ctx, &tt.tok)
			if err == nil || (tt.want != errAny && !errors.Is(err, tt.want)) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := s.TokenByHash(ctx, "missing"); !isNotFound(err) {
		t.Fatalf("by hash: %v", err)
	}
	if _, err := s.TokenByID(ctx, 999); !isNotFound(err) {
		t.Fatalf("by id: %v", err)
	}
	if err := s.SetTokenStatus(ctx, 999, store.TokenDisabled); !isNotFound(err) {
		t.Fatalf("set status: %v", err)
	}
}

func testSetTokenStatus(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "owner", 0)
	tok := mustToken(t, s, u.ID, "k1")
	for _, status := range []string{store.TokenDisabled, store.TokenEnabled, store.TokenDisabled} {
		if err := s.SetTokenStatus(ctx, tok.ID, status); err != nil {
			t.Fatal(err)
		}
		got, err := s.TokenByID(ctx, tok.ID)
		if err != nil || got.Status != status {
			t.Fatalf("status = %v, %v; want %s", got, err, status)
		}
	}
}

func testTokenQuotaLimitAndUse(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "owner", 1_000_000)
	tok := &store.Token{UserID: u.ID, KeyHash: "lim", QuotaLimit: 10_000}
	if err := s.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	err := s.SettleBatch(ctx, []*store.UsageLog{
		{UserID: u.ID, TokenID: tok.ID, Cost: 2_500},
		{UserID: u.ID, TokenID: tok.ID, Cost: 1_250},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.TokenByHash(ctx, "lim")
	if err != nil {
		t.Fatal(err)
	}
	// The store keeps the limit and the spend; enforcing it is the caller's.
	if got.QuotaLimit != 10_000 || got.UsedQuota != 3_750 {
		t.Fatalf("limit %d used %d", got.QuotaLimit, got.UsedQuota)
	}
}

// testCreateTokenFrom: a key made from a limited key takes its limit from
// that key's, in one step: keys made from it together have no more than
// it had left, it keeps a limit (0 would be none), and a refusal makes
// nothing.
func testCreateTokenFrom(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "owner", 0)
	other := mustUser(t, s, "other", 0)
	parent := &store.Token{UserID: u.ID, KeyHash: "parent", QuotaLimit: 1000, Management: true}
	if err := s.CreateToken(ctx, parent); err != nil {
		t.Fatal(err)
	}
	if err := s.SettleBatch(ctx, []*store.UsageLog{{UserID: u.ID, TokenID: parent.ID, Cost: 300}}); err != nil {
		t.Fatal(err)
	}
	child := &store.Token{UserID: u.ID, KeyHash: "child-1", QuotaLimit: 400}
	if err := s.CreateTokenFrom(ctx, child, parent.ID); err != nil {
		t.Fatal(err)
	}
	got, err := s.TokenByID(ctx, parent.ID)
	if err != nil || got.QuotaLimit != 600 {
		t.Fatalf("the parent's limit after giving 400: %+v, %v; want 600", got, err)
	}
	if c, err := s.TokenByHash(ctx, "child-1"); err != nil || c.QuotaLimit != 400 || c.ID != child.ID {
		t.Fatalf("the child: %+v, %v", c, err)
	}
	// 300 left: 301 is too much, and so is all of it when nothing was spent
	for _, tc := range []struct {
		limit  int64
		parent int64
		user   int64
	}{{301, parent.ID, u.ID}, {400, parent.ID, other.ID}, {1, 99999, u.ID}} {
		err := s.CreateTokenFrom(ctx, &store.Token{UserID: tc.user, KeyHash: fmt.Sprint("refused-", tc.limit, "-", tc.user), QuotaLimit: tc.limit}, tc.parent)
		if !errors.Is(err, store.ErrInsufficientQuota) {
			t.Errorf("limit %d from token %d as user %d: %v, want ErrInsufficientQuota", tc.limit, tc.parent, tc.user, err)
		}
	}
	if err := s.CreateTokenFrom(ctx, &store.Token{UserID: u.ID, KeyHash: "child-2", QuotaLimit: 300}, parent.ID); err != nil {
		t.Fatalf("the last of what it had left: %v", err)
	}
	fresh := &store.Token{UserID: u.ID, KeyHash: "fresh", QuotaLimit: 5}
	if err := s.CreateToken(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTokenFrom(ctx, &store.Token{UserID: u.ID, KeyHash: "all-of-fresh", QuotaLimit: 5}, fresh.ID); !errors.Is(err, store.ErrInsufficientQuota) {
		t.Fatalf("all of an unspent limit (which would leave 0, no limit): %v", err)
	}
	list, err := s.ListTokens(ctx, u.ID)
	if err != nil || len(list) != 4 {
		t.Fatalf("tokens after the refusals: %d, %v; want parent, two children and fresh", len(list), err)
	}
	if got, _ := s.TokenByID(ctx, parent.ID); got.QuotaLimit != 300 || got.QuotaLimit-got.UsedQuota != 0 {
		t.Fatalf("the parent after giving all it had left: %+v", got)
	}
}

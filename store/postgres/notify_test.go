package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/postgres"
)

// TestWatchIdentities: what one process commits to a key or a user is
// announced to another's watcher, in commit order; a change of money alone
// is not.
func TestWatchIdentities(t *testing.T) {
	dsn := postgres.NewTestDatabase(t)
	writer, watcher := openAt(t, dsn), openAt(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	heard := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		watcher.(*postgres.Store).WatchIdentities(ctx, func(keyHash string, userID int64) {
			heard <- fmt.Sprintf("%s/%d", keyHash, userID)
		}, func(err error) { t.Errorf("the watcher lost its connection: %v", err) })
	}()
	t.Cleanup(func() { cancel(); <-done })

	u := &store.User{Username: "ann", Role: store.RoleUser, Status: store.UserEnabled}
	if err := writer.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		t.Helper()
		select {
		case h := <-heard:
			return h
		case <-time.After(time.Minute):
			t.Fatal("no announcement within a minute")
			return ""
		}
	}
	// the watcher hears what is committed once it listens
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for listening := 0; listening == 0; time.Sleep(10 * time.Millisecond) {
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN gateway_identity'`).Scan(&listening); err != nil {
			t.Fatal(err)
		}
	}
	if err := writer.SetUserStatus(context.Background(), u.ID, store.UserDisabled); err != nil {
		t.Fatal(err)
	}
	if h := next(); h != fmt.Sprintf("/%d", u.ID) {
		t.Fatalf("after the user was disabled, heard %q", h)
	}
	// money is not announced: the next thing heard is the key
	if err := writer.AddQuota(context.Background(), u.ID, 1000); err != nil {
		t.Fatal(err)
	}
	tok := &store.Token{UserID: u.ID, Name: "main", KeyHash: "hash-1", Status: store.TokenEnabled}
	if err := writer.CreateToken(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if h := next(); h != "hash-1/0" {
		t.Fatalf("after a quota change and a new key, heard %q first, want the key", h)
	}
	if err := writer.SetTokenStatus(context.Background(), tok.ID, store.TokenDisabled); err != nil {
		t.Fatal(err)
	}
	if h := next(); h != "hash-1/0" {
		t.Fatalf("after the key was disabled, heard %q", h)
	}
	if err := writer.SetUserStatus(context.Background(), u.ID, store.UserEnabled); err != nil {
		t.Fatal(err)
	}
	if h := next(); h != fmt.Sprintf("/%d", u.ID) {
		t.Fatalf("after the user was enabled again, heard %q", h)
	}
	if err := writer.DeleteToken(context.Background(), u.ID, tok.ID); err != nil {
		t.Fatal(err)
	}
	if h := next(); h != "hash-1/0" {
		t.Fatalf("after the key was deleted, heard %q", h)
	}
}

// TestWatchRuntimeChanges: a channel made, changed or deleted by one
// process is announced to another's watcher; its test result kept is not.
func TestWatchRuntimeChanges(t *testing.T) {
	dsn := postgres.NewTestDatabase(t)
	writer, watcher := openAt(t, dsn), openAt(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	heard := make(chan struct{}, 16)
	done := make(chan struct{})
	watcher.(*postgres.Store).OnRuntimeChange(func() { heard <- struct{}{} })
	go func() {
		defer close(done)
		watcher.(*postgres.Store).WatchIdentities(ctx, func(string, int64) {},
			func(err error) { t.Errorf("the watcher lost its connection: %v", err) })
	}()
	t.Cleanup(func() { cancel(); <-done })
	// once the watcher listens, a change is heard
	deadline := time.After(10 * time.Second)
	for n := 0; ; n++ {
		if err := writer.PutRuntime(ctx, &store.RuntimeItem{Kind: store.RuntimePlan, Name: fmt.Sprint("probe", n), Config: `{}`}, false); err != nil {
			t.Fatal(err)
		}
		select {
		case <-heard:
		case <-time.After(100 * time.Millisecond):
			continue
		case <-deadline:
			t.Fatal("the watcher never listened")
		}
		break
	}
	// a probe heard late (sent just after its wait ended) is drained too
	for drained := false; !drained; {
		select {
		case <-heard:
		case <-time.After(500 * time.Millisecond):
			drained = true
		}
	}
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-heard:
			if !want {
				t.Fatalf("%s was announced", what)
			}
		case <-time.After(time.Second):
			if want {
				t.Fatalf("%s was not announced", what)
			}
		}
	}
	it := &store.RuntimeItem{Kind: store.RuntimeChannel, Name: "east", Config: `{}`}
	if err := writer.PutRuntime(ctx, it, false); err != nil {
		t.Fatal(err)
	}
	expect("a channel made", true)
	if err := writer.SetRuntimeTest(ctx, store.RuntimeChannel, "east", `{"ok":true}`); err != nil {
		t.Fatal(err)
	}
	expect("a test result kept", false)
	it.Disabled = true
	if err := writer.PutRuntime(ctx, it, true); err != nil {
		t.Fatal(err)
	}
	expect("a channel disabled", true)
	if err := writer.DeleteRuntime(ctx, store.RuntimeChannel, "east"); err != nil {
		t.Fatal(err)
	}
	expect("a channel deleted", true)
}

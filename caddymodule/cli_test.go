package caddymodule

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCLIFindsItsDatabase: the operator's commands find the config as
// 'caddy run' does (--config, else ./Caddyfile); with neither, the default
// database if one is there, and never a new one on a guess.
func TestCLIFindsItsDatabase(t *testing.T) {
	find := func(args ...string) (DatabaseConfig, string, error) {
		t.Helper()
		cmd := &cobra.Command{Use: "gateway"}
		cmd.Flags().StringP("config", "c", "", "")
		cmd.Flags().String("adapter", "", "")
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.SetErr(&stderr)
		dbc, _, err := cliDatabase(cmd)
		return dbc, stderr.String(), err
	}
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(t.TempDir())

	if _, _, err := find(); err == nil || !strings.Contains(err.Error(), "pass --config") {
		t.Errorf("no config and no database: %v, want told to pass --config", err)
	}
	if _, err := os.Stat("data"); err == nil {
		t.Error("looking for the default database created its directory")
	}

	write(defaultDSN, "")
	dbc, stderr, err := find()
	if err != nil || dbc.Driver != "sqlite" || dbc.DSN != defaultDSN || !strings.Contains(stderr, "using the default database") {
		t.Errorf("no config beside the default database: %+v, %q, %v; want it, said on stderr", dbc, stderr, err)
	}

	write("Caddyfile", "{\n\tgateway {\n\t\tdatabase sqlite {$CLI_TEST_DB:./here.db}\n\t}\n}\n")
	t.Setenv("CLI_TEST_DB", "./from-env.db")
	if dbc, stderr, err = find(); err != nil || dbc.DSN != "./from-env.db" || stderr != "" {
		t.Errorf("./Caddyfile: %+v, %q, %v; want the database it names", dbc, stderr, err)
	}

	write("conf/gateway.json", `{"apps":{"gateway":{"database":{"driver":"sqlite","dsn":"{env.CLI_TEST_DB}"}}}}`)
	if dbc, _, err = find("--config", "conf/gateway.json"); err != nil || dbc.DSN != "./from-env.db" {
		t.Errorf("--config conf/gateway.json: %+v, %v; want its database, placeholders replaced", dbc, err)
	}
	if _, _, err = find("--adapter", "caddyfile"); err == nil || !strings.Contains(err.Error(), "--adapter needs --config") {
		t.Errorf("--adapter alone: %v", err)
	}
	if _, _, err = find("--config", "missing.caddyfile"); err == nil || !strings.Contains(err.Error(), "pass --config") {
		t.Errorf("a --config that does not exist: %v", err)
	}
}

package integration

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// sqliteOnly are the tests about SQLite itself: they reach its files or
// hold its write lock, so a PostgreSQL run (GATEWAY_TEST_DB=postgres,
// make test-postgres) skips them, saying why, before they start a
// gateway. Tests that inject disk faults below SQLite
// (StartWithDiskFaults) are skipped by the harness itself.
var sqliteOnly = map[string]string{
	"TestDatabaseLockedMidLoad": "it holds SQLite's database-wide write lock (LockDatabase), which PostgreSQL has no counterpart of; " +
		"a server that goes down mid-run is TestPostgresDownMidRun's",
	"TestJournalUnwritableRefusesPricedRequests": "it holds SQLite's write lock (LockDatabase) to make the database refuse rows; " +
		"TestPostgresDownMidRun stops the server instead",
	"TestAccountDatabaseFilesPrivate": "it checks the modes of SQLite's database and WAL files; " +
		"a PostgreSQL database's files are the server's",
	"TestAccountDatabaseFilesMadePrivate": "it checks that SQLite's database and WAL files an older gateway left 0644 are made private; " +
		"a PostgreSQL database's files are the server's",
	"TestHealthWhenTheStoreRefusesWrites": "it holds SQLite's write lock from a connection of its own; " +
		"a PostgreSQL server that goes down is TestPostgresDownMidRun's",
	"TestReloadChangesDatabaseUnderLoad": "it copies the SQLite file (VACUUM INTO) to have a second database to reload to",
	"TestCLIRecoveryCommandWorksAsPrinted": "it types the printed command where the default SQLite file (./data/gateway.db) is and no Caddyfile is; " +
		"a PostgreSQL database is found only through the Caddyfile, and the command then says to pass --config",
}

func init() {
	for name, why := range sqliteOnly {
		gatewaytest.SQLiteOnly(name, why)
	}
}

// TestSQLiteOnlyNamesExist: every test named in sqliteOnly is a test of
// this package, so a renamed test is not silently run on PostgreSQL.
func TestSQLiteOnlyNamesExist(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				funcs[fn.Name.Name] = true
			}
		}
	}
	for name := range sqliteOnly {
		if !funcs[name] {
			t.Errorf("sqliteOnly names %s, which is no test of this package", name)
		}
	}
}

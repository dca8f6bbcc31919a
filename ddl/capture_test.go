package ddl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCaptureTableRenames(t *testing.T) {
	stmt, err := CaptureTable("Ckpt_2")
	require.NoError(t, err)
	assert.Contains(t, stmt, "CREATE TABLE Ckpt_2 (")
	assert.Contains(t, stmt, "CONSTRAINT Ckpt_2StateIsKnown")
	assert.NotContains(t, stmt, DefaultCaptureTable)
	assert.Contains(t, stmt, "PRIMARY KEY (Stream, PartitionToken)")

	stmts, err := CaptureStatements(DefaultCaptureTable)
	require.NoError(t, err)
	require.Len(t, stmts, 1)
	assert.NotContains(t, stmts[0], "--")
	assert.True(t, strings.HasPrefix(stmts[0], "CREATE TABLE CaptureCheckpoints ("))

	_, err = CaptureTable("bad-name")
	assert.Error(t, err)
	_, err = CaptureStatements("")
	assert.Error(t, err)
}

func TestChangeStream(t *testing.T) {
	stmt, err := ChangeStream("Orders_CS", "Orders", "OrderItems")
	require.NoError(t, err)
	assert.Equal(t, "CREATE CHANGE STREAM Orders_CS FOR Orders, OrderItems", stmt)

	for name, args := range map[string][]string{
		"bad stream":      {"cs;DROP", "T"},
		"no table":        {"CS"},
		"bad table":       {"CS", "T1", "T 2"},
		"duplicate table": {"CS", "T1", "t1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ChangeStream(args[0], args[1:]...)
			assert.Error(t, err)
		})
	}
}

func TestCaptureUpgradeAddsTheDeclaredLease(t *testing.T) {
	stmts, err := CaptureUpgrade("Ckpt")
	require.NoError(t, err)
	assert.Equal(t, []string{"ALTER TABLE Ckpt ADD COLUMN LeaseMicros INT64"}, stmts)
	stmts, err = PostgreSQL.CaptureUpgrade("Ckpt")
	require.NoError(t, err)
	assert.Equal(t, []string{`ALTER TABLE "Ckpt" ADD COLUMN "LeaseMicros" bigint`}, stmts)
	_, err = GoogleSQL.CaptureUpgrade("bad-name")
	assert.Error(t, err)
}

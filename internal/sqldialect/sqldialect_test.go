package sqldialect

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/spanmutex/spanmutex/ddl"
)

func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		order          []string
	}{
		{"quotes and params in order of first use",
			"SELECT m.`Name` FROM `Mutexes` AS m WHERE m.`Name` = @name AND m.`Token` > @token OR m.`Owner` = @name",
			`SELECT m."Name" FROM "Mutexes" AS m WHERE m."Name" = $1 AND m."Token" > $2 OR m."Owner" = $1`,
			[]string{"name", "token"}},
		{"clock functions",
			"UPDATE `T` SET `At` = PENDING_COMMIT_TIMESTAMP() WHERE `At` < CURRENT_TIMESTAMP()",
			`UPDATE "T" SET "At" = SPANNER.PENDING_COMMIT_TIMESTAMP() WHERE "At" < CURRENT_TIMESTAMP`, nil},
		{"string literals untouched",
			"SELECT 'a@b `c` CURRENT_TIMESTAMP()' FROM `T` WHERE `S` != 'finished' AND `X` = @x",
			`SELECT 'a@b ` + "`c`" + ` CURRENT_TIMESTAMP()' FROM "T" WHERE "S" != 'finished' AND "X" = $1`,
			[]string{"x"}},
		{"array membership",
			"SELECT 1 FROM `T` AS p WHERE p.`Token` IN UNNEST(c.`Parents`)",
			`SELECT 1 FROM "T" AS p WHERE p."Token" = ANY(c."Parents")`, nil},
		{"index hint",
			"SELECT `A` FROM `R`@{FORCE_INDEX=`RByResource`} WHERE `Resource` = @resource",
			`SELECT "A" FROM "R"/*@ FORCE_INDEX="RByResource" */ WHERE "Resource" = $1`,
			[]string{"resource"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, order := Translate(tc.in)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.order, order)
		})
	}
}

func TestStatementRenamesParams(t *testing.T) {
	at := time.Unix(1, 0)
	g := Statement(ddl.GoogleSQL, "SELECT 1 FROM `T` WHERE `A` = @a AND `B` = @b", map[string]any{"a": 1, "b": at})
	assert.Equal(t, "SELECT 1 FROM `T` WHERE `A` = @a AND `B` = @b", g.SQL)
	assert.Equal(t, map[string]any{"a": 1, "b": at}, g.Params)
	p := Statement(ddl.PostgreSQL, "SELECT 1 FROM `T` WHERE `B` = @b AND `A` = @a", map[string]any{"a": 1, "b": at})
	assert.Equal(t, `SELECT 1 FROM "T" WHERE "B" = $1 AND "A" = $2`, p.SQL)
	assert.Equal(t, map[string]any{"p1": at, "p2": 1}, p.Params)
}

func TestSubMicros(t *testing.T) {
	assert.Equal(t, "TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 4 * @l MICROSECOND)", SubMicros(ddl.GoogleSQL, "CURRENT_TIMESTAMP()", "4 * @l"))
	pg, _ := Translate(SubMicros(ddl.PostgreSQL, "CURRENT_TIMESTAMP()", "4 * @l"))
	assert.Equal(t, "spanner.timestamptz_subtract(CURRENT_TIMESTAMP, (4 * $1)::text || ' microseconds')", pg)
}

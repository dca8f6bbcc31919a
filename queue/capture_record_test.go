package queue

import (
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"
)

// Builders of the ChangeRecord column's type and value, in the shape the
// emulator (and Spanner, for GoogleSQL databases) returns.

func typ(code sppb.TypeCode) *sppb.Type { return &sppb.Type{Code: code} }

func arrayOf(elem *sppb.Type) *sppb.Type {
	return &sppb.Type{Code: sppb.TypeCode_ARRAY, ArrayElementType: elem}
}

func structOf(namesAndTypes ...any) *sppb.Type {
	st := &sppb.StructType{}
	for i := 0; i < len(namesAndTypes); i += 2 {
		st.Fields = append(st.Fields, &sppb.StructType_Field{Name: namesAndTypes[i].(string), Type: namesAndTypes[i+1].(*sppb.Type)})
	}
	return &sppb.Type{Code: sppb.TypeCode_STRUCT, StructType: st}
}

func list(vs ...*structpb.Value) *structpb.Value {
	return structpb.NewListValue(&structpb.ListValue{Values: vs})
}

func str(s string) *structpb.Value { return structpb.NewStringValue(s) }

// dataChangeType has the fields the emulator returns, plus one it does not
// (future_field), which the decoder must ignore.
var dataChangeType = structOf(
	"commit_timestamp", typ(sppb.TypeCode_TIMESTAMP),
	"record_sequence", typ(sppb.TypeCode_STRING),
	"server_transaction_id", typ(sppb.TypeCode_STRING),
	"is_last_record_in_transaction_in_partition", typ(sppb.TypeCode_BOOL),
	"table_name", typ(sppb.TypeCode_STRING),
	"column_types", arrayOf(structOf("name", typ(sppb.TypeCode_STRING), "type", typ(sppb.TypeCode_JSON),
		"is_primary_key", typ(sppb.TypeCode_BOOL), "ordinal_position", typ(sppb.TypeCode_INT64))),
	"mods", arrayOf(structOf("keys", typ(sppb.TypeCode_JSON), "new_values", typ(sppb.TypeCode_JSON), "old_values", typ(sppb.TypeCode_JSON))),
	"mod_type", typ(sppb.TypeCode_STRING),
	"value_capture_type", typ(sppb.TypeCode_STRING),
	"number_of_records_in_transaction", typ(sppb.TypeCode_INT64),
	"number_of_partitions_in_transaction", typ(sppb.TypeCode_INT64),
	"transaction_tag", typ(sppb.TypeCode_STRING),
	"is_system_transaction", typ(sppb.TypeCode_BOOL),
	"future_field", typ(sppb.TypeCode_STRING),
)

var changeRecordType = arrayOf(structOf(
	"data_change_record", arrayOf(dataChangeType),
	"heartbeat_record", arrayOf(structOf("timestamp", typ(sppb.TypeCode_TIMESTAMP))),
	"child_partitions_record", arrayOf(structOf(
		"start_timestamp", typ(sppb.TypeCode_TIMESTAMP),
		"record_sequence", typ(sppb.TypeCode_STRING),
		"child_partitions", arrayOf(structOf("token", typ(sppb.TypeCode_STRING), "parent_partition_tokens", arrayOf(typ(sppb.TypeCode_STRING)))),
	)),
))

func dataChangeValue(txid, seq, mod string, mods ...*structpb.Value) *structpb.Value {
	return list(
		str("2026-11-22T03:11:10.325059Z"), str(seq), str(txid), structpb.NewBoolValue(true), str("Orders"),
		list(list(str("OrderID"), str(`{"code":"STRING"}`), structpb.NewBoolValue(true), str("1"))),
		list(mods...),
		str(mod), str("OLD_AND_NEW_VALUES"), str("2"), str("1"), str("tag-1"), structpb.NewBoolValue(false),
		str("something new"),
	)
}

func TestCaptureDecodesChangeRecords(t *testing.T) {
	col := spanner.GenericColumnValue{Type: changeRecordType, Value: list(
		// One ChangeRecord row holds one record per element.
		list(list(dataChangeValue("tx-9", "00000001", "UPDATE",
			list(str(`{"OrderID":"a"}`), str(`{"Amount":"5"}`), str(`{"Amount":"1"}`)),
			list(str(`{"OrderID":"b"}`), str(`{"Amount":"6"}`), structpb.NewNullValue()),
		)), list(), list()),
		list(list(), list(list(str("2026-11-22T03:11:11.41533943Z"))), list()),
		list(list(), list(), list(list(str("2026-11-22T03:11:29.925309Z"), str("00000000"),
			list(list(str("child-token"), list(str("parent-a"), str("parent-b"))))))),
	)}
	recs, err := decodeChangeRecord(col)
	require.NoError(t, err)
	require.Len(t, recs, 3)

	d := recs[0].Data
	require.NotNil(t, d)
	require.Equal(t, time.Date(2026, 11, 22, 3, 11, 10, 325059000, time.UTC), d.CommitTimestamp)
	require.Equal(t, "tx-9", d.ServerTransactionID)
	require.Equal(t, "00000001", d.RecordSequence)
	require.Equal(t, int64(2), d.NumberOfRecordsInTransaction)
	require.Equal(t, "tag-1", d.TransactionTag)
	changes := d.changes("Orders_CS")
	require.Len(t, changes, 2)
	require.Equal(t, Change{
		Stream: "Orders_CS", Table: "Orders", Mod: ModUpdate,
		Keys: `{"OrderID":"b"}`, NewValues: `{"Amount":"6"}`, OldValues: "{}",
		CommitTimestamp: d.CommitTimestamp, ServerTransactionID: "tx-9", RecordSequence: "00000001", ModIndex: 1,
		ValueCaptureType: "OLD_AND_NEW_VALUES", TransactionTag: "tag-1",
	}, changes[1], "a NULL JSON reads as {}")

	require.NotNil(t, recs[1].Heartbeat)
	require.Equal(t, time.Date(2026, 11, 22, 3, 11, 11, 415339430, time.UTC), *recs[1].Heartbeat)

	kids := recs[2].Children
	require.NotNil(t, kids)
	require.Equal(t, []childPartition{{Token: "child-token", Parents: []string{"parent-a", "parent-b"}}}, kids.Children)
}

// A PostgreSQL database's stream returns one JSONB record per row, with the
// fields of GoogleSQL's STRUCTs and the mods' keys and values as JSON
// objects; they decode to the same records.
func TestCaptureDecodesJSONChangeRecords(t *testing.T) {
	decode := func(text string) csRecord {
		t.Helper()
		recs, err := decodeChangeRecord(spanner.GenericColumnValue{Type: typ(sppb.TypeCode_JSON), Value: str(text)})
		require.NoError(t, err)
		require.Len(t, recs, 1)
		return recs[0]
	}
	d := decode(`{"data_change_record":{"commit_timestamp":"2026-11-22T03:11:11.415339430+00:00","record_sequence":"00000001",
		"server_transaction_id":"tx-9","is_last_record_in_transaction_in_partition":true,"table_name":"Orders",
		"column_types":[{"name":"OrderID","type":{"code":"STRING"},"is_primary_key":true}],
		"mods":[{"keys":{"OrderID": "a"},"new_values":{"Amount":5},"old_values":{}},{"keys":{"OrderID":"b"},"new_values":null}],
		"mod_type":"UPDATE","value_capture_type":"OLD_AND_NEW_VALUES","number_of_records_in_transaction":1,
		"number_of_partitions_in_transaction":1,"transaction_tag":"tag-1","is_system_transaction":false,"unknown_field":7}}`).Data
	require.NotNil(t, d)
	changes := d.changes("Orders_CS")
	require.Len(t, changes, 2)
	require.Equal(t, Change{
		Stream: "Orders_CS", Table: "Orders", Mod: ModUpdate,
		Keys: `{"OrderID":"a"}`, NewValues: `{"Amount":5}`, OldValues: "{}",
		CommitTimestamp: time.Date(2026, 11, 22, 3, 11, 11, 415339430, time.UTC), ServerTransactionID: "tx-9", RecordSequence: "00000001",
		ValueCaptureType: "OLD_AND_NEW_VALUES", TransactionTag: "tag-1",
	}, changes[0], "keys compacted; unknown fields ignored")
	require.Equal(t, "{}", changes[1].NewValues, "a null JSON reads as {}")
	require.Equal(t, int64(1), d.NumberOfRecordsInTransaction)

	hb := decode(`{"heartbeat_record":{"timestamp":"2026-11-22T03:11:11.415339430+00:00"}}`).Heartbeat
	require.NotNil(t, hb)
	require.Equal(t, time.Date(2026, 11, 22, 3, 11, 11, 415339430, time.UTC), hb.UTC())

	kids := decode(`{"child_partitions_record":{"start_timestamp":"2026-11-22T03:11:11Z","record_sequence":"00000000",
		"child_partitions":[{"token":"child-token","parent_partition_tokens":["parent-a","parent-b"]}]}}`).Children
	require.NotNil(t, kids)
	require.Equal(t, []childPartition{{Token: "child-token", Parents: []string{"parent-a", "parent-b"}}}, kids.Children)
}

func TestCaptureDecodeRejectsWhatItCannotRead(t *testing.T) {
	for name, col := range map[string]spanner.GenericColumnValue{
		"empty JSON data change record": {Type: typ(sppb.TypeCode_JSON), Value: str(`{"data_change_record":{}}`)},
		"JSON of no record":             {Type: typ(sppb.TypeCode_JSON), Value: str(`{"other_record":{}}`)},
		"not JSON":                      {Type: typ(sppb.TypeCode_JSON), Value: str(`{`)},
		"empty record":                  {Type: changeRecordType, Value: list(list(list(), list(), list()))},
		"no transaction id": {Type: changeRecordType, Value: list(list(list(dataChangeValue("", "00000001", "INSERT",
			list(str(`{"OrderID":"a"}`), str(`{}`), str(`{}`)))), list(), list()))},
		"unknown mod type": {Type: changeRecordType, Value: list(list(list(dataChangeValue("tx", "00000001", "UPSERT",
			list(str(`{"OrderID":"a"}`), str(`{}`), str(`{}`)))), list(), list()))},
		"bad timestamp": {Type: changeRecordType, Value: list(list(list(), list(list(str("yesterday"))), list()))},
		"short struct":  {Type: changeRecordType, Value: list(list(list(), list()))},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeChangeRecord(col)
			require.ErrorIs(t, err, ErrUnsupportedRecord)
		})
	}
}

func TestCaptureRequestIDIsDeterministicAndDistinct(t *testing.T) {
	base := Change{
		Stream: "Orders_CS", Table: "Orders", Mod: ModUpdate, Keys: `{"OrderID":"a"}`,
		CommitTimestamp:     time.Date(2026, 11, 22, 3, 11, 10, 325059000, time.UTC),
		ServerTransactionID: "tx-9", RecordSequence: "00000001", ModIndex: 1,
	}
	id := CaptureRequestID(base, 0)
	require.Len(t, id, MaxIDLength)
	require.True(t, strings.HasPrefix(id, "cs-"))
	require.Empty(t, Request{ID: id, Kind: KindCreate, Resource: "r"}.validate(DefaultMaxPayload), "a valid request id")

	same := base
	same.NewValues, same.OldValues = `{"Amount":"9"}`, `{"Amount":"1"}` // not part of the identity
	same.CommitTimestamp = base.CommitTimestamp.In(time.FixedZone("X", 3600))
	require.Equal(t, id, CaptureRequestID(same, 0), "the same change gives the same id")

	seen := map[string]string{id: "base"}
	for name, ch := range map[string]func(*Change){
		"stream":      func(c *Change) { c.Stream = "Other_CS" },
		"table":       func(c *Change) { c.Table = "Other" },
		"keys":        func(c *Change) { c.Keys = `{"OrderID":"b"}` },
		"commit":      func(c *Change) { c.CommitTimestamp = c.CommitTimestamp.Add(time.Microsecond) },
		"transaction": func(c *Change) { c.ServerTransactionID = "tx-10" },
		"sequence":    func(c *Change) { c.RecordSequence = "00000002" },
		"mod index":   func(c *Change) { c.ModIndex = 2 },
		// Length prefixes keep field boundaries: "tx-9"+"00000001" is not
		// "tx-90"+"0000001".
		"boundary": func(c *Change) { c.ServerTransactionID, c.RecordSequence = "tx-90", "0000001" },
	} {
		c := base
		ch(&c)
		got := CaptureRequestID(c, 0)
		require.NotContains(t, seen, got, "%s changes the id", name)
		seen[got] = name
	}
	require.NotEqual(t, id, CaptureRequestID(base, 1), "each request of a change has its own id")

	// Ids sort in commit order, then by request index.
	later := base
	later.CommitTimestamp = base.CommitTimestamp.Add(time.Nanosecond)
	later.ServerTransactionID = "tx-0"
	require.Less(t, id, CaptureRequestID(base, 1))
	require.Less(t, CaptureRequestID(base, 1), CaptureRequestID(later, 0))
	require.Less(t, CaptureRequestID(base, 9), CaptureRequestID(base, 10))
}

package queue

import (
	"fmt"
	"strconv"
	"time"

	"cloud.google.com/go/spanner"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// ModType is the kind of change a data change record describes.
type ModType string

// The mod types of a change stream.
const (
	ModInsert ModType = "INSERT"
	ModUpdate ModType = "UPDATE"
	ModDelete ModType = "DELETE"
)

// Change is one modified row of a watched table, as the change stream
// reported it: one mod of one data change record. The capture gives each
// Change to the Mapper once per read; a replayed Change is identical.
type Change struct {
	Stream string  // the change stream
	Table  string  // the watched table the row belongs to
	Mod    ModType // INSERT, UPDATE or DELETE

	// The row's primary key, its new values and its old values, as the JSON
	// objects the stream gives ({"column": value}; INT64 values are JSON
	// strings). Which columns appear depends on the stream's
	// value_capture_type: with the default OLD_AND_NEW_VALUES, NewValues
	// holds the columns written and OldValues their previous values; both are
	// {} where they do not apply (OldValues of an INSERT, NewValues of a
	// DELETE).
	Keys, NewValues, OldValues string

	// The commit of the application's transaction (Spanner's clock).
	CommitTimestamp time.Time
	// Identify the record within the stream: with ModIndex (the mod's
	// position in the record), they make the Change's identity, from which
	// the capture derives request ids.
	ServerTransactionID string
	RecordSequence      string
	ModIndex            int

	ValueCaptureType    string // e.g. OLD_AND_NEW_VALUES, NEW_ROW
	TransactionTag      string // the application's transaction tag, if any
	IsSystemTransaction bool   // e.g. a TTL deletion
}

// dataChangeRecord is a data change record: the mods of one table, with one
// mod type, committed by one transaction, in one partition.
type dataChangeRecord struct {
	CommitTimestamp                 time.Time
	RecordSequence                  string
	ServerTransactionID             string
	IsLastRecordInTransaction       bool
	TableName                       string
	ModType                         string
	ValueCaptureType                string
	NumberOfRecordsInTransaction    int64
	NumberOfPartitionsInTransaction int64
	TransactionTag                  string
	IsSystemTransaction             bool
	Mods                            []csMod
}

type csMod struct{ Keys, NewValues, OldValues string }

// childPartitionsRecord says that the partition ends at StartTimestamp and
// that the children carry on from there.
type childPartitionsRecord struct {
	StartTimestamp time.Time
	RecordSequence string
	Children       []childPartition
}

type childPartition struct {
	Token   string
	Parents []string
}

// csRecord is one element of the ChangeRecord column: exactly one of
// its fields is set.
type csRecord struct {
	Data      *dataChangeRecord
	Heartbeat *time.Time
	Children  *childPartitionsRecord
}

// changes returns the record's mods as Changes of stream.
func (d *dataChangeRecord) changes(stream string) []Change {
	out := make([]Change, len(d.Mods))
	for i, m := range d.Mods {
		out[i] = Change{
			Stream: stream, Table: d.TableName, Mod: ModType(d.ModType),
			Keys: m.Keys, NewValues: m.NewValues, OldValues: m.OldValues,
			CommitTimestamp: d.CommitTimestamp, ServerTransactionID: d.ServerTransactionID,
			RecordSequence: d.RecordSequence, ModIndex: i,
			ValueCaptureType: d.ValueCaptureType, TransactionTag: d.TransactionTag,
			IsSystemTransaction: d.IsSystemTransaction,
		}
	}
	return out
}

// decodeChangeRecord decodes the ChangeRecord column of a READ_<stream>
// query of a GoogleSQL database: ARRAY<STRUCT<data_change_record ARRAY<…>,
// heartbeat_record ARRAY<…>, child_partitions_record ARRAY<…>>>. It walks
// the value by field name, rather than decoding into Go structs, because the
// client's struct decoding fails on any field it does not know, and Spanner
// adds fields to the records over time: unknown fields are ignored, missing
// ones left zero. The JSONB column of a PostgreSQL database's
// spanner.read_json_<stream> is decoded by decodeJSONRecord. A column of any
// other shape (the protos of MUTABLE_KEY_RANGE streams) is an error
// matching ErrUnsupportedRecord.
func decodeChangeRecord(col spanner.GenericColumnValue) ([]csRecord, error) {
	if col.Type.GetCode() == sppb.TypeCode_JSON {
		return decodeJSONRecord(col.Value.GetStringValue())
	}
	if col.Type == nil || col.Type.Code != sppb.TypeCode_ARRAY || col.Type.ArrayElementType.GetCode() != sppb.TypeCode_STRUCT {
		return nil, fmt.Errorf("%w: the ChangeRecord column is %v, not ARRAY<STRUCT<…>>", ErrUnsupportedRecord, col.Type)
	}
	elems, err := listOf(col.Value)
	if err != nil {
		return nil, err
	}
	var out []csRecord
	for _, e := range elems {
		fields, err := structFields(col.Type.ArrayElementType, e)
		if err != nil {
			return nil, err
		}
		n := len(out)
		for _, f := range fields {
			items, err := arrayOfStructs(f)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				switch f.name {
				case "data_change_record":
					d, err := decodeDataChange(it)
					if err != nil {
						return nil, err
					}
					out = append(out, csRecord{Data: d})
				case "heartbeat_record":
					ts, err := it.time("timestamp")
					if err != nil {
						return nil, err
					}
					out = append(out, csRecord{Heartbeat: &ts})
				case "child_partitions_record":
					c, err := decodeChildren(it)
					if err != nil {
						return nil, err
					}
					out = append(out, csRecord{Children: c})
				}
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%w: a ChangeRecord with none of data_change_record, heartbeat_record, child_partitions_record set", ErrUnsupportedRecord)
		}
	}
	return out, nil
}

func decodeDataChange(s csFields) (*dataChangeRecord, error) {
	d := &dataChangeRecord{}
	var err error
	if d.CommitTimestamp, err = s.time("commit_timestamp"); err != nil {
		return nil, err
	}
	d.RecordSequence = s.str("record_sequence")
	d.ServerTransactionID = s.str("server_transaction_id")
	d.IsLastRecordInTransaction = s.boolean("is_last_record_in_transaction_in_partition")
	d.TableName = s.str("table_name")
	d.ModType = s.str("mod_type")
	d.ValueCaptureType = s.str("value_capture_type")
	d.NumberOfRecordsInTransaction = s.int64("number_of_records_in_transaction")
	d.NumberOfPartitionsInTransaction = s.int64("number_of_partitions_in_transaction")
	d.TransactionTag = s.str("transaction_tag")
	d.IsSystemTransaction = s.boolean("is_system_transaction")
	mods, err := arrayOfStructs(s["mods"])
	if err != nil {
		return nil, err
	}
	for _, m := range mods {
		d.Mods = append(d.Mods, csMod{Keys: m.json("keys"), NewValues: m.json("new_values"), OldValues: m.json("old_values")})
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	return d, nil
}

// check returns an error matching ErrUnsupportedRecord if the record lacks
// what identifies it or has an unknown mod type.
func (d *dataChangeRecord) check() error {
	switch {
	case d.ServerTransactionID == "" || d.RecordSequence == "" || d.TableName == "":
		return fmt.Errorf("%w: a data change record without server_transaction_id, record_sequence or table_name", ErrUnsupportedRecord)
	case d.ModType != string(ModInsert) && d.ModType != string(ModUpdate) && d.ModType != string(ModDelete):
		return fmt.Errorf("%w: data change record with mod_type %q", ErrUnsupportedRecord, d.ModType)
	}
	return nil
}

func decodeChildren(s csFields) (*childPartitionsRecord, error) {
	c := &childPartitionsRecord{RecordSequence: s.str("record_sequence")}
	var err error
	if c.StartTimestamp, err = s.time("start_timestamp"); err != nil {
		return nil, err
	}
	kids, err := arrayOfStructs(s["child_partitions"])
	if err != nil {
		return nil, err
	}
	for _, k := range kids {
		cp := childPartition{Token: k.str("token")}
		if cp.Token == "" {
			return nil, fmt.Errorf("%w: a child partition without a token", ErrUnsupportedRecord)
		}
		if p := k["parent_partition_tokens"]; p.value != nil {
			vals, err := listOf(p.value)
			if err != nil {
				return nil, err
			}
			for _, v := range vals {
				cp.Parents = append(cp.Parents, v.GetStringValue())
			}
		}
		c.Children = append(c.Children, cp)
	}
	return c, nil
}

// csField is one named field of a STRUCT value.
type csField struct {
	name  string
	typ   *sppb.Type
	value *structpb.Value
}

// csFields is a STRUCT value by field name.
type csFields map[string]csField

func structFields(t *sppb.Type, v *structpb.Value) ([]csField, error) {
	vals, err := listOf(v)
	if err != nil {
		return nil, err
	}
	defs := t.GetStructType().GetFields()
	if len(defs) != len(vals) {
		return nil, fmt.Errorf("%w: a STRUCT of %d fields holds %d values", ErrUnsupportedRecord, len(defs), len(vals))
	}
	out := make([]csField, len(defs))
	for i, d := range defs {
		out[i] = csField{name: d.GetName(), typ: d.GetType(), value: vals[i]}
	}
	return out, nil
}

// arrayOfStructs decodes an ARRAY<STRUCT> field (NULL or absent: empty).
func arrayOfStructs(f csField) ([]csFields, error) {
	if f.value == nil || isNull(f.value) {
		return nil, nil
	}
	if f.typ.GetCode() != sppb.TypeCode_ARRAY || f.typ.GetArrayElementType().GetCode() != sppb.TypeCode_STRUCT {
		return nil, fmt.Errorf("%w: field %s is %v, not ARRAY<STRUCT<…>>", ErrUnsupportedRecord, f.name, f.typ)
	}
	elems, err := listOf(f.value)
	if err != nil {
		return nil, err
	}
	out := make([]csFields, len(elems))
	for i, e := range elems {
		fields, err := structFields(f.typ.GetArrayElementType(), e)
		if err != nil {
			return nil, err
		}
		out[i] = csFields{}
		for _, fd := range fields {
			out[i][fd.name] = fd
		}
	}
	return out, nil
}

func listOf(v *structpb.Value) ([]*structpb.Value, error) {
	if v == nil || isNull(v) {
		return nil, nil
	}
	l, ok := v.Kind.(*structpb.Value_ListValue)
	if !ok {
		return nil, fmt.Errorf("%w: expected a list value, got %T", ErrUnsupportedRecord, v.Kind)
	}
	return l.ListValue.GetValues(), nil
}

func isNull(v *structpb.Value) bool {
	_, ok := v.Kind.(*structpb.Value_NullValue)
	return ok
}

func (m csFields) str(name string) string { return m[name].value.GetStringValue() }

// json returns a JSON field's text ("{}" when NULL or absent).
func (m csFields) json(name string) string {
	if s := m.str(name); s != "" {
		return s
	}
	return "{}"
}

func (m csFields) boolean(name string) bool { return m[name].value.GetBoolValue() }

// int64 reads an INT64, which Spanner sends as a decimal string.
func (m csFields) int64(name string) int64 {
	n, _ := strconv.ParseInt(m.str(name), 10, 64)
	return n
}

func (m csFields) time(name string) (time.Time, error) { return recordTime(name, m.str(name)) }

// recordTime parses s, the timestamp in field of a change record (RFC 3339
// with up to nanoseconds: a Z in GoogleSQL, +00:00 in PostgreSQL's JSON),
// in UTC.
func recordTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: field %s: timestamp %q: %v", ErrUnsupportedRecord, field, s, err)
	}
	return t.UTC(), nil
}

package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// jsonRecord is one row of a PostgreSQL database's
// spanner.read_json_<stream>: a JSONB object with exactly one of these keys
// set. The fields are those of GoogleSQL's STRUCTs, by the same names;
// unknown fields are ignored, as there.
type jsonRecord struct {
	Data *struct {
		CommitTimestamp                 string      `json:"commit_timestamp"`
		RecordSequence                  string      `json:"record_sequence"`
		ServerTransactionID             string      `json:"server_transaction_id"`
		IsLastRecordInTransaction       bool        `json:"is_last_record_in_transaction_in_partition"`
		TableName                       string      `json:"table_name"`
		ModType                         string      `json:"mod_type"`
		ValueCaptureType                string      `json:"value_capture_type"`
		NumberOfRecordsInTransaction    json.Number `json:"number_of_records_in_transaction"`
		NumberOfPartitionsInTransaction json.Number `json:"number_of_partitions_in_transaction"`
		TransactionTag                  string      `json:"transaction_tag"`
		IsSystemTransaction             bool        `json:"is_system_transaction"`
		Mods                            []jsonMod   `json:"mods"`
	} `json:"data_change_record"`
	Heartbeat *struct {
		Timestamp string `json:"timestamp"`
	} `json:"heartbeat_record"`
	Children *struct {
		StartTimestamp  string `json:"start_timestamp"`
		RecordSequence  string `json:"record_sequence"`
		ChildPartitions []struct {
			Token   string   `json:"token"`
			Parents []string `json:"parent_partition_tokens"`
		} `json:"child_partitions"`
	} `json:"child_partitions_record"`
}

// jsonMod is a mod of a data change record: the row's keys and values as
// JSON objects (not as JSON text in a string, as in GoogleSQL).
type jsonMod struct {
	Keys      json.RawMessage `json:"keys"`
	NewValues json.RawMessage `json:"new_values"`
	OldValues json.RawMessage `json:"old_values"`
}

// decodeJSONRecord decodes one JSONB record of spanner.read_json_<stream>
// into the records GoogleSQL's STRUCTs decode to, so that the capture
// handles both dialects alike. A record it cannot read is an error matching
// ErrUnsupportedRecord.
func decodeJSONRecord(text string) ([]csRecord, error) {
	var r jsonRecord
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: a JSON change record: %v", ErrUnsupportedRecord, err)
	}
	var out []csRecord
	if r.Data != nil {
		d := &dataChangeRecord{
			RecordSequence: r.Data.RecordSequence, ServerTransactionID: r.Data.ServerTransactionID,
			IsLastRecordInTransaction: r.Data.IsLastRecordInTransaction, TableName: r.Data.TableName,
			ModType: r.Data.ModType, ValueCaptureType: r.Data.ValueCaptureType,
			TransactionTag: r.Data.TransactionTag, IsSystemTransaction: r.Data.IsSystemTransaction,
		}
		d.NumberOfRecordsInTransaction, _ = r.Data.NumberOfRecordsInTransaction.Int64()
		d.NumberOfPartitionsInTransaction, _ = r.Data.NumberOfPartitionsInTransaction.Int64()
		var err error
		if d.CommitTimestamp, err = recordTime("commit_timestamp", r.Data.CommitTimestamp); err != nil {
			return nil, err
		}
		for _, m := range r.Data.Mods {
			d.Mods = append(d.Mods, csMod{Keys: jsonText(m.Keys), NewValues: jsonText(m.NewValues), OldValues: jsonText(m.OldValues)})
		}
		if err := d.check(); err != nil {
			return nil, err
		}
		out = append(out, csRecord{Data: d})
	}
	if r.Heartbeat != nil {
		ts, err := recordTime("timestamp", r.Heartbeat.Timestamp)
		if err != nil {
			return nil, err
		}
		out = append(out, csRecord{Heartbeat: &ts})
	}
	if r.Children != nil {
		c := &childPartitionsRecord{RecordSequence: r.Children.RecordSequence}
		var err error
		if c.StartTimestamp, err = recordTime("start_timestamp", r.Children.StartTimestamp); err != nil {
			return nil, err
		}
		for _, k := range r.Children.ChildPartitions {
			if k.Token == "" {
				return nil, fmt.Errorf("%w: a child partition without a token", ErrUnsupportedRecord)
			}
			c.Children = append(c.Children, childPartition{Token: k.Token, Parents: k.Parents})
		}
		out = append(out, csRecord{Children: c})
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("%w: a JSON change record with %d of data_change_record, heartbeat_record, child_partitions_record set, want 1", ErrUnsupportedRecord, len(out))
	}
	return out, nil
}

// jsonText is a JSON value's text ("{}" when null or absent), compacted.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

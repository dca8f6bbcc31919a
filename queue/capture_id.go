package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// captureIDPrefix marks request ids derived from change records.
const captureIDPrefix = "cs-"

// CaptureRequestID returns the id the capture gives to the index'th request
// the Mapper made from ch: "cs-" and 61 hex digits of a SHA-256 of the
// change's identity (stream, commit timestamp, server transaction id, record
// sequence, table, keys, mod index) and index, 64 bytes in all. The same
// change read again, after a restart or by a second capture instance, gives
// the same ids, so that its requests are recognised as already enqueued.
func CaptureRequestID(ch Change, index int) string {
	h := sha256.New()
	for _, part := range []string{
		ch.Stream,
		ch.CommitTimestamp.UTC().Format(time.RFC3339Nano),
		ch.ServerTransactionID,
		ch.RecordSequence,
		ch.Table,
		ch.Keys,
		strconv.Itoa(ch.ModIndex),
		strconv.Itoa(index),
	} {
		// Length-prefixed, so that no two different identities hash the
		// same bytes ("ab"+"c" versus "a"+"bc").
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return captureIDPrefix + hex.EncodeToString(h.Sum(nil))[:MaxIDLength-len(captureIDPrefix)]
}

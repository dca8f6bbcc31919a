package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
)

// captureIDPrefix marks request ids derived from change records.
const captureIDPrefix = "cs-"

// CaptureRequestID returns the id the capture gives to the index'th request
// the Mapper made from ch, 64 bytes:
//
//	cs-<commit timestamp: 16 hex digits of Unix nanoseconds><index: 4 hex digits>-<40 hex digits of a SHA-256>
//
// The hash covers the change's identity (stream, commit timestamp, server
// transaction id, record sequence, table, keys, mod index) and index, so the
// same change read again, after a restart or by a second capture instance,
// gives the same ids and its requests are recognised as already enqueued.
// The leading commit timestamp and index make ids sort in commit order:
// requests that one capture transaction enqueues share a CreatedAt, and the
// queue breaks such ties by id.
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
	return fmt.Sprintf("%s%016x%04x-%s", captureIDPrefix, uint64(ch.CommitTimestamp.UnixNano()), uint16(index),
		hex.EncodeToString(h.Sum(nil))[:40])
}

package spanmutex

import "time"

// lockPollInterval is the shortest pause between two reads of a waiting
// call, a Lock's (lock_poll.go) or a Semaphore's (semaphore_waiter.go): the
// head of a queue learns of a hand-off or a grant within about that much.
// It is fixed, not an option: it paces reads only, and every decision on
// ownership is taken in a read-write transaction whatever it is.
const lockPollInterval = 20 * time.Millisecond

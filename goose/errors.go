package spangoose

import "errors"

// ErrInvalidConfig is wrapped by every error NewLocker returns for bad input,
// and by Lock's error when it is given a ctx that Context did not make.
var ErrInvalidConfig = errors.New("spangoose: invalid configuration")

// ErrStopped is matched, together with spanmutex.ErrLeaseLost, by the error
// Unlock returns (and so by the error of the goose Provider call) when the
// lease was lost while goose ran and the run's ctx was cancelled to stop it.
var ErrStopped = errors.New("spangoose: goose was stopped because the lock's lease was lost")

package main

import (
	"flag"
	"fmt"

	"github.com/spanmutex/spanmutex"
)

// listenFlags are the --listen and --advertise flags of run and lock: where
// the process listens for wake-ups from other processes. By default it
// listens on demand on the host's own address (spanmutex.NewScope); --listen
// ADDR sets the address (spanmutex.ListenScope), --listen off polls only.
type listenFlags struct {
	listen, advertise string
}

// register defines the flags on fs.
func (l *listenFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.listen, "listen", "",
		"UDP address (e.g. 127.0.0.1:0 or :7946) on which to listen for wake-ups, so that a hand-off or the end of the section reaches this process at once instead of at its next poll; default: an ephemeral port of the host's own address; off: poll only")
	fs.StringVar(&l.advertise, "advertise", "", "with --listen on every interface: the address other processes reach this one at")
}

// scope returns the option that makes a Mutex or Lock use the listening
// Scope, and what closes it; none if --listen is not set.
func (l *listenFlags) scope() ([]spanmutex.ElectionOption, func(), error) {
	switch {
	case (l.listen == "" || l.listen == "off") && l.advertise != "":
		return nil, func() {}, fmt.Errorf("--advertise goes with --listen ADDR: give the address to listen on")
	case l.listen == "":
		return nil, func() {}, nil // the library's default: a Scope that listens on demand
	case l.listen == "off":
		return []spanmutex.ElectionOption{spanmutex.WithScope(spanmutex.NewScope(spanmutex.WithoutWakeUps()))}, func() {}, nil
	}
	s, err := spanmutex.ListenScope(l.listen, l.advertise)
	if err != nil {
		return nil, func() {}, fmt.Errorf("--listen %s: %w", l.listen, err)
	}
	return []spanmutex.ElectionOption{spanmutex.WithScope(s)}, func() { s.Close() }, nil
}

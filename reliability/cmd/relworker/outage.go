package main

import (
	"errors"
	"flag"
	"os"
)

// A provider outage for one event type, for the circuit scenario: the type is handled like
// rel.msg, except that its calls fail with a retryable error while the outage file exists.
// The test creates the file to start the outage and removes it to end it.
var (
	outageType = flag.String("outage-type", "", "also handle this event type, whose calls fail while -outage-file exists")
	outageFile = flag.String("outage-file", "", "with -outage-type: the file whose existence means the provider is down")
)

var errOutage = errors.New("provider unavailable (outage)")

// outageTypes is the extra event type to handle, if any.
func outageTypes() []string {
	if *outageType == "" {
		return nil
	}
	return []string{*outageType}
}

// inOutage says whether a call of eventType fails now.
func inOutage(eventType string) bool {
	if *outageType == "" || eventType != *outageType {
		return false
	}
	_, err := os.Stat(*outageFile)
	return err == nil
}

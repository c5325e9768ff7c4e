// Package ledger records every handler call of the fault suite's worker processes and checks
// the record against what was enqueued and what the table says at the end.
//
// Each worker process appends to its own file, opened O_APPEND, one write(2) per line: a line
// that was written survives a kill -9 of the process (it is in the page cache) and any restart
// of the database (it is not in the database). A ledger table would lose exactly the lines that
// matter: those written just before the server died or the worker's connection was killed.
package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Line kinds.
const (
	KindStart    = "start"    // a worker process started
	KindCall     = "call"     // a handler call began (written before the handler does anything)
	KindDone     = "done"     // a handler call is returning (written before the worker records it)
	KindIncident = "incident" // the worker reported an incident.Incident
	KindMem      = "mem"      // periodic memory sample
	KindExit     = "exit"     // Run returned; Err says how

	// A worker process that enqueues too (relworker -produce-rate) records each message it
	// enqueues in two lines, so that a kill -9 at any moment leaves a readable record:
	KindEnqueue  = "enq"   // Key is about to be enqueued (Expect: its final status); written before its transaction begins
	KindEnqueued = "enqd"  // Key's transaction ended: Outcome is a State's name (see State.String)
	KindProduced = "pstop" // the process stopped enqueueing: no enq line follows
)

// Line is one ledger record, one JSON object per line.
type Line struct {
	T       string `json:"t"`
	Proc    string `json:"p"`
	ID      int64  `json:"id,omitempty"`
	Key     string `json:"k,omitempty"`
	Token   string `json:"tok,omitempty"`
	Attempt int    `json:"a,omitempty"`
	// Ord is the call's outbox.Delivery.OrderingKey ("" for an unordered message).
	Ord     string `json:"ord,omitempty"`
	OK      bool   `json:"ok,omitempty"`
	Err     string `json:"err,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Subject string `json:"subj,omitempty"`
	// Expect is an enq line's expected final status; Outcome an enqd line's State.
	Expect  string `json:"exp,omitempty"`
	Outcome string `json:"out,omitempty"`
	// Heap and RSS are the mem line's samples in bytes.
	Heap uint64 `json:"heap,omitempty"`
	RSS  uint64 `json:"rss,omitempty"`
	At   int64  `json:"at"`
}

// Writer appends lines to one process's file.
type Writer struct {
	mu   sync.Mutex
	f    *os.File
	proc string
}

// Create opens path for appending (creating it) for process proc.
func Create(path, proc string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Writer{f: f, proc: proc}, nil
}

// Write appends l (Proc and At filled in) with a single write call.
func (w *Writer) Write(l Line) error {
	l.Proc = w.proc
	if l.At == 0 {
		l.At = time.Now().UnixNano()
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.f.Write(b)
	return err
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// ReadDir reads every *.jsonl file in dir. A torn last line (a process killed in the middle
// of a write; not expected, since each line is one write) is counted in torn, not parsed.
func ReadDir(dir string) (lines []Line, torn int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	sort.Strings(files)
	for _, f := range files {
		ls, t, err := ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		lines = append(lines, ls...)
		torn += t
	}
	return lines, torn, nil
}

// ReadFile reads one process's ledger file, like ReadDir.
func ReadFile(path string) (lines []Line, torn int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	return parse(path, b)
}

// ReadFrom reads the complete lines of one process's ledger file that start at byte offset off
// or later, and returns the offset after the last of them: the offset to read from next. A
// line still being written is left for that next read. A file not created yet has no lines.
func ReadFrom(path string, off int64) (lines []Line, next int64, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, off, nil
	}
	if err != nil {
		return nil, off, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, off, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, off, err
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	lines, _, err = parse(path, b)
	return lines, off + int64(len(b)), err
}

// parse reads the lines of b, counting those that do not decode in torn.
func parse(path string, b []byte) (lines []Line, torn int, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			torn++
			continue
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("ledger: %s: %w", path, err)
	}
	return lines, torn, nil
}

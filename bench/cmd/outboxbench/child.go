package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The child process runs one consumer (a worker in its own process, as in production), so that
// its memory can be read from /proc and cross-process latency has no in-process wake-up.
// Protocol: the child prints "ready" once the consumer runs, then one "SEQ UNIXNANOS" line per
// handler call. Each "counts" line the parent writes on its stdin is answered with one line
// "counts CLAIMS EMPTY STMTS" (consumerCounts: the consumer's claims or polls so far, the empty
// ones, and every statement its pool sent). It stops gracefully when its stdin is closed and
// exits non-zero on any error.

type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	readWg sync.WaitGroup
	stderr strings.Builder
	counts chan consumerCounts // the answers to "counts"
	askMu  sync.Mutex          // one question at a time
}

// startChild starts this binary as a consumer of sys on dsn and feeds its lines into tr.
func startChild(ctx context.Context, exe, sys, dsn string, delay time.Duration, tr *tracker) (*child, error) {
	cmd := exec.CommandContext(ctx, exe, "child", "-system", sys, "-dsn", dsn, "-delay", delay.String(),
		"-ours-batch", strconv.Itoa(oursBatch), "-ours-concurrency", strconv.Itoa(oursConcurrency),
		"-mysql="+strconv.FormatBool(wmOnMySQL))
	c := &child{cmd: cmd, counts: make(chan consumerCounts, 1)}
	cmd.Stderr = &c.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	c.stdin = stdin
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	c.readWg.Add(1)
	go func() {
		defer c.readWg.Done()
		sc := bufio.NewScanner(stdout)
		readyOnce := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			if line == "ready" {
				readyOnce.Do(func() { close(ready) })
				continue
			}
			if rest, ok := cutCountsPrefix(line); ok {
				cc, err := parseCounts(rest)
				if err != nil {
					tr.bad.Add(1)
					continue
				}
				select {
				case c.counts <- cc:
				default: // nobody asked: ignore
				}
				continue
			}
			seqS, atS, ok := strings.Cut(line, " ")
			seq, err1 := strconv.ParseInt(seqS, 10, 64)
			at, err2 := strconv.ParseInt(atS, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				tr.bad.Add(1)
				continue
			}
			tr.deliver(seq, at)
		}
		readyOnce.Do(func() { close(ready) }) // the child died before it was ready: stop reports it
	}()
	select {
	case <-ready:
	case <-time.After(time.Minute):
		return c, errors.Join(errors.New("child did not become ready"), c.stop())
	}
	return c, nil
}

// askCounts asks the child for its consumer's counts and waits for the answer.
func (c *child) askCounts() (consumerCounts, error) {
	c.askMu.Lock()
	defer c.askMu.Unlock()
	if _, err := io.WriteString(c.stdin, "counts\n"); err != nil {
		return consumerCounts{}, fmt.Errorf("ask child for counts: %w", err)
	}
	select {
	case cc := <-c.counts:
		return cc, nil
	case <-time.After(10 * time.Second):
		return consumerCounts{}, errors.New("child did not answer counts within 10s")
	}
}

func cutCountsPrefix(line string) (string, bool) { return strings.CutPrefix(line, "counts ") }

func formatCounts(cc consumerCounts) string {
	return fmt.Sprintf("counts %d %d %d", cc.Claims, cc.Empty, cc.Stmts)
}

func parseCounts(s string) (consumerCounts, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return consumerCounts{}, fmt.Errorf("counts line %q: want 3 fields", s)
	}
	var v [3]int64
	for i := range f {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return consumerCounts{}, fmt.Errorf("counts line %q: %w", s, err)
		}
		v[i] = n
	}
	return consumerCounts{Claims: v[0], Empty: v[1], Stmts: v[2]}, nil
}

// stop closes the child's stdin, waits for it to finish and returns its failure, with stderr.
func (c *child) stop() error {
	closeErr := c.stdin.Close()
	c.readWg.Wait()
	err := c.cmd.Wait()
	if err != nil {
		return fmt.Errorf("child %s: %w\n%s", c.cmd.Args[1:4], err, c.stderr.String())
	}
	return closeErr
}

// vmHWM reads the peak resident set size (kB) of a running process.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmHWM", pid)
}

// childMain is the child process: `outboxbench child -system S -dsn D -delay 5ms`.
func childMain(args []string) int {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	sysName := fs.String("system", "", "outboxgen or watermill")
	dsn := fs.String("dsn", "", "database DSN")
	delay := fs.Duration("delay", 0, "handler delay")
	fs.IntVar(&oursBatch, "ours-batch", 0, "outboxgen worker BatchSize")
	fs.IntVar(&oursConcurrency, "ours-concurrency", 0, "outboxgen worker Concurrency")
	fs.BoolVar(&wmOnMySQL, "mysql", false, "the server is Oracle MySQL (watermill's mysqlSchema)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := runChild(*sysName, *dsn, *delay); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func runChild(sysName, dsn string, delay time.Duration) error {
	sys, err := systemByName(sysName)
	if err != nil {
		return err
	}
	// The pool is the consumer's alone: its statement count is the consumer's.
	db, stmts, err := openCountingPool(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	var mu sync.Mutex
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	var writeErr error
	onMsg := func(p []byte) {
		at := time.Now().UnixNano()
		seq, err := payloadSeq(p)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			writeErr = errors.Join(writeErr, err)
			return
		}
		if _, err := fmt.Fprintf(out, "%d %d\n", seq, at); err != nil {
			writeErr = errors.Join(writeErr, err)
		}
	}
	cons, err := sys.consume(context.Background(), db, consumerConfig{HandlerDelay: delay}, onMsg)
	if err != nil {
		return err
	}
	stop := cons.stop
	mu.Lock()
	_, err = out.WriteString("ready\n")
	if err == nil {
		err = out.Flush()
	}
	mu.Unlock()
	if err != nil {
		return errors.Join(err, stop())
	}
	// Flush often so the parent sees progress; the handler's own timestamp is what counts.
	flushDone := make(chan struct{})
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-flushDone:
				return
			case <-t.C:
				mu.Lock()
				if err := out.Flush(); err != nil {
					writeErr = errors.Join(writeErr, err)
				}
				mu.Unlock()
			}
		}
	}()
	// Answer "counts" until the parent closes stdin.
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "counts" {
			continue
		}
		cc := cons.counts()
		cc.Stmts = stmts.Stmts.Load()
		mu.Lock()
		_, err := out.WriteString(formatCounts(cc) + "\n")
		if err == nil {
			err = out.Flush()
		}
		if err != nil {
			writeErr = errors.Join(writeErr, err)
		}
		mu.Unlock()
	}
	copyErr := in.Err()
	stopErr := stop()
	close(flushDone)
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(copyErr, stopErr, writeErr, out.Flush())
}

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
// handler call; it stops gracefully when its stdin is closed and exits non-zero on any error.

type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	readWg sync.WaitGroup
	stderr strings.Builder
}

// startChild starts this binary as a consumer of sys on dsn and feeds its lines into tr.
func startChild(ctx context.Context, exe, sys, dsn string, delay time.Duration, tr *tracker) (*child, error) {
	cmd := exec.CommandContext(ctx, exe, "child", "-system", sys, "-dsn", dsn, "-delay", delay.String(),
		"-ours-batch", strconv.Itoa(oursBatch), "-ours-concurrency", strconv.Itoa(oursConcurrency),
		"-mysql="+strconv.FormatBool(wmOnMySQL))
	c := &child{cmd: cmd}
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
	db, err := openPool(dsn)
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
	stop, err := sys.consume(context.Background(), db, consumerConfig{HandlerDelay: delay}, onMsg)
	if err != nil {
		return err
	}
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
	_, copyErr := io.Copy(io.Discard, os.Stdin) // returns when the parent closes stdin
	stopErr := stop()
	close(flushDone)
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(copyErr, stopErr, writeErr, out.Flush())
}

//go:build reliability

package reliability

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one relworker process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *os.File
}

type workerOpts struct {
	addr  string // "" = the server directly; else a proxy address
	flags []string
}

// startWorker starts a relworker incarnation of role (w1, w2...): its ledger file and log are
// named role.N so a restarted process never writes into its predecessor's file.
func (e *env) startWorker(role string, o workerOpts) *proc {
	e.t.Helper()
	e.mu.Lock()
	e.incarnated[role]++
	name := fmt.Sprintf("%s.%d", role, e.incarnated[role])
	e.mu.Unlock()
	logf, err := os.Create(filepath.Join(e.dir, name+".log"))
	if err != nil {
		e.t.Fatal(err)
	}
	args := append([]string{
		"-dsn", srv.DSN("relworker", e.dbName, o.addr),
		"-ledger", filepath.Join(e.dir, name+".jsonl"),
		"-proc", name,
	}, o.flags...)
	cmd := exec.Command(e.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), e.procEnv...)
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logf}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill9 is SIGKILL: no shutdown, no deferred code; in-flight claims stay PROCESSING.
// killMidDispatch kills role's live worker with kill -9 once its ledger shows a call in flight
// (inFlight > 0, waiting up to 3s: a fresh incarnation needs a moment), starts a new
// incarnation of the role in its place, and returns the killed worker's name.
func (e *env) killMidDispatch(live map[string]*proc, role string, opts workerOpts, inFlight func(proc string) int) string {
	e.requireAlive(live[role])
	poll(3*time.Second, func() bool { return inFlight(live[role].name) > 0 })
	e.kill9(live[role])
	name := live[role].name
	live[role] = e.startWorker(role, opts)
	return name
}

func (e *env) kill9(p *proc) {
	e.mu.Lock()
	e.killed[p.name] = true
	e.mu.Unlock()
	p.kill9()
	e.mu.Lock()
	e.killedAt[p.name] = time.Now().UnixNano()
	e.mu.Unlock()
}

func (p *proc) kill9() {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		panic(err)
	}
	<-p.done
}

// term asks for a graceful stop and returns an error if the process does not exit within
// wait or exits with a failure.
func (p *proc) term(wait time.Duration) error {
	if p.exited() {
		return fmt.Errorf("%s had already exited: %v", p.name, p.err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s exited after SIGTERM: %v", p.name, p.err)
		}
		return nil
	case <-time.After(wait):
		p.kill9()
		return fmt.Errorf("%s did not exit within %v of SIGTERM (killed)", p.name, wait)
	}
}

// stopAll stops every live process; with check, a process that died on its own or does not
// stop cleanly fails the test.
func (e *env) stopAll(check bool) {
	e.mu.Lock()
	procs := append([]*proc(nil), e.procs...)
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		if p.exited() {
			continue
		}
		wg.Add(1)
		go func(p *proc) {
			defer wg.Done()
			if err := p.term(20 * time.Second); err != nil && check {
				e.t.Errorf("stop worker: %v", err)
			}
		}(p)
	}
	wg.Wait()
}

// requireAlive fails the test if a process exited on its own (not killed by the suite).
func (e *env) requireAlive(ps ...*proc) {
	e.t.Helper()
	for _, p := range ps {
		if p.exited() {
			e.t.Fatalf("worker %s exited on its own: %v (log below)\n%s", p.name, p.err, tail(filepath.Join(e.dir, p.name+".log"), 30))
		}
	}
}

// baseFlags are relworker settings shared by the scenarios: short leases so a killed worker's
// rows come back within seconds.
func baseFlags(extra ...string) []string {
	return append([]string{"-stale", "2s", "-timeout", "500ms", "-poll", "100ms", "-shutdown", "3s"}, extra...)
}

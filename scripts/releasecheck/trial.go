package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// covered are the published modules the trial program uses (directories relative to the
// repository). A published module missing here fails the check: add a use of it to trialMain.
var covered = map[string]bool{
	".":                   true,
	"runtime/outboxprom":  true,
	"runtime/outboxotel":  true,
	"runtime/outboxnats":  true,
	"runtime/outboxkafka": true,
	"runtime/outboxorm":   true,
}

const trialCatalog = `version: 1
package: events
output: events/events_outbox.go
events:
  order_placed:
    description: A customer placed an order.
    fields:
      order_id: int64
`

// trialMain uses every published module offline (nothing connects) and exits non-zero when
// one of them misbehaves; VERSION is replaced by the release version.
const trialMain = `package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxkafka"
	"github.com/outboxgen/outboxgen/runtime/outboxnats"
	"github.com/outboxgen/outboxgen/runtime/outboxorm/outboxent"
	"github.com/outboxgen/outboxgen/runtime/outboxotel"
	"github.com/outboxgen/outboxgen/runtime/outboxprom"

	"example.com/trial/events"
)

// The relays' clients, without a connection: Register never publishes.
type offlineJetStream struct{ jetstream.Publisher }
type offlineProducer struct{ outboxkafka.Producer }

// offlineEnt is an ent client without a transaction: Enqueue refuses it before any statement.
type offlineEnt struct{}

func (offlineEnt) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("offline")
}
func (offlineEnt) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("offline")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "trial: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if outbox.Version != "VERSION" {
		fail("outbox.Version = %q, want VERSION", outbox.Version)
	}
	if _, ok := events.NewRouter(nil).Policy("order_placed"); !ok {
		fail("the generated router has no order_placed")
	}
	if err := prometheus.NewRegistry().Register(outboxprom.NewObserver()); err != nil {
		fail("outboxprom: %v", err)
	}
	cfg, err := outboxotel.Instrument(outbox.Config{})
	if err != nil || cfg.Observer == nil {
		fail("outboxotel.Instrument: observer %v, error %v", cfg.Observer, err)
	}
	natsRelay, kafkaRelay := outbox.NewRouter(), outbox.NewRouter()
	if err := outboxnats.Register(natsRelay, offlineJetStream{}, events.NewRouter(nil)); err != nil {
		fail("outboxnats: %v", err)
	}
	if err := outboxkafka.Register(kafkaRelay, offlineProducer{}, events.NewRouter(nil)); err != nil {
		fail("outboxkafka: %v", err)
	}
	if _, ok := natsRelay.Policy("order_placed"); !ok {
		fail("outboxnats did not register order_placed")
	}
	if _, ok := kafkaRelay.Policy("order_placed"); !ok {
		fail("outboxkafka did not register order_placed")
	}
	_, err = outbox.Enqueue(context.Background(), outboxent.Tx(offlineEnt{}), outbox.Message{EventType: "order_placed", Payload: []byte("{}")})
	if err == nil || !strings.Contains(err.Error(), "Standalone()") {
		fail("outboxent: Enqueue on a client outside a transaction: err = %v, want the refusal", err)
	}
	fmt.Println("trial: outbox VERSION, the generated package, outboxprom, outboxotel, outboxnats, outboxkafka and outboxorm work")
}
`

// trial is a module outside the repository that installs the release from the proxy.
type trial struct {
	dir string
	env []string
}

// newTrial prepares dir for a module that sees the repository's modules only through the
// file proxy at proxyDir, with a module cache of its own (modcache): the release's zips never
// enter the user's cache, where they would clash with the real release. Third-party modules
// come from the user's module cache when it has them, else from GOPROXY.
func newTrial(dir, proxyDir, modcache string) (*trial, error) {
	goEnv := func(name string) (string, error) {
		out, err := exec.Command("go", "env", name).Output()
		return strings.TrimSpace(string(out)), err
	}
	userCache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, fmt.Errorf("go env GOMODCACHE: %v", err)
	}
	upstream, err := goEnv("GOPROXY")
	if err != nil {
		return nil, fmt.Errorf("go env GOPROXY: %v", err)
	}
	proxies := []string{"file://" + filepath.ToSlash(proxyDir)}
	if st, err := os.Stat(filepath.Join(userCache, "cache", "download")); err == nil && st.IsDir() {
		proxies = append(proxies, "file://"+filepath.ToSlash(filepath.Join(userCache, "cache", "download")))
	}
	if upstream != "" && upstream != "off" {
		proxies = append(proxies, upstream)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-mod=mod",
		"GOTOOLCHAIN=local",
		"GOPROXY="+strings.Join(proxies, ","),
		"GONOSUMDB="+rootPath, // a file proxy's versions are not in the checksum database
		"GONOPROXY=",
		"GOPRIVATE=",
		"GOMODCACHE="+modcache,
	)
	return &trial{dir: dir, env: env}, nil
}

// run runs go with args in the trial module and returns its output, or an error holding it.
func (t *trial) run(args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = t.dir
	cmd.Env = t.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

func (t *trial) write(name, text string) error {
	p := filepath.Join(t.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(text), 0o644)
}

// install runs the trial: go get every published module at version, go get -tool the
// generator, go tool outboxgen version and generate, then build and run a program that uses
// each module and the generated package. step reports progress.
func (t *trial) install(version string, mods []*mod, step func(string)) error {
	step("go mod init example.com/trial")
	if _, err := t.run("mod", "init", "example.com/trial"); err != nil {
		return err
	}
	get := []string{"get"}
	for _, m := range mods {
		if m.Publish {
			get = append(get, m.Path+"@"+version)
		}
	}
	step("go " + strings.Join(get, " "))
	if _, err := t.run(get...); err != nil {
		return err
	}
	step("go get -tool " + rootPath + "/cmd/outboxgen@" + version)
	if _, err := t.run("get", "-tool", rootPath+"/cmd/outboxgen@"+version); err != nil {
		return err
	}
	out, err := t.run("tool", "outboxgen", "version")
	if err != nil {
		return err
	}
	if want := "outboxgen " + version + "\n"; out != want {
		return fmt.Errorf("go tool outboxgen version printed %q, want %q", out, want)
	}
	if err := t.write("events.yaml", trialCatalog); err != nil {
		return err
	}
	step("go tool outboxgen generate -f events.yaml")
	if _, err := t.run("tool", "outboxgen", "generate", "-f", "events.yaml"); err != nil {
		return err
	}
	if err := t.write("main.go", strings.ReplaceAll(trialMain, "VERSION", version)); err != nil {
		return err
	}
	step("go run . (a program using each module)")
	out, err = t.run("run", ".")
	if err != nil {
		return err
	}
	step(strings.TrimSpace(out))
	return nil
}

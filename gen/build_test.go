package gen

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestGeneratedCodeBuilds compiles, vets and staticchecks every success golden and every
// accepted catalog of the fuzz corpus in ONE temp module that imports the runtime through a
// replace to this checkout (one go build for all: the machine is small). The same module
// runs the wire-format and idempotency-key checks, and builds two programs that must NOT
// compile (a wrong payload type; a Handlers value missing a method).
func TestGeneratedCodeBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips building the goldens in a temp module")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the goldens: %v", err)
	}
	mod := newTempModule(t)
	var pkgs int
	for _, c := range loadGoldens(t) {
		out := c.run()
		if out[0].name == "error" {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(c.path), ".txt")
		for _, s := range out {
			mod.write(t, filepath.Join("cases", name, filepath.Base(s.name)), s.body)
		}
		pkgs++
	}
	// Packages that {go:} types of the corpus name: one is called outbox, like the runtime,
	// so the generated imports must tell them apart. They are written first: the generator
	// reads a {go:} key type's declaration to prove it a string kind.
	mod.write(t, "ids/ids.go", "// Package ids is a {go:} type target.\npackage ids\n\n// ID is a string kind.\ntype ID string\n")
	mod.write(t, "outbox/outbox.go", "// Package outbox shares its name with the runtime's.\npackage outbox\n\n// Thing is a string kind.\ntype Thing string\n")
	for i, src := range fuzzCorpus(t) {
		// The catalog lives in the temp module, so its {go:} paths (goldens/ids) are the
		// module's own packages, as they would be in a real one.
		dir := filepath.Join(mod.dir, "corpus", fmt.Sprintf("c%03d", i))
		files, err := Generate(filepath.Join(dir, "events.yaml"), src)
		if err != nil {
			if strings.Contains(string(src), "{go: goldens/") {
				t.Errorf("corpus entry %d names the temp module's packages and was refused; it is meant to build:\n%v", i, err)
			}
			continue
		}
		for _, p := range sortedKeys(files) {
			mod.write(t, filepath.Join("corpus", fmt.Sprintf("c%03d", i), filepath.Base(p)), string(files[p]))
		}
		pkgs++
	}
	asyncCases := writeAsyncAPICheck(t, mod)
	mod.write(t, "cmd/checks/main.go", checksProgram)
	mod.write(t, "cmd/rightpayload/main.go", rightPayload)
	mod.write(t, "cmd/allhandlers/main.go", allHandlers)
	mod.write(t, "testdata/wrongpayload/main.go", strings.Replace(rightPayload, "shop.OrderPlaced{OrderID: \"o-1\"}", "shop.Line{Sku: \"x\"}", 1))
	mod.write(t, "testdata/missinghandler/main.go", strings.Replace(allHandlers, "func (h) HandleOnlyMax", "func (h) handleOnlyMaxMisspelt", 1))
	checksTest, err := os.ReadFile(filepath.Join("testdata", "buildchecks", "payload_checks_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	mod.write(t, "cases/ok_payload_checks/payload_checks_test.go", string(checksTest))
	// The generator refuses a {go:} key field that is not a string kind (err_go_key_kind); if
	// the type changes after generation (here: the import now names an int type),
	// outbox.KeyText's ~string constraint still makes it a compile error, not a key of one rune.
	mod.write(t, "intids/intids.go", "// Package ids (in intids/) has an ID of int kind.\npackage ids\n\n// ID is an int kind.\ntype ID int\n")
	intKey, err := Generate(filepath.Join(mod.dir, "testdata", "intkey", "events.yaml"), []byte("version: 1\npackage: intkey\nevents:\n  e:\n    fields: {id: {go: goldens/ids.ID}}\n    idempotency_key: [id]\n"))
	if err != nil {
		t.Fatalf("a {go:} key of the temp module's string type ids.ID was refused: %v", err)
	}
	for _, p := range sortedKeys(intKey) {
		mod.write(t, filepath.Join("testdata", "intkey", filepath.Base(p)), strings.ReplaceAll(string(intKey[p]), `"goldens/ids"`, `"goldens/intids"`))
	}
	t.Logf("%d generated packages in %s", pkgs, mod.dir)

	if out, err := mod.run(goBin, "build", "./..."); err != nil {
		t.Fatalf("go build ./... of the generated code failed: %v\n%s", err, out)
	}
	if out, err := mod.run(goBin, "vet", "./..."); err != nil {
		t.Fatalf("go vet ./... of the generated code failed: %v\n%s", err, out)
	}
	t.Run("staticcheck", func(t *testing.T) {
		sc := findStaticcheck()
		if sc == "" {
			if os.Getenv("OUTBOX_REQUIRE_TOOLS") == "1" {
				t.Fatal("staticcheck is not installed and OUTBOX_REQUIRE_TOOLS=1: go install honnef.co/go/tools/cmd/staticcheck@v0.8.2")
			}
			t.Skip("staticcheck not found (go install honnef.co/go/tools/cmd/staticcheck@v0.8.2); scripts/test requires it")
		}
		if out, err := mod.run(sc, "./..."); err != nil {
			t.Fatalf("staticcheck ./... of the generated code failed: %v\n%s", err, out)
		}
	})
	t.Run("wire_and_keys", func(t *testing.T) {
		out, err := mod.run(goBin, "run", "./cmd/checks")
		if err != nil {
			t.Fatalf("cmd/checks failed: %v\n%s", err, out)
		}
		checkChecksOutput(t, string(out))
	})
	t.Run("asyncapi_payloads_decode", func(t *testing.T) {
		// The payloads TestAsyncAPIPayloads checks against the AsyncAPI schemas, through the
		// generated decoders: see asyncapi_decode_test.go.
		checkAsyncAPIDecodes(t, mod, goBin, asyncCases)
	})
	t.Run("payload_checks", func(t *testing.T) {
		// testdata/buildchecks/payload_checks_test.go: stored payloads that drifted from the
		// catalog are refused by the generated decoder; Validate refuses invalid UTF-8.
		out, err := mod.run(goBin, "test", "-count=1", "./cases/ok_payload_checks")
		if err != nil {
			t.Fatalf("go test of the generated payload checks failed: %v\n%s", err, out)
		}
	})
	t.Run("wrong_payload_type_does_not_compile", func(t *testing.T) {
		out, err := mod.run(goBin, "build", "./testdata/wrongpayload")
		if err == nil {
			t.Fatal("passing a shop.Line to EnqueueOrderPlaced compiled; it must be a type error")
		}
		if !strings.Contains(string(out), "cannot use shop.Line{…} (value of struct type shop.Line) as shop.OrderPlaced value") {
			t.Fatalf("the build failed, but not with the expected type error:\n%s", out)
		}
	})
	t.Run("non_string_go_key_does_not_compile", func(t *testing.T) {
		out, err := mod.run(goBin, "build", "./testdata/intkey")
		if err == nil {
			t.Fatal("an idempotency key field whose {go:} type became an int kind compiled; it must be a type error")
		}
		if !strings.Contains(string(out), "T (type ids.ID) does not satisfy ~string") {
			t.Fatalf("the build failed, but not with the expected constraint error:\n%s", out)
		}
	})
	t.Run("missing_handler_does_not_compile", func(t *testing.T) {
		out, err := mod.run(goBin, "build", "./testdata/missinghandler")
		if err == nil {
			t.Fatal("a Handlers value without HandleOnlyMax was accepted by NewRouter; it must be a type error")
		}
		if !strings.Contains(string(out), "missing method HandleOnlyMax") {
			t.Fatalf("the build failed, but not with the expected missing-method error:\n%s", out)
		}
	})
}

type tempModule struct{ dir string }

// newTempModule creates a module that requires this checkout through a replace, with this
// checkout's go.sum, so nothing is downloaded that the repository does not already use.
func newTempModule(t *testing.T) *tempModule {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	m := &tempModule{dir: t.TempDir()}
	m.write(t, "go.mod", fmt.Sprintf("module goldens\n\ngo 1.24\n\nrequire github.com/outboxgen/outboxgen v0.0.0\n\nreplace github.com/outboxgen/outboxgen => %s\n", root))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	m.write(t, "go.sum", string(sum))
	return m
}

func (m *tempModule) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(m.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (m *tempModule) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = m.dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.Bytes(), err
}

func findStaticcheck() string {
	if p, err := exec.LookPath("staticcheck"); err == nil {
		return p
	}
	home, _ := os.UserHomeDir()
	for _, dir := range []string{os.Getenv("GOBIN"), filepath.Join(os.Getenv("GOPATH"), "bin"), filepath.Join(home, "go", "bin")} {
		if dir == "" || dir == "bin" {
			continue
		}
		p := filepath.Join(dir, "staticcheck")
		if runtime.GOOS == "windows" {
			p += ".exe"
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// fuzzCorpus returns the inputs saved under testdata/fuzz/FuzzLoad.
func fuzzCorpus(t *testing.T) [][]byte {
	t.Helper()
	paths, err := filepath.Glob("testdata/fuzz/FuzzLoad/*")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(data), "\n", 3)
		if len(lines) < 2 || lines[0] != "go test fuzz v1" {
			t.Fatalf("%s: not a go fuzz corpus file", p)
		}
		lit := strings.TrimSpace(lines[1])
		if !strings.HasPrefix(lit, "[]byte(") || !strings.HasSuffix(lit, ")") {
			t.Fatalf("%s: expected one []byte value, got %s", p, lit)
		}
		s, err := strconv.Unquote(lit[len("[]byte(") : len(lit)-1])
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, []byte(s))
	}
	return out
}

// checksProgram runs in the temp module against the generated ok_wire_formats and ok_keys
// packages; its output is checked line by line by checkChecksOutput.
const checksProgram = `package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"goldens/cases/ok_keys"
	shop "goldens/cases/ok_ordering"
	"goldens/cases/ok_wire_formats"
)

func main() {
	kst := time.FixedZone("KST", 9*3600)
	at := time.Date(2026, 3, 1, 9, 30, 0, 123456789, kst)
	half := time.Date(2026, 3, 1, 9, 30, 0, 500000000, kst)
	p := wire.WireCheck{
		At: at, MaybeAt: &half, Took: 1500 * time.Millisecond, Raw: []byte("hi\x00"),
		Doc: json.RawMessage(` + "`" + `{"a":[1,2]}` + "`" + `), Times: []time.Time{at, half},
		ByName: map[string]time.Time{"x": at}, Nested: []map[string]time.Time{{"y": half}},
		Stamp: wire.Stamp{At: at, AtList: []time.Time{half}}, Level: wire.WireCheckLevelHigh,
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	fmt.Printf("wire %s\n", b)
	fmt.Printf("caller-untouched %s %s %s\n", p.At.Location(), p.Times[0].Location(), p.MaybeAt.Location())
	var back wire.WireCheck
	extra := strings.Replace(string(b), "{", ` + "`" + `{"added_later":[1,{"x":2}],` + "`" + `, 1)
	if err := json.Unmarshal([]byte(extra), &back); err != nil {
		panic(err)
	}
	fmt.Printf("decoded-with-unknown-field %v %v %v\n", back.At.Equal(at), back.MaybeAt.Equal(half), back.Level)
	fmt.Printf("key-at %s\n", p.IdempotencyKey())

	// Keys are stable: these two are compared with literals in the test.
	base := keys.QuotaReset{Account: "acme", Region: "eu:1", N: -1, N32: 32, N64: 1 << 40, U32: 7, U64: 1 << 63,
		Flag: true, At: at, Tier: keys.TierPro, Num: json.Number("3.14"), Note: "ignored"}
	fmt.Printf("key-fixed %s\n", base.IdempotencyKey())
	long := base
	long.Account = strings.Repeat("x", 300)
	fmt.Printf("key-long %s %d\n", long.IdempotencyKey(), len(long.IdempotencyKey()))
	other := base
	other.Note = "not a key field"
	fmt.Printf("key-non-key-field-ignored %v\n", other.IdempotencyKey() == base.IdempotencyKey())

	// Property: payloads that differ in any key field never share a key. Values come from a
	// small alphabet of separators, digits and escapes, so shifted splits ("a:1","b" vs
	// "a","1:b") are common.
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"", ":", "1", "2", ":1:", "\\", "|", "a", "0:", "é"}
	word := func() string {
		var sb strings.Builder
		for n := r.IntN(4); n > 0; n-- {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return sb.String()
	}
	seen := map[string]keys.QuotaReset{}
	collisions, distinct := 0, 0
	for i := 0; i < 200000; i++ {
		q := base
		q.Account, q.Region, q.Num = word(), word(), json.Number(word())
		q.N, q.N64 = r.IntN(3)-1, int64(r.IntN(3))
		q.Flag = r.IntN(2) == 0
		q.At = at.Add(time.Duration(r.IntN(2)) * time.Nanosecond)
		if r.IntN(2) == 0 {
			q.Tier = keys.TierFree
		}
		k := q.IdempotencyKey()
		if prev, ok := seen[k]; ok {
			if prev != q {
				collisions++
				if collisions < 5 {
					fmt.Printf("collision %q: %+v vs %+v\n", k, prev, q)
				}
			}
			continue
		}
		seen[k] = q
		distinct++
	}
	fmt.Printf("key-property collisions=%d distinct=%d\n", collisions, distinct)

	// Ordering keys: the group, then the values as in idempotency keys; events of one group
	// share keys, other groups never do; a long key keeps its group.
	placed := shop.OrderPlaced{OrderID: "o-42", Customer: "c"}
	paid := shop.OrderPaid{OrderID: "o-42", PaidAt: at}
	acct := shop.AccountChanged{Region: shop.AccountChangedRegionEu, Account: json.Number("7"), Since: at}
	fmt.Printf("order-key %s %s %s\n", placed.OrderingKey(), paid.OrderingKey(), acct.OrderingKey())
	longPlaced := shop.OrderPlaced{OrderID: strings.Repeat("é", 100)}
	fmt.Printf("order-key-long %s %d\n", longPlaced.OrderingKey(), len(longPlaced.OrderingKey()))
	fmt.Printf("order-key-long-shared %v\n", longPlaced.OrderingKey() == shop.OrderPaid{OrderID: longPlaced.OrderID}.OrderingKey())
	okeys := map[string]string{}
	ocollisions, odistinct, olong, ohashed := 0, 0, 0, 0
	for i := 0; i < 100000; i++ {
		id := word()
		if r.IntN(50) == 0 {
			id = strings.Repeat(id+"x", 190+r.IntN(40)) // past 191 bytes: hashed
		}
		region := shop.AccountChangedRegionEu
		if r.IntN(2) == 0 {
			region = shop.AccountChangedRegionUs
		}
		a := shop.AccountChanged{Region: region, Account: json.Number(word()), Since: at.Add(time.Duration(r.IntN(2)))}
		for _, kv := range [][2]string{
			{"orders " + id, shop.OrderPlaced{OrderID: id}.OrderingKey()},
			{"account " + string(a.Region) + "|" + string(a.Account) + "|" + a.Since.String(), a.OrderingKey()},
		} {
			if len(kv[1]) > 191 {
				olong++
			}
			if strings.Contains(kv[1], ":sha256:") {
				ohashed++
			}
			if prev, ok := okeys[kv[1]]; ok && prev != kv[0] {
				ocollisions++
				if ocollisions < 5 {
					fmt.Printf("ordering collision %q: %q vs %q\n", kv[1], prev, kv[0])
				}
			} else if !ok {
				okeys[kv[1]] = kv[0]
				odistinct++
			}
		}
	}
	fmt.Printf("order-key-property collisions=%d distinct=%d hashed=%d overlong=%d\n", ocollisions, odistinct, ohashed, olong)
}
`

// rightPayload compiles; wrongpayload is the same program with a Line where an OrderPlaced
// belongs, so only the payload type differs between the build that passes and the one that
// must fail.
const rightPayload = `package main

import (
	"context"
	"database/sql"

	shop "goldens/cases/ok_types_and_enums"
)

func main() {
	var tx *sql.Tx
	_, _ = shop.EnqueueOrderPlaced(context.Background(), tx, shop.OrderPlaced{OrderID: "o-1"})
}
`

// allHandlers compiles; missinghandler renames one method so the value no longer implements
// Handlers.
const allHandlers = `package main

import (
	"context"

	"github.com/outboxgen/outboxgen/runtime/outbox"

	policies "goldens/cases/ok_policies"
)

type h struct{}

func (h) HandleInheritsDefaults(context.Context, policies.InheritsDefaults, outbox.Delivery) error { return nil }
func (h) HandleOverridesAll(context.Context, policies.OverridesAll, outbox.Delivery) error         { return nil }
func (h) HandleOnlyMax(context.Context, policies.OnlyMax, outbox.Delivery) error                   { return nil }

func main() { _ = policies.NewRouter(h{}) }
`

// wireGolden is the payload the generated ok_wire_formats code writes for cmd/checks' value;
// TestAsyncAPIGoldenWirePayload validates it against the event's JSON Schema.
const wireGolden = `{"at":"2026-03-01T00:30:00.123456789Z","maybe_at":"2026-03-01T00:30:00.5Z","missing_at":null,"took":1500000000,"raw":"aGkA","doc":{"a":[1,2]},"nothing":null,"times":["2026-03-01T00:30:00.123456789Z","2026-03-01T00:30:00.5Z"],"by_name":{"x":"2026-03-01T00:30:00.123456789Z"},"nested":[{"y":"2026-03-01T00:30:00.5Z"}],"stamp":{"at":"2026-03-01T00:30:00.123456789Z","at_list":["2026-03-01T00:30:00.5Z"]},"level":"high"}`

func checkChecksOutput(t *testing.T, out string) {
	t.Helper()
	want := []string{
		// time: UTC RFC 3339 with nanoseconds trimmed; duration: integer ns; bytes: base64;
		// optional nil: null; json: verbatim; maps and lists of times and nested types too.
		"wire " + wireGolden,
		`caller-untouched KST KST KST`,
		`decoded-with-unknown-field true true high`,
		`key-at wire_check:30:2026-03-01T00:30:00.123456789Z`,
		`key-fixed quota_reset:4:acme:4:eu:1:2:-1:2:32:13:1099511627776:1:7:19:9223372036854775808:4:true:30:2026-03-01T00:30:00.123456789Z:3:pro:4:3.14`,
		`key-long sha256:`,
		`key-non-key-field-ignored true`,
		`key-property collisions=0 distinct=`,
		`order-key orders:4:o-42 orders:4:o-42 account_changed:2:eu:1:7:30:2026-03-01T00:30:00.123456789Z`,
		`order-key-long orders:sha256:`,
		`order-key-long-shared true`,
		`order-key-property collisions=0 distinct=`,
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			if l == w || (strings.HasSuffix(w, ":") || strings.HasSuffix(w, "=")) && strings.HasPrefix(l, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("checks output lacks %q; got:\n%s", w, out)
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "key-long ") {
			f := strings.Fields(l)
			if n, _ := strconv.Atoi(f[2]); n != len("sha256:")+64 || len(f[1]) > maxKeyLen {
				t.Errorf("a long key must be sha256:<64 hex>, got %q", l)
			}
		}
		if strings.HasPrefix(l, "order-key-long ") {
			f := strings.Fields(l)
			if n, _ := strconv.Atoi(f[2]); n != len("orders:sha256:")+64 || len(f[1]) > maxKeyLen {
				t.Errorf("a long ordering key must be orders:sha256:<64 hex>, got %q", l)
			}
		}
		if strings.HasPrefix(l, "order-key-property ") && (!strings.HasSuffix(l, "overlong=0") || strings.Contains(l, "distinct=0 ") || strings.Contains(l, "hashed=0 ")) {
			t.Errorf("ordering keys over 191 bytes, or none generated, or none hashed: %q", l)
		}
		if strings.HasPrefix(l, "key-property ") || strings.HasPrefix(l, "order-key-property ") {
			t.Log(l)
		}
		if strings.HasPrefix(l, "key-property ") && strings.HasSuffix(l, "distinct=0") {
			t.Errorf("the property check generated no keys: %q", l)
		}
	}
}

package gen

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The payloads TestAsyncAPIPayloads validates against the schemas also go through the
// generated decoders, in TestGeneratedCodeBuilds' temp module: each valid one must decode, and
// what the decoded value encodes to (what EnqueueX would write for it) must validate against
// the schema too; each broken one must be refused by the decoder unless it is marked as one
// only the schema refuses (a null string inside a list, a time with an offset or trailing
// zeros: encoding/json reads them, but Enqueue never writes them).

// decodeCheck is what the temp module's cmd/asyncapicheck reads and writes.
type decodeCheck struct {
	Case, Event, Name string
	Payload           json.RawMessage
	// Filled in by cmd/asyncapicheck:
	Err     string          `json:",omitempty"`
	Encoded json.RawMessage `json:",omitempty"`
}

type asyncAPICheckCase struct {
	name   string // the golden's, and the package directory's under cases/
	m      *file
	checks []decodeCheck
	want   map[string]payloadInstance // by Event + " " + Name
}

// writeAsyncAPICheck writes, for every valid golden catalog with outbox events, a helper into
// its generated package that decodes a payload as its handler adapter does, and the program
// cmd/asyncapicheck that runs the payloads through them.
func writeAsyncAPICheck(t *testing.T, mod *tempModule) []*asyncAPICheckCase {
	t.Helper()
	var cases []*asyncAPICheckCase
	for c, m := range okGoldens(t) {
		if len(m.outboxEvents()) == 0 {
			continue
		}
		cases = append(cases, &asyncAPICheckCase{name: strings.TrimSuffix(filepath.Base(c.path), ".txt"), m: m, want: map[string]payloadInstance{}})
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].name < cases[j].name })
	var imports, decoders []string
	for i, c := range cases {
		var sw []string
		for _, e := range c.m.outboxEvents() {
			sw = append(sw, fmt.Sprintf("\tcase %q:\n\t\te, err := decode%s(raw)\n\t\tif err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t\treturn json.Marshal(e)", e.wire, e.goName))
			for _, p := range payloadInstances(t, e) {
				c.checks = append(c.checks, decodeCheck{Case: c.name, Event: e.wire, Name: p.name, Payload: p.json(t)})
				c.want[e.wire+" "+p.name] = p
			}
		}
		mod.write(t, filepath.Join("cases", c.name, "zz_asyncapi_check.go"), fmt.Sprintf(`package %s

import (
	"encoding/json"
	"fmt"
)

// DecodeForAsyncAPICheck decodes raw as the handler adapter of event does, then encodes the
// value as EnqueueX would.
func DecodeForAsyncAPICheck(event string, raw []byte) ([]byte, error) {
	switch event {
%s
	}
	return nil, fmt.Errorf("no outbox event %%q", event)
}
`, c.m.pkg, strings.Join(sw, "\n")))
		imports = append(imports, fmt.Sprintf("\tc%d %q", i, "goldens/cases/"+c.name))
		decoders = append(decoders, fmt.Sprintf("\t\t%q: c%d.DecodeForAsyncAPICheck,", c.name, i))
	}
	mod.write(t, "cmd/asyncapicheck/main.go", fmt.Sprintf(`// Command asyncapicheck decodes the payloads in the file named by its argument with the
// generated decoders and prints the outcome of each, as JSON.
package main

import (
	"encoding/json"
	"os"

%s
)

type check struct {
	Case, Event, Name string
	Payload           json.RawMessage
	Err               string          `+"`json:\",omitempty\"`"+`
	Encoded           json.RawMessage `+"`json:\",omitempty\"`"+`
}

func main() {
	decoders := map[string]func(string, []byte) ([]byte, error){
%s
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var checks []check
	if err := json.Unmarshal(data, &checks); err != nil {
		panic(err)
	}
	for i, c := range checks {
		out, err := decoders[c.Case](c.Event, c.Payload)
		if err != nil {
			checks[i].Err = err.Error()
			continue
		}
		checks[i].Encoded = out
	}
	if err := json.NewEncoder(os.Stdout).Encode(checks); err != nil {
		panic(err)
	}
}
`, strings.Join(imports, "\n"), strings.Join(decoders, "\n")))
	var checks []decodeCheck
	for _, c := range cases {
		checks = append(checks, c.checks...)
	}
	data, err := json.Marshal(checks)
	if err != nil {
		t.Fatal(err)
	}
	mod.write(t, "testdata/asyncapi_payloads.json", string(data))
	return cases
}

// checkAsyncAPIDecodes runs cmd/asyncapicheck and compares each decoder outcome with what
// the payload is marked as; valid payloads' re-encodings are validated against the schema.
func checkAsyncAPIDecodes(t *testing.T, mod *tempModule, goBin string, cases []*asyncAPICheckCase) {
	out, err := mod.run(goBin, "run", "./cmd/asyncapicheck", "testdata/asyncapi_payloads.json")
	if err != nil {
		t.Fatalf("cmd/asyncapicheck failed: %v\n%s", err, out)
	}
	var got []decodeCheck
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("cmd/asyncapicheck output: %v\n%s", err, out)
	}
	byCase := map[string]*asyncAPICheckCase{}
	for _, c := range cases {
		byCase[c.name] = c
	}
	var decoded, refused, schemaOnly int
	schemas := map[string]map[string]*jsonschema.Schema{}
	for _, g := range got {
		c := byCase[g.Case]
		p, ok := c.want[g.Event+" "+g.Name]
		if !ok {
			t.Fatalf("unknown payload %s %s %s", g.Case, g.Event, g.Name)
		}
		switch {
		case p.decodes && g.Err != "":
			t.Errorf("%s %s %s: the generated decoder refused it: %s\n%s", g.Case, g.Event, g.Name, g.Err, g.Payload)
			continue
		case !p.decodes && g.Err == "":
			t.Errorf("%s %s %s: the generated decoder accepted it\n%s", g.Case, g.Event, g.Name, g.Payload)
			continue
		case !p.decodes:
			refused++
			continue
		case !p.valid:
			schemaOnly++
			continue
		}
		decoded++
		if schemas[g.Case] == nil {
			doc, err := emitAsyncAPI(c.m, "events.yaml", DefaultAddressPrefix)
			if err != nil {
				t.Fatal(err)
			}
			schemas[g.Case] = payloadSchemas(t, doc, c.m.outboxEvents())
		}
		if err := validateJSON(schemas[g.Case][g.Event], g.Encoded); err != nil {
			t.Errorf("%s %s %s: what EnqueueX writes for the decoded value is invalid: %v\n%s", g.Case, g.Event, g.Name, err, g.Encoded)
		}
	}
	t.Logf("%d payloads decoded and re-encoded valid, %d refused by decoder and schema, %d refused by the schema only", decoded, refused, schemaOnly)
	if decoded == 0 || refused == 0 || len(got) != countChecks(cases) {
		t.Errorf("%d results for %d payloads (%d decoded, %d refused)", len(got), countChecks(cases), decoded, refused)
	}
}

func countChecks(cases []*asyncAPICheckCase) int {
	n := 0
	for _, c := range cases {
		n += len(c.checks)
	}
	return n
}
